// tessera_codec_internal.h — for C only (not in the Swift module): the row store that holds
// whole-image buffers (in memory, or in a window over a spill file), and the replacement for
// libjpeg's virtual coefficient arrays built on it, which the libjpeg shim installs.
#ifndef TESSERA_CODEC_INTERNAL_H
#define TESSERA_CODEC_INTERNAL_H

#include <stdio.h>
#include <jpeglib.h>

#include "tessera_codec.h"

// MARK: Row store

/// `rows` rows of `row_bytes` bytes, accessed a few rows at a time, in a forward sweep (a scan),
/// any number of sweeps. With `spill` NULL every row is in memory. Otherwise `window_rows` rows
/// are: an access outside them writes the window back to the spill file (if it was written to)
/// and reads the rows asked for; rows never written read as zeros.
typedef struct {
    size_t row_bytes;
    size_t rows;
    size_t window_rows;
    size_t first;          // first row held in `window`
    size_t valid;          // rows held (0 before the first access)
    int dirty;
    uint64_t file_offset;  // where row 0 lives in the spill file
    size_t file_rows;      // rows [0, file_rows) have a place in the file (written or a hole)
    uint8_t *window;
    const tessera_spill *spill;
} tessera_rowstore;

/// Allocates the store: whole in memory when `spill` is NULL, else a zeroed window of
/// `window_rows` rows (at least one). Returns 0, or -1 when malloc fails.
int tessera_rowstore_init(tessera_rowstore *store, size_t row_bytes, size_t rows, size_t window_rows,
                          const tessera_spill *spill, uint64_t file_offset);

/// The address of row `start`, with rows start ..< start + count (count <= window_rows) held
/// contiguously until the next access. NULL when the spill file could not be read or written.
uint8_t *tessera_rowstore_access(tessera_rowstore *store, size_t start, size_t count, int writable);

void tessera_rowstore_free(tessera_rowstore *store);

// MARK: Coefficient arrays for libjpeg

/// Where a decoder keeps a multi-scan file's coefficients (libjpeg's "virtual block arrays"):
/// `tessera_coefficients_install` replaces four methods of libjpeg's memory manager
/// (request_virt_barray, realize_virt_arrays, access_virt_barray, free_pool and
/// self_destruct to release them) with row stores of our own. The arrays live in memory when
/// they fit `memory_limit` bytes, else in a spill file through windows that together fit it.
typedef struct tessera_coefficients {
    struct jvirt_barray_control *arrays;  // requested, in request order
    long memory_limit;
    const tessera_spill *spill;           // NULL: in memory only, failing past memory_limit
    int spilled;                          // set when realize chose the spill file
    int compact;                          // keep only what the output scale reads (install sets it)
    size_t total_bytes;                   // of every array (stored blocks and expanded windows), set by realize
    size_t allocated_bytes;               // what realize allocated for them (less when they spill)
    void (*libjpeg_realize)(j_common_ptr);
    void (*libjpeg_free_pool)(j_common_ptr, int);
    void (*libjpeg_self_destruct)(j_common_ptr);
} tessera_coefficients;

/// What the coefficient arrays need from the decoder that installs them: its
/// `cinfo->client_data` must point to one of these.
typedef struct {
    tessera_coefficients *coefficients;
    /// Stops the decode with `message` as its reason (through libjpeg's error_exit: never returns).
    void (*fail)(j_common_ptr cinfo, const char *message);
} tessera_coefficients_client;

/// Installs the arrays in `cinfo`, whose client_data is a `tessera_coefficients_client`.
void tessera_coefficients_install(j_decompress_ptr cinfo);

/// Bytes the arrays store a block of a component whose inverse DCT has `scaled_size`
/// (jpeg_component_info.DCT_scaled_size): 128 when every coefficient is read, fewer otherwise.
size_t tessera_coefficients_block_bytes(int scaled_size);

/// What the arrays will take for `cinfo` at the scale jpeg_calc_output_dimensions last set:
/// `stored`, every component's blocks as stored; `windows`, the whole-block windows of the
/// compact arrays (in memory whatever happens); `minimum`, the least they take spilling
/// (windows plus a store window of the rows libjpeg accesses at once for each array).
void tessera_coefficients_plan(j_decompress_ptr cinfo, uint64_t *stored, uint64_t *windows, uint64_t *minimum);

#endif
