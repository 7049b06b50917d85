// tessera_rowstore.c — whole-image buffers held in memory or in a window over a spill file.
// See tessera_private.h. Used by the libjpeg coefficient arrays (tessera_coefficients.c) and by
// the DC decoder's planes (tessera_dc.c). Single-threaded: a store belongs to one decoder.
#include "tessera_codec_internal.h"

#include <stdlib.h>
#include <string.h>

int tessera_rowstore_init(tessera_rowstore *store, size_t row_bytes, size_t rows, size_t window_rows,
                          const tessera_spill *spill, uint64_t file_offset) {
    memset(store, 0, sizeof *store);
    store->row_bytes = row_bytes;
    store->rows = rows;
    store->spill = spill;
    store->file_offset = file_offset;
    if (spill == NULL || window_rows >= rows) {
        window_rows = rows;
        store->spill = NULL;  // everything fits: no file
    }
    if (window_rows < 1) window_rows = 1;
    store->window_rows = window_rows;
    store->window = calloc(window_rows, row_bytes ? row_bytes : 1);
    if (store->window == NULL) return -1;
    if (store->spill == NULL) store->valid = rows;
    return 0;
}

static int rowstore_write_back(tessera_rowstore *store) {
    if (!store->dirty || store->valid == 0) return 0;
    uint64_t offset = store->file_offset + (uint64_t)store->first * store->row_bytes;
    if (store->spill->write_at(store->spill->context, store->window, store->valid * store->row_bytes, offset) != 0) {
        return -1;
    }
    if (store->first + store->valid > store->file_rows) store->file_rows = store->first + store->valid;
    store->dirty = 0;
    return 0;
}

uint8_t *tessera_rowstore_access(tessera_rowstore *store, size_t start, size_t count, int writable) {
    if (store->spill == NULL) {
        if (writable) store->dirty = 1;
        return store->window + start * store->row_bytes;
    }
    if (start < store->first || start + count > store->first + store->valid) {
        if (rowstore_write_back(store) != 0) return NULL;
        // Forward sweeps start the window at the row asked for; a step back ends it there.
        size_t first;
        if (store->valid == 0 || start >= store->first) {
            first = start;
        } else {
            first = start + count > store->window_rows ? start + count - store->window_rows : 0;
        }
        if (first + store->window_rows > store->rows) first = store->rows - store->window_rows;
        size_t held = store->window_rows;
        // Rows that were never written (beyond the file's end for this store) are zeros.
        size_t from_file = 0;
        if (first < store->file_rows) {
            from_file = store->file_rows - first;
            if (from_file > held) from_file = held;
        }
        if (from_file > 0) {
            uint64_t offset = store->file_offset + (uint64_t)first * store->row_bytes;
            if (store->spill->read_at(store->spill->context, store->window, from_file * store->row_bytes, offset) != 0) {
                return NULL;
            }
        }
        memset(store->window + from_file * store->row_bytes, 0, (held - from_file) * store->row_bytes);
        store->first = first;
        store->valid = held;
    }
    if (writable) store->dirty = 1;
    return store->window + (start - store->first) * store->row_bytes;
}

void tessera_rowstore_free(tessera_rowstore *store) {
    free(store->window);
    store->window = NULL;
}
