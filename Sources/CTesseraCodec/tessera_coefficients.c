// tessera_coefficients.c — libjpeg's whole-image coefficient buffers, bounded in memory, and
// holding only the coefficients the output scale reads.
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
// Scaled output reads fewer coefficients than 64, so a block is stored compact (`kept_set`):
// libjpeg still decodes every scan, into a window of whole blocks that is expanded from the
// compact store when libjpeg asks for rows and folded back when it moves on. Which coefficients
// a component's inverse DCT reads depends on its DCT_scaled_size (jddctmgr.c picks the routine):
//   - 1, 2 and 4 use jidctred.c, whose outputs are averages of the full 8-point IDCT's (of 8,
//     4 and 2 adjacent outputs): the basis functions that sum to zero over those spans drop
//     out, and the rest stay. 1: coefficient 0 only; 2: rows and columns 0, 1, 3, 5 and 7
//     (2, 4 and 6 average to zero over 4 samples); 4: every row and column but 4.
//   - 3, 5, 6 and 7 use jidctint.c's N x N routines, which read the top-left N x N.
//   - 8 reads all 64: such arrays are stored whole, as before.
// So the top-left 2 x 2 or 4 x 4 alone would not give libjpeg's picture; these sets do, exactly.
// Every set also holds zig-zag 0...9, which libjpeg's block smoothing (jdcoefct.c, for a
// progressive file whose last scans are missing) reads and estimates.
//
// A coefficient that is not kept still matters to the entropy decoder: an AC refinement scan
// (T.81 G.1.2.3) reads a correction bit for each coefficient already non-zero in its band, and
// libjpeg knows which are by their values. So each compact block also keeps a 64-bit mask of
// its non-zero coefficients that are not kept, and the expanded block gets 1 in those places
// (any non-zero value does: refinement only ever moves a non-zero value away from zero, and its
// magnitude is not used otherwise). While libjpeg decodes a scan (writable accesses) only the
// scan's band Ss...Se (and the few past Se that corrupt data can reach) is expanded and folded
// back: libjpeg's entropy decoders touch no other coefficient, and a DC scan then costs one
// coefficient a block instead of 64.
//
// `struct jvirt_barray_control` is opaque in jpeglib.h; libjpeg's own definition is private to
// jmemmgr.c, which never sees an array made here (only these methods touch them).
#include "tessera_codec_internal.h"

#include <stdlib.h>
#include <string.h>
#include <jerror.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// T.81 figure A.6: the zig-zag index of each natural-order (row-major) position.
static const uint8_t zigzag_of[64] = {
     0,  1,  5,  6, 14, 15, 27, 28,
     2,  4,  7, 13, 16, 26, 29, 42,
     3,  8, 12, 17, 25, 30, 41, 43,
     9, 11, 18, 24, 31, 40, 44, 53,
    10, 19, 23, 32, 39, 45, 52, 54,
    20, 22, 33, 38, 46, 51, 55, 60,
    21, 34, 37, 47, 50, 56, 59, 61,
    35, 36, 48, 49, 57, 58, 62, 63,
};

/// The coefficients a component's blocks keep: `count` of them (64: stored whole).
typedef struct {
    int count;
    uint8_t position[64];    // natural-order index of each kept coefficient, ascending
    uint8_t slot[64];        // natural-order index -> its place in `position`, 0xFF when not kept
} kept_set;

/// Mask bytes in front of a compact block's coefficients.
#define MASK_BYTES 8

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
    // Compact storage (kept.count < 64): the store holds `block_bytes` a block, libjpeg sees
    // `expanded` (whole blocks) for rows expanded_first ..< expanded_first + expanded_count.
    kept_set kept;
    size_t block_bytes;
    JBLOCK *expanded;
    size_t expanded_first, expanded_count;
    int expanded_dirty;
    int band_ss, band_se;             // zig-zag band the window holds (0...63: every coefficient)
    int band_kept;                    // entries of band_kept_pos and band_kept_slot
    uint8_t band_kept_pos[64];        // natural-order index of each kept coefficient in the band
    uint8_t band_kept_slot[64];       // and its place in the compact block
    uint64_t band_loose_mask;         // natural-order bits of the loose coefficients in the band
};

static tessera_coefficients *coefficients_of(j_common_ptr cinfo) {
    return ((tessera_coefficients_client *)cinfo->client_data)->coefficients;
}

static void fail(j_common_ptr cinfo, const char *message) {
    ((tessera_coefficients_client *)cinfo->client_data)->fail(cinfo, message);
}

// MARK: Kept sets

