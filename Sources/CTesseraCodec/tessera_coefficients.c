// tessera_coefficients.c — libjpeg's whole-image coefficient buffers, bounded in memory.
//
// Why: a multi-scan JPEG (progressive, or sequential with components in separate scans) is
// decoded by libjpeg into a buffer of every block's 64 coefficients, 2 bytes each: 72 MB for a
// 24-megapixel photo, whatever the output scale. libjpeg-turbo's memory manager can only hold
// these in memory ("Backing store not supported" past max_memory_to_use). Its memory manager
// is a public table of methods (libjpeg.txt, "Memory management"), so the four that deal with
// virtual block arrays are replaced here: arrays that fit the decoder's allowance live in
// memory; larger ones live in an unnamed spill file on disk, each seen through a window of rows
// that libjpeg sweeps top to bottom once per scan (tessera_rowstore.c).
//
// `struct jvirt_barray_control` is opaque in jpeglib.h; libjpeg's own definition is private to
// jmemmgr.c, which never sees an array made here (only these methods touch them).
#include "tessera_codec_internal.h"

#include <stdlib.h>
#include <string.h>
#include <jerror.h>

struct jvirt_barray_control {
    tessera_rowstore store;
    JDIMENSION rows;
    JDIMENSION blocks_per_row;
    JDIMENSION max_access;
    JBLOCKROW *row_pointers;          // one per row of the window, handed to libjpeg by access
    int realized;
    int pointed;                      // row_pointers describe the window starting at pointed_first
    size_t pointed_first;
    struct jvirt_barray_control *next;
};

static tessera_coefficients *coefficients_of(j_common_ptr cinfo) {
    return ((tessera_coefficients_client *)cinfo->client_data)->coefficients;
}

static void fail(j_common_ptr cinfo, const char *message) {
    ((tessera_coefficients_client *)cinfo->client_data)->fail(cinfo, message);
}

static jvirt_barray_ptr request_virt_barray(j_common_ptr cinfo, int pool_id, boolean pre_zero,
                                            JDIMENSION blocksperrow, JDIMENSION numrows,
                                            JDIMENSION maxaccess) {
    (void)pre_zero;  // every array starts zeroed: calloc, or holes in the spill file
    if (pool_id != JPOOL_IMAGE) ERREXIT1(cinfo, JERR_BAD_POOL_ID, pool_id);
    tessera_coefficients *c = coefficients_of(cinfo);
    struct jvirt_barray_control *array = calloc(1, sizeof *array);
    if (array == NULL) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 21);
    array->rows = numrows;
    array->blocks_per_row = blocksperrow;
    array->max_access = maxaccess;
    // Appended, so that arrays are laid out in the spill file in request (component) order.
    struct jvirt_barray_control **link = &c->arrays;
    while (*link != NULL) link = &(*link)->next;
    *link = array;
    return array;
}

static void release_arrays(tessera_coefficients *c) {
    struct jvirt_barray_control *array = c->arrays;
    while (array != NULL) {
        struct jvirt_barray_control *next = array->next;
        if (array->realized) tessera_rowstore_free(&array->store);
        free(array->row_pointers);
        free(array);
        array = next;
    }
    c->arrays = NULL;
    c->spilled = 0;
    c->total_bytes = 0;
}

static void realize_virt_arrays(j_common_ptr cinfo) {
    tessera_coefficients *c = coefficients_of(cinfo);
    (*c->libjpeg_realize)(cinfo);  // libjpeg's own (small-sample) arrays, if any
    size_t total = 0, count = 0;
    for (struct jvirt_barray_control *a = c->arrays; a != NULL; a = a->next) {
        if (a->realized) continue;
        total += (size_t)a->rows * a->blocks_per_row * sizeof(JBLOCK);
        count++;
    }
    if (count == 0) return;
    c->total_bytes = total;
    int spill = total > (size_t)c->memory_limit;
    if (spill && c->spill == NULL) {
        char message[JMSG_LENGTH_MAX];
        snprintf(message, sizeof message,
                 "needs %.1f MiB for its coefficients and no spill file was given", (double)total / 1048576.0);
        fail(cinfo, message);
    }
    c->spilled = spill;
    uint64_t offset = 0;
    for (struct jvirt_barray_control *a = c->arrays; a != NULL; a = a->next) {
        if (a->realized) continue;
        size_t row_bytes = (size_t)a->blocks_per_row * sizeof(JBLOCK);
        size_t window = a->rows;
        if (spill) {
            // Each array's window gets an equal share of the allowance, at least what libjpeg
            // accesses at once.
            size_t share = (size_t)c->memory_limit / count;
            window = row_bytes ? share / row_bytes : a->rows;
            if (window < a->max_access) window = a->max_access;
        }
        if (tessera_rowstore_init(&a->store, row_bytes, a->rows, window, spill ? c->spill : NULL, offset) != 0) {
            ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 22);
        }
        a->row_pointers = calloc(a->store.window_rows, sizeof(JBLOCKROW));
        if (a->row_pointers == NULL) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 23);
        a->realized = 1;
        offset += (uint64_t)row_bytes * a->rows;
    }
}

static JBLOCKARRAY access_virt_barray(j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start_row,
                                      JDIMENSION num_rows, boolean writable) {
    if (!ptr->realized || num_rows > ptr->max_access || start_row + num_rows > ptr->rows) {
        ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    }
    uint8_t *rows = tessera_rowstore_access(&ptr->store, start_row, num_rows, writable);
    if (rows == NULL) fail(cinfo, "could not use the decoder's spill file");
    // Pointers to every row of the window, not only the rows asked for: libjpeg-turbo's block
    // smoothing (decompress_smooth_data) can read a row past its request at the image's last
    // iMCU rows, which its own memory manager tolerates because it too hands out a pointer
    // into a whole window's row array. (Found by the fuzzer: scripts/fuzz.sh 300 7.)
    tessera_rowstore *store = &ptr->store;
    if (!ptr->pointed || ptr->pointed_first != store->first) {
        for (size_t i = 0; i < store->valid; i++) {
            ptr->row_pointers[i] = (JBLOCKROW)(store->window + i * store->row_bytes);
        }
        ptr->pointed = 1;
        ptr->pointed_first = store->first;
    }
    return ptr->row_pointers + (start_row - store->first);
}

static void free_pool(j_common_ptr cinfo, int pool_id) {
    tessera_coefficients *c = coefficients_of(cinfo);
    if (pool_id == JPOOL_IMAGE) release_arrays(c);
    (*c->libjpeg_free_pool)(cinfo, pool_id);
}

static void self_destruct(j_common_ptr cinfo) {
    tessera_coefficients *c = coefficients_of(cinfo);
    release_arrays(c);
    (*c->libjpeg_self_destruct)(cinfo);
}

void tessera_coefficients_install(j_decompress_ptr cinfo) {
    struct jpeg_memory_mgr *mem = cinfo->mem;
    tessera_coefficients *c = coefficients_of((j_common_ptr)cinfo);
    c->arrays = NULL;
    c->libjpeg_realize = mem->realize_virt_arrays;
    c->libjpeg_free_pool = mem->free_pool;
    c->libjpeg_self_destruct = mem->self_destruct;
    mem->request_virt_barray = request_virt_barray;
    mem->realize_virt_arrays = realize_virt_arrays;
    mem->access_virt_barray = access_virt_barray;
    mem->free_pool = free_pool;
    mem->self_destruct = self_destruct;
}