/// Whether the IDCT of size `scaled` (DCT_scaled_size) reads row (or column) `i` of a block.
static int idct_reads(int scaled, int i) {
    switch (scaled) {
    case 1: return i == 0;
    case 2: return i == 0 || (i & 1);
    case 4: return i != 4;
    default: return scaled >= 8 || i < scaled;
    }
}

static void kept_set_for(kept_set *set, int scaled) {
    set->count = 0;
    for (int p = 0; p < 64; p++) {
        int kept = zigzag_of[p] <= 9 || (idct_reads(scaled, p / 8) && idct_reads(scaled, p % 8));
        set->slot[p] = kept ? (uint8_t)set->count : 0xFF;
        if (kept) set->position[set->count++] = (uint8_t)p;
    }
}

size_t tessera_coefficients_block_bytes(int scaled_size) {
    kept_set set;
    kept_set_for(&set, scaled_size);
    return set.count == 64 ? sizeof(JBLOCK) : MASK_BYTES + (size_t)set.count * sizeof(JCOEF);
}

/// Rows libjpeg accesses at once in an array of a component with `v_samp_factor` (jdcoefct.c:
/// an iMCU row, 5 for block smoothing in a progressive file).
static size_t access_rows(j_decompress_ptr cinfo, int v_samp_factor) {
    return (size_t)v_samp_factor * (cinfo->progressive_mode ? 5 : 1);
}

/// Whether `cinfo`'s arrays may be compact. Not for arithmetic coding: its AC refinement
/// (jdarith.c) looks for the band's last non-zero coefficient below Ss too, outside the band
/// that is expanded while a scan is decoded.
static int may_compact(j_decompress_ptr cinfo) { return !cinfo->arith_code; }

void tessera_coefficients_plan(j_decompress_ptr cinfo, uint64_t *stored, uint64_t *windows, uint64_t *minimum) {
    *stored = *windows = *minimum = 0;
    for (int ci = 0; ci < cinfo->num_components; ci++) {
        const jpeg_component_info *comp = &cinfo->comp_info[ci];
        uint64_t w = (comp->width_in_blocks + comp->h_samp_factor - 1) / comp->h_samp_factor * comp->h_samp_factor;
        uint64_t h = (comp->height_in_blocks + comp->v_samp_factor - 1) / comp->v_samp_factor * comp->v_samp_factor;
        size_t block = may_compact(cinfo) ? tessera_coefficients_block_bytes(comp->DCT_scaled_size) : sizeof(JBLOCK);
        uint64_t rows = access_rows(cinfo, comp->v_samp_factor);
        if (rows > h) rows = h;
        *stored += w * h * block;
        if (block != sizeof(JBLOCK)) *windows += w * rows * sizeof(JBLOCK);
        *minimum += w * rows * block;
    }
    *minimum += *windows;
}

// MARK: Expanding and folding back

/// Makes the window describe zig-zag band ss...se: which kept coefficients it expands and
/// folds back, and which loose (not kept) ones it marks.
static void set_band(struct jvirt_barray_control *a, int ss, int se) {
    a->band_ss = ss;
    a->band_se = se;
    a->band_kept = 0;
    a->band_loose_mask = 0;
    for (int p = 0; p < 64; p++) {
        if (zigzag_of[p] < ss || zigzag_of[p] > se) continue;
        if (a->kept.slot[p] != 0xFF) {
            a->band_kept_pos[a->band_kept] = (uint8_t)p;
            a->band_kept_slot[a->band_kept++] = a->kept.slot[p];
        } else {
            a->band_loose_mask |= (uint64_t)1 << p;
        }
    }
}

/// Bit p set when natural-order coefficient p of `block` is non-zero.
static inline uint64_t nonzero_mask(const JCOEF *block) {
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    uint64_t mask = 0;
    for (int i = 0; i < 8; i += 2) {
        __m128i a = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(block + 8 * i)), zero);
        __m128i b = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(block + 8 * i + 8)), zero);
        uint64_t zeros = (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_packs_epi16(a, b));
        mask |= (~zeros & 0xFFFF) << (8 * i);
    }
    return mask;
#else
    uint64_t mask = 0;
    for (int p = 0; p < 64; p++) mask |= (uint64_t)(block[p] != 0) << p;
    return mask;
#endif
}

// The window's blocks are cleared and then get the band's kept values and a 1 for each
// non-zero loose coefficient in the band: libjpeg reads and writes nothing else during a scan,
// and the inverse DCT reads only kept coefficients (zero elsewhere).
static void expand_rows(struct jvirt_barray_control *a, const uint8_t *compact, size_t count) {
    size_t blocks = count * a->blocks_per_row;
    memset(a->expanded, 0, blocks * sizeof(JBLOCK));
    int kept = a->band_kept;
    for (size_t b = 0; b < blocks; b++) {
        const uint8_t *source = compact + b * a->block_bytes;
        const JCOEF *values = (const JCOEF *)(source + MASK_BYTES);
        JCOEF *block = a->expanded[b];
        for (int i = 0; i < kept; i++) block[a->band_kept_pos[i]] = values[a->band_kept_slot[i]];
        uint64_t mask;
        memcpy(&mask, source, sizeof mask);
        mask &= a->band_loose_mask;
        while (mask != 0) {
            block[__builtin_ctzll(mask)] = 1;
            mask &= mask - 1;
        }
    }
}

static void fold_rows(struct jvirt_barray_control *a, uint8_t *compact, size_t count) {
    size_t blocks = count * a->blocks_per_row;
    int kept = a->band_kept;
    uint64_t loose = a->band_loose_mask;
    for (size_t b = 0; b < blocks; b++) {
        uint8_t *target = compact + b * a->block_bytes;
        JCOEF *values = (JCOEF *)(target + MASK_BYTES);
        const JCOEF *block = a->expanded[b];
        for (int i = 0; i < kept; i++) values[a->band_kept_slot[i]] = block[a->band_kept_pos[i]];
        if (loose != 0) {
            uint64_t mask;
            memcpy(&mask, target, sizeof mask);
            mask = (mask & ~loose) | (nonzero_mask(block) & loose);
            memcpy(target, &mask, sizeof mask);
        }
    }
}

/// Folds a written window back into the store.
static void flush_window(j_common_ptr cinfo, struct jvirt_barray_control *a) {
    if (!a->expanded_dirty || a->expanded_count == 0) return;
    uint8_t *rows = tessera_rowstore_access(&a->store, a->expanded_first, a->expanded_count, 1);
    if (rows == NULL) fail(cinfo, "could not use the decoder's spill file");
    fold_rows(a, rows, a->expanded_count);
    a->expanded_dirty = 0;
}

static JBLOCKARRAY access_compact(j_common_ptr cinfo, struct jvirt_barray_control *a, JDIMENSION start_row,
                                  JDIMENSION num_rows, boolean writable) {
    // libjpeg writes while it decodes a scan, and only the scan's band; it reads everything
    // for output. (cinfo->Ss and Se are the current scan's; a sequential scan's are 0 and 63.)
    int ss = 0, se = 63;
    if (writable && cinfo->is_decompressor) {
        j_decompress_ptr d = (j_decompress_ptr)cinfo;
        if (d->progressive_mode && d->Ss >= 0 && d->Se <= 63 && d->Ss <= d->Se) {
            // On corrupt data libjpeg writes past the band: an AC first scan's run can carry
            // zig-zag k up to Se + 15, a refinement's new coefficient lands at Se + 1 (and
            // jpeg_natural_order maps 64 on to 63). Those are loaded and kept too, so that the
            // compact arrays give the same picture as whole ones whatever the data.
            ss = d->Ss;
            se = d->Ss == 0 ? d->Se : d->Se + 15 > 63 ? 63 : d->Se + 15;
        }
    }
    int held = a->expanded_count > 0 && start_row >= a->expanded_first &&
               start_row + num_rows <= a->expanded_first + a->expanded_count;
    if (!held || ss != a->band_ss || se != a->band_se) {
        flush_window(cinfo, a);
        if (ss != a->band_ss || se != a->band_se) set_band(a, ss, se);
        size_t count = a->max_access;
        if (count > a->rows - start_row) count = a->rows - start_row;
        const uint8_t *rows = tessera_rowstore_access(&a->store, start_row, count, 0);
        if (rows == NULL) fail(cinfo, "could not use the decoder's spill file");
        expand_rows(a, rows, count);
        a->expanded_first = start_row;
        a->expanded_count = count;
    }
    if (writable) a->expanded_dirty = 1;
    return a->row_pointers + (start_row - a->expanded_first);
}

// MARK: Memory manager methods

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
    array->kept.count = 64;
    array->block_bytes = sizeof(JBLOCK);
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
        free(array->expanded);
        free(array);
        array = next;
    }
    c->arrays = NULL;
    c->spilled = 0;
    c->total_bytes = 0;
    c->allocated_bytes = 0;
}

/// Gives each array the kept set of its component's output scale. jdcoefct.c requests one
/// array a component, in component order, each the component's blocks rounded up to whole
/// MCUs: when the arrays are not exactly those, every array keeps whole blocks.
static void choose_kept_sets(j_common_ptr cinfo, tessera_coefficients *c) {
    if (!cinfo->is_decompressor || !c->compact || !may_compact((j_decompress_ptr)cinfo)) return;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    int ci = 0;
    for (struct jvirt_barray_control *a = c->arrays; a != NULL; a = a->next, ci++) {
        if (ci >= d->num_components || a->realized) return;
        const jpeg_component_info *comp = &d->comp_info[ci];
        JDIMENSION w = (comp->width_in_blocks + comp->h_samp_factor - 1) / comp->h_samp_factor * comp->h_samp_factor;
        JDIMENSION h = (comp->height_in_blocks + comp->v_samp_factor - 1) / comp->v_samp_factor * comp->v_samp_factor;
        if (a->blocks_per_row != w || a->rows != h || a->max_access != access_rows(d, comp->v_samp_factor)) return;
    }
    if (ci != d->num_components) return;
    ci = 0;
    for (struct jvirt_barray_control *a = c->arrays; a != NULL; a = a->next, ci++) {
        kept_set_for(&a->kept, d->comp_info[ci].DCT_scaled_size);
        a->block_bytes = a->kept.count == 64 ? sizeof(JBLOCK) : MASK_BYTES + (size_t)a->kept.count * sizeof(JCOEF);
    }
}

static void realize_virt_arrays(j_common_ptr cinfo) {
    tessera_coefficients *c = coefficients_of(cinfo);
    (*c->libjpeg_realize)(cinfo);  // libjpeg's own (small-sample) arrays, if any
    choose_kept_sets(cinfo, c);
    size_t stored = 0, windows = 0, count = 0;
    for (struct jvirt_barray_control *a = c->arrays; a != NULL; a = a->next) {
        if (a->realized) continue;
        stored += (size_t)a->rows * a->blocks_per_row * a->block_bytes;
        if (a->kept.count < 64) windows += (size_t)(a->max_access < a->rows ? a->max_access : a->rows) * a->blocks_per_row * sizeof(JBLOCK);
        count++;
    }
    if (count == 0) return;
    size_t total = stored + windows;
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
    size_t allocated = windows;
    // Spilling, each store window holds what libjpeg accesses at once, and an equal share of
    // what the allowance leaves beside those and the expanded windows: the total stays within
    // the allowance, or the least the arrays can work with (tessera_coefficients_plan).
    size_t least = windows;
    for (struct jvirt_barray_control *a = c->arrays; a != NULL; a = a->next) {
        if (!a->realized) least += (size_t)(a->max_access < a->rows ? a->max_access : a->rows) * a->blocks_per_row * a->block_bytes;
    }
    size_t extra = (size_t)c->memory_limit > least ? ((size_t)c->memory_limit - least) / count : 0;
    for (struct jvirt_barray_control *a = c->arrays; a != NULL; a = a->next) {
        if (a->realized) continue;
        size_t row_bytes = (size_t)a->blocks_per_row * a->block_bytes;
        size_t window = a->rows;
        if (spill) {
            window = (a->max_access < a->rows ? a->max_access : a->rows) + (row_bytes ? extra / row_bytes : 0);
            if (window > a->rows) window = a->rows;
        }
        if (tessera_rowstore_init(&a->store, row_bytes, a->rows, window, spill ? c->spill : NULL, offset) != 0) {
            ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 22);
        }
        allocated += a->store.window_rows * row_bytes;
        size_t pointers = a->store.window_rows;
        if (a->kept.count < 64) {
            size_t rows = a->max_access < a->rows ? a->max_access : a->rows;
            a->expanded = calloc(rows * a->blocks_per_row + 1, sizeof(JBLOCK));
            if (a->expanded == NULL) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 24);
            pointers = rows;
        }
        a->row_pointers = calloc(pointers + 1, sizeof(JBLOCKROW));
        if (a->row_pointers == NULL) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 23);
        if (a->kept.count < 64) {
            // The expanded window never moves in memory: its row pointers are set once.
            for (size_t i = 0; i < pointers; i++) a->row_pointers[i] = a->expanded + i * a->blocks_per_row;
            a->band_ss = -1;
        }
        a->realized = 1;
        offset += (uint64_t)row_bytes * a->rows;
    }
    c->allocated_bytes = allocated;
}

static JBLOCKARRAY access_virt_barray(j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start_row,
                                      JDIMENSION num_rows, boolean writable) {
    if (!ptr->realized || num_rows > ptr->max_access || start_row + num_rows > ptr->rows) {
        ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    }
    if (ptr->kept.count < 64) return access_compact(cinfo, ptr, start_row, num_rows, writable);
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
    c->compact = 1;
    c->libjpeg_realize = mem->realize_virt_arrays;
    c->libjpeg_free_pool = mem->free_pool;
    c->libjpeg_self_destruct = mem->self_destruct;
    mem->request_virt_barray = request_virt_barray;
    mem->realize_virt_arrays = realize_virt_arrays;
    mem->access_virt_barray = access_virt_barray;
    mem->free_pool = free_pool;
    mem->self_destruct = self_destruct;
}
