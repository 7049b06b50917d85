// tessera_dc.c — multi-scan JPEGs at 1/8 scale from their DC coefficients alone.
//
// Why: at 1/8 scale each 8 x 8 block becomes one pixel, the block's mean, which is its DC
// coefficient. libjpeg decodes a progressive file by buffering every coefficient of the image
// (128 bytes a block) and decoding every AC scan, even at 1/8: 72 MB and about 8x the time of
// the baseline twin for a 24-megapixel photo. This decoder reads the DC scans only (the first
// one and its successive-approximation refinements, interleaved or not, with restart markers
// and Huffman tables redefined between scans), skips each AC scan by finding its end marker,
// and keeps 2 bytes a block. Sequential multi-scan files (components in separate scans) are
// decoded the same way, the AC codes read and dropped.
//
// Chroma subsampled 2 x 2 (4:2:0) is where 1/8 is not DC alone: libjpeg scales such a
// component by 2/8 instead, so that it needs no upsampling, and its 2 x 2 output is the mean of
// each 4 x 4 quarter of the block, which also depends on AC coefficients. So for such
// components the AC scans are decoded too (first and refinement, with end-of-band runs), but
// only three coefficients are kept, (0,1), (1,0) and (1,1), with a bit per coefficient saying
// whether it is non-zero (which the refinement scans need): 16 bytes a block. The quarter
// means are computed from those; the coefficients left out (3, 5 and 7 in either direction)
// are small in photos, so the result is within a level of libjpeg's on average (tests).
// Other subsampled components are replicated, as libjpeg does at 1/8 (no fancy upsampling).
// The layouts where libjpeg draws a component at 2/8 and then replicates it (4 x 2 beside
// 1 x 1), draws luma at 2/8 (chroma sampled finer), or a component at 4/8 (1 x 1 beside 4 x 4)
// are handed back to libjpeg: the three coefficients are not enough there (tests).
//
// What libjpeg refuses is refused here too, with TESSERA_JPEG_ERROR (a placeholder, not a
// fallback): progressive scan parameters out of range, an interleaved MCU over 10 blocks,
// fractional sampling; and a DC difference over 11 bits, which 8-bit data never has. A file that
// ends early (a cut file) is drawn as far as its data goes, as libjpeg draws it with
// tessera_jpeg_decoder_allow_early_end: the blocks after the one the data ran out in are left
// as earlier scans made them (data_stopped). A marker where data should be, a second stop, or an
// end inside a marker segment is handed back to libjpeg (TESSERA_JPEG_UNSUPPORTED), which decides.
//
// Written from ITU T.81 (Annex F and G) and libjpeg.txt; the Huffman lookup scheme is the
// usual lookahead table plus per-length limits (T.81 F.2.2.3).
//
// Errors longjmp to the entry point that set `jump`; no Swift frame is ever in between.
// Threading: one decoder per thread.
#include "tessera_codec_internal.h"

#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#define LOOKAHEAD 9

typedef struct {
    uint8_t lookup_length[1 << LOOKAHEAD];  // 0: the code is longer than LOOKAHEAD bits
    uint8_t lookup_value[1 << LOOKAHEAD];
    int32_t max_code[17];                   // largest code of each length, -1 when none
    int32_t value_offset[17];               // index in `values` of a code of that length, minus the code
    uint8_t values[256];
    int defined;
} huffman_table;

/// What a 4:2:0 chroma block keeps besides its DC coefficient.
typedef struct {
    uint64_t nonzero;          // bit k: zig-zag coefficient k is non-zero (1...63)
    int16_t low[3];            // zig-zag 1, 2, 4 as coded (times 2^Al)
    int16_t unused;
} low_block;

typedef struct {
    int id, h, v, quant_table;
    int dc_quant;              // the DC quantiser, latched at the component's first scan
    int latched;
    int8_t coefficient_bits[64]; // Al of the last scan of each coefficient, -1 before its first (progressive)
    int ac_known_before_scan;  // one of AC 1-9 had begun before the latest scan (see check_ended_as_libjpeg_draws)
    int blocks_w, blocks_h;    // the component's own block grid
    int padded_w, padded_h;    // rounded up to whole MCUs (interleaved scans code these blocks)
    int prediction;            // DC predictor within a scan
    tessera_rowstore plane;    // int16_t DC coefficient (scaled by 2^Al as coded) per block
    int allocated;
    // 4:2:0 chroma: drawn 2 x 2 per block from the low-frequency coefficients (see above)
    int reduced;
    tessera_rowstore low;      // low_block per block
    int low_allocated;
    int low_quant[3];          // quantisers of zig-zag 1, 2, 4: (0,1), (1,0), (1,1)
    // output: one row of samples for the current output row, and interpolation positions
    int *samples;              // out_w values, 0...255
    int *column;               // per output x: the block under it
} dc_component;

struct tessera_dc_decoder {
    tessera_jpeg_source source;
    void *context;
    uint8_t *buffer;
    size_t buffer_bytes, position, length;
    int at_end;

    // bit reader: the top `bit_count` bits of `bits` are next; the last `padding` of them are
    // zeros put in after a marker (or the end of the file) where data should have been.
    uint64_t bits;
    int bit_count, padding;
    int marker;                // a marker found in the data, not yet handled (0: none; -1: end of file)
    int overrun;               // padding was consumed: the scan's data ended early
    int stopped_early;         // the file ended before the picture did (drawn as far as it goes)
    int smoothed_by_libjpeg;   // ... where libjpeg would smooth the DC values (ended_as_libjpeg_draws)

    huffman_table dc_tables[4], ac_tables[4];
    int quant_dc[4], quant_defined[4], quant_low[4][3];
    int width, height, component_count, h_max, v_max, mcus_x, mcus_y;
    int progressive, frame_seen, restart_interval, scans;
    dc_component components[4];
    long memory_limit;
    const tessera_spill *spill;
    tessera_spill spill_copy;
    uint64_t plane_bytes;
    int stored_rgb;
    const char *libjpeg_only;  // why libjpeg must draw this layout (see read_frame), or NULL

    int out_w, out_h, out_row;
    uint64_t work_limit_blocks, work_blocks;
    const int *cancel_flag;

    int status;                // what a longjmp returns
    int source_failed;
    char message[200];
    jmp_buf jump;
};

// MARK: Errors

static void fail_with(tessera_dc_decoder *d, int status, const char *message) {
    d->status = status;
    snprintf(d->message, sizeof d->message, "%s", message);
    longjmp(d->jump, 1);
}

static void unsupported(tessera_dc_decoder *d, const char *why) { fail_with(d, TESSERA_JPEG_UNSUPPORTED, why); }

// MARK: Bytes

static void check_cancelled(tessera_dc_decoder *d) {
    if (tessera_flag_is_raised(d->cancel_flag)) fail_with(d, TESSERA_JPEG_ERROR, "cancelled");
}

static int refill(tessera_dc_decoder *d) {
    if (d->at_end) return 0;
    check_cancelled(d);  // every buffer of input: skipping a large AC scan stops too
    long n = d->source(d->context, d->buffer, d->buffer_bytes);
    if (n < 0) {
        d->source_failed = 1;
        fail_with(d, TESSERA_JPEG_ERROR, "read error");
    }
    if (n == 0) {
        d->at_end = 1;
        return 0;
    }
    d->position = 0;
    d->length = (size_t)n;
    return 1;
}

/// The next byte, or -1 at the end of the file.
static inline int next_byte(tessera_dc_decoder *d) {
    if (d->position == d->length && !refill(d)) return -1;
    return d->buffer[d->position++];
}

static int required_byte(tessera_dc_decoder *d) {
    int byte = next_byte(d);
    if (byte < 0) unsupported(d, "file ends early (truncated JPEG)");
    return byte;
}

static int required_u16(tessera_dc_decoder *d) {
    int high = required_byte(d);
    return (high << 8) | required_byte(d);
}

static void skip_bytes(tessera_dc_decoder *d, long count) {
    while (count > 0) {
        if (d->position == d->length && !refill(d)) unsupported(d, "file ends early (truncated JPEG)");
        size_t here = d->length - d->position;
        if ((size_t)count < here) here = (size_t)count;
        d->position += here;
        count -= (long)here;
    }
}

/// Skips to the next marker (FF followed by a code other than 00 or FF) and returns its code;
/// -1 at the end of the file. With `past_restarts`, RSTn markers are skipped too (the end of
/// an AC scan's data is the first other marker).
static int find_marker(tessera_dc_decoder *d, int past_restarts) {
    for (;;) {
        // memchr for the next FF: an AC scan is skipped at memory speed.
        for (;;) {
            if (d->position == d->length && !refill(d)) return -1;
            uint8_t *start = d->buffer + d->position;
            uint8_t *ff = memchr(start, 0xFF, d->length - d->position);
            if (ff != NULL) {
                d->position = (size_t)(ff - d->buffer) + 1;
                break;
            }
            d->position = d->length;
        }
        int code = next_byte(d);
        while (code == 0xFF) code = next_byte(d);
        if (code < 0) return -1;
        if (code == 0) continue;                                   // a stuffed FF in data
        if (past_restarts && code >= 0xD0 && code <= 0xD7) continue;
        return code;
    }
}

// MARK: Bits

static void fill_bits(tessera_dc_decoder *d) {
    while (d->bit_count <= 56) {
        int byte;
        if (d->marker != 0) {
            byte = 0;
            d->padding += 8;
        } else {
            byte = next_byte(d);
            if (byte == 0xFF) {
                int code = next_byte(d);
                while (code == 0xFF) code = next_byte(d);
                if (code == 0) {
                    byte = 0xFF;
                } else {
                    d->marker = code < 0 ? -1 : code;
                    byte = 0;
                    d->padding += 8;
                }
            } else if (byte < 0) {
                d->marker = -1;
                byte = 0;
                d->padding += 8;
            }
        }
        d->bits |= (uint64_t)byte << (56 - d->bit_count);
        d->bit_count += 8;
    }
}

static inline void consume_bits(tessera_dc_decoder *d, int count) {
    d->bits <<= count;
    d->bit_count -= count;
    if (d->bit_count < d->padding) {
        d->overrun = 1;
        d->padding = d->bit_count;
    }
}

static inline int get_bits(tessera_dc_decoder *d, int count) {
    if (count == 0) return 0;
    if (d->bit_count < count) fill_bits(d);
    int value = (int)(d->bits >> (64 - count));
    consume_bits(d, count);
    return value;
}

/// T.81 F.2.2.1 EXTEND: a `size`-bit magnitude category value to a signed difference.
static inline int receive_extend(tessera_dc_decoder *d, int size) {
    if (size == 0) return 0;
    if (size > 16) unsupported(d, "corrupt Huffman data (magnitude over 16 bits)");
    int value = get_bits(d, size);
    if (value < (1 << (size - 1))) value += (int)(-(1u << size)) + 1;
    return value;
}

static inline int decode_huffman(tessera_dc_decoder *d, const huffman_table *table) {
    if (d->bit_count < 16) fill_bits(d);
    unsigned look = (unsigned)(d->bits >> (64 - LOOKAHEAD));
    int length = table->lookup_length[look];
    if (length != 0) {
        consume_bits(d, length);
        return table->lookup_value[look];
    }
    uint32_t code16 = (uint32_t)(d->bits >> 48);
    for (int l = LOOKAHEAD + 1; l <= 16; l++) {
        int32_t code = (int32_t)(code16 >> (16 - l));
        if (code <= table->max_code[l]) {
            consume_bits(d, l);
            return table->values[(table->value_offset[l] + code) & 0xFF];
        }
    }
    unsupported(d, "corrupt Huffman data (no such code)");
    return 0;
}

static void reset_bits(tessera_dc_decoder *d) {
    d->bits = 0;
    d->bit_count = 0;
    d->padding = 0;
}

// MARK: Tables and headers

static void read_huffman_tables(tessera_dc_decoder *d) {
    long length = required_u16(d) - 2;
    while (length > 0) {
        int kind = required_byte(d);
        int klass = kind >> 4, id = kind & 15;
        if (klass > 1 || id > 3) unsupported(d, "bad Huffman table id");
        uint8_t counts[17] = {0};
        int total = 0;
        for (int l = 1; l <= 16; l++) {
            counts[l] = (uint8_t)required_byte(d);
            total += counts[l];
        }
        if (total > 256 || 17 + total > length) unsupported(d, "bad Huffman table");
        huffman_table *table = klass == 0 ? &d->dc_tables[id] : &d->ac_tables[id];
        memset(table, 0, sizeof *table);
        for (int i = 0; i < total; i++) table->values[i] = (uint8_t)required_byte(d);
        int code = 0, index = 0;
        for (int l = 1; l <= 16; l++) {
            int n = counts[l];
            table->value_offset[l] = index - code;
            if (code + n > (1 << l)) unsupported(d, "bad Huffman table (too many codes)");
            table->max_code[l] = n > 0 ? code + n - 1 : -1;
            if (l <= LOOKAHEAD) {
                for (int i = 0; i < n; i++) {
                    int first = (code + i) << (LOOKAHEAD - l), span = 1 << (LOOKAHEAD - l);
                    for (int j = 0; j < span; j++) {
                        table->lookup_length[first + j] = (uint8_t)l;
                        table->lookup_value[first + j] = table->values[index + i];
                    }
                }
            }
            index += n;
            code = (code + n) << 1;
        }
        table->defined = 1;
        length -= 17 + total;
    }
    if (length != 0) unsupported(d, "bad Huffman table length");
}

static void read_quant_tables(tessera_dc_decoder *d) {
    long length = required_u16(d) - 2;
    while (length > 0) {
        int kind = required_byte(d);
        int precision = kind >> 4, id = kind & 15;
        if (id > 3 || precision > 1) unsupported(d, "bad quantisation table");
        int values[64];
        for (int k = 0; k < 64; k++) values[k] = precision ? required_u16(d) : required_byte(d);
        d->quant_dc[id] = values[0];
        d->quant_low[id][0] = values[1];
        d->quant_low[id][1] = values[2];
        d->quant_low[id][2] = values[4];
        d->quant_defined[id] = 1;
        length -= 1 + (precision ? 128 : 64);
    }
    if (length != 0) unsupported(d, "bad quantisation table length");
}

/// Sets up one of a component's stores (`bytes_per_block` for each block of its padded grid) at
/// `*offset` in the spill file, advancing it: whole in memory, or, when `spill`, a window of an
/// equal share of the memory limit, at least what a scan or the output touches at once.
static void open_store(tessera_dc_decoder *d, dc_component *c, tessera_rowstore *store, size_t bytes_per_block,
                       int spill, uint64_t *offset) {
    size_t row_bytes = (size_t)c->padded_w * bytes_per_block;
    size_t window = (size_t)c->padded_h;
    if (spill) {
        window = (size_t)d->memory_limit / (size_t)d->component_count / row_bytes;
        if (window < (size_t)c->v + 2) window = (size_t)c->v + 2;
    }
    if (tessera_rowstore_init(store, row_bytes, (size_t)c->padded_h, window, spill ? d->spill : NULL, *offset) != 0) {
        fail_with(d, TESSERA_JPEG_ERROR, "out of memory for the DC planes");
    }
    *offset += (uint64_t)row_bytes * (uint64_t)c->padded_h;
}

/// The IDCT size libjpeg gives a component's blocks for a 1/8 output (jdmaster.c): it doubles
/// from 1 while the component, at twice the size, still divides the largest sampling factors
/// in both directions, so that less is left to the upsampler. At most 4 with factors up to 4,
/// and 4 only for a 1 x 1 component beside a 4 x 4 one.
static int libjpeg_scaled_size(const tessera_dc_decoder *d, const dc_component *c) {
    int size = 1;
    while (size < 8 && d->h_max % (c->h * size * 2) == 0 && d->v_max % (c->v * size * 2) == 0) size *= 2;
    return size;
}

static void read_frame(tessera_dc_decoder *d, int progressive) {
    if (d->frame_seen) unsupported(d, "two frame headers");
    long length = required_u16(d);
    int precision = required_byte(d);
    d->height = required_u16(d);
    d->width = required_u16(d);
    d->component_count = required_byte(d);
    if (precision != 8) unsupported(d, "not 8-bit");
    if (d->height == 0 || d->width == 0) unsupported(d, "no height in the frame header (DNL)");
    if ((d->component_count != 1 && d->component_count != 3) || length != 8 + 3 * d->component_count) {
        unsupported(d, "neither one nor three components");
    }
    d->h_max = d->v_max = 1;
    for (int i = 0; i < d->component_count; i++) {
        dc_component *c = &d->components[i];
        c->id = required_byte(d);
        int sampling = required_byte(d);
        c->h = sampling >> 4;
        c->v = sampling & 15;
        c->quant_table = required_byte(d);
        if (c->h < 1 || c->h > 4 || c->v < 1 || c->v > 4 || c->quant_table > 3) unsupported(d, "bad sampling factors");
        if (c->h > d->h_max) d->h_max = c->h;
        if (c->v > d->v_max) d->v_max = c->v;
    }
    for (int i = 0; i < d->component_count; i++) {
        // libjpeg's upsampler only multiplies by whole numbers (jdsample.c); it refuses the rest
        // when the decode starts, at every scale.
        const dc_component *c = &d->components[i];
        if (d->h_max % c->h != 0 || d->v_max % c->v != 0) {
            fail_with(d, TESSERA_JPEG_ERROR, "fractional sampling factors (a component's do not divide the largest), "
                                             "which libjpeg refuses");
        }
    }
    d->mcus_x = (d->width + 8 * d->h_max - 1) / (8 * d->h_max);
    d->mcus_y = (d->height + 8 * d->v_max - 1) / (8 * d->v_max);
    uint64_t total = 0;
    for (int i = 0; i < d->component_count; i++) {
        dc_component *c = &d->components[i];
        // T.81 A.1.1: the component's size is ceil(X * h / Hmax), in blocks rounded up.
        long comp_w = ((long)d->width * c->h + d->h_max - 1) / d->h_max;
        long comp_h = ((long)d->height * c->v + d->v_max - 1) / d->v_max;
        c->blocks_w = (int)((comp_w + 7) / 8);
        c->blocks_h = (int)((comp_h + 7) / 8);
        c->padded_w = d->mcus_x * c->h;
        c->padded_h = d->mcus_y * c->v;
        // A component libjpeg draws at 2/8 needs coefficients 1, 3, 5 and 7 each way, of which
        // this decoder keeps the first (see the top): close enough (tests) for chroma that
        // needs no more upsampling (4:2:0). Luma (or a stored RGB channel) has more detail
        // there, one that libjpeg then replicates is drawn larger, and one at 4/8 needs nearly
        // every coefficient: libjpeg draws those (rare) layouts.
        int scaled = libjpeg_scaled_size(d, c);
        c->reduced = scaled == 2;
        if (scaled == 2 && (c->h * 2 != d->h_max || c->v * 2 != d->v_max)) {
            d->libjpeg_only = "a component libjpeg draws at 2/8 and then replicates (e.g. 4 x 2 beside 1 x 1 sampling)";
        } else if (scaled == 2 && (i == 0 || d->stored_rgb)) {
            d->libjpeg_only = "luma libjpeg draws at 2/8 (chroma sampled finer than luma)";
        }
        if (scaled > 2) d->libjpeg_only = "a component libjpeg draws at 4/8 (1 x 1 beside 4 x 4 sampling)";
        total += (uint64_t)c->padded_w * c->padded_h * (sizeof(int16_t) + (c->reduced ? sizeof(low_block) : 0));
    }
    d->plane_bytes = total;
    int spill = total > (uint64_t)d->memory_limit;
    if (spill && d->spill == NULL) fail_with(d, TESSERA_JPEG_ERROR, "its DC planes do not fit the decoder's memory");
    uint64_t offset = 0;
    for (int i = 0; i < d->component_count; i++) {
        dc_component *c = &d->components[i];
        open_store(d, c, &c->plane, sizeof(int16_t), spill, &offset);
        c->allocated = 1;
        if (c->reduced) {
            open_store(d, c, &c->low, sizeof(low_block), spill, &offset);
            c->low_allocated = 1;
        }
    }
    for (int i = 0; i < d->component_count; i++) memset(d->components[i].coefficient_bits, -1, 64);
    d->progressive = progressive;
    d->frame_seen = 1;
}

// MARK: Scans

typedef struct {
    int count;
    dc_component *components[4];
    int dc_table[4], ac_table[4];
    int ss, se, ah, al;
} scan_header;

static int16_t *plane_row(tessera_dc_decoder *d, dc_component *c, int row, int count) {
    uint8_t *p = tessera_rowstore_access(&c->plane, (size_t)row, (size_t)count, 1);
    if (p == NULL) fail_with(d, TESSERA_JPEG_ERROR, "could not use the decoder's spill file");
    return (int16_t *)p;
}

static low_block *low_rows(tessera_dc_decoder *d, dc_component *c, int row, int count) {
    uint8_t *p = tessera_rowstore_access(&c->low, (size_t)row, (size_t)count, 1);
    if (p == NULL) fail_with(d, TESSERA_JPEG_ERROR, "could not use the decoder's spill file");
    return (low_block *)p;
}

static inline void keep_low(low_block *block, int k, int value) {
    if (k == 1) block->low[0] = (int16_t)value;
    else if (k == 2) block->low[1] = (int16_t)value;
    else if (k == 4) block->low[2] = (int16_t)value;
}

static inline int16_t *low_slot(low_block *block, int k) {
    return k == 1 ? &block->low[0] : k == 2 ? &block->low[1] : k == 4 ? &block->low[2] : NULL;
}

/// A progressive AC scan of a 4:2:0 chroma component: T.81 G.1.2.2 (first: Ah = 0) and
/// G.1.2.3 (refinement). Every coefficient's non-zero bit is kept; values only for zig-zag 1,
/// 2 and 4. Non-interleaved, so one block an MCU over the component's own grid.
static void restart(tessera_dc_decoder *d, const scan_header *scan);

/// Before each MCU of a scan with a restart interval: counts it down and, at zero, handles the
/// restart marker. Returns 1 when a restart happened.
static inline int next_mcu(tessera_dc_decoder *d, const scan_header *scan, int *restarts_left) {
    if (d->restart_interval == 0) return 0;
    int restarted = 0;
    if (*restarts_left == 0) {
        restart(d, scan);
        *restarts_left = d->restart_interval;
        restarted = 1;
    }
    (*restarts_left)--;
    return restarted;
}

static void count_work(tessera_dc_decoder *d, const scan_header *scan);

/// A scan's data ran out before its last block (the blocks after the one it ran out in are not
/// decoded: they keep what earlier scans gave them, nothing in the first, so grey). At the end
/// of the file (a cut file), once, the picture is drawn as far as it goes, as libjpeg draws it
/// (tessera_jpeg.c); a marker in the data, or a second stop, is handed to libjpeg.
static void data_stopped(tessera_dc_decoder *d) {
    if (d->marker != -1 || d->stopped_early) unsupported(d, "image data ends early (truncated or corrupt JPEG)");
    d->stopped_early = 1;
}

/// Whether this cut file's picture is libjpeg's to the level: libjpeg's block smoothing
/// estimates a component's DC from its neighbours' while none of AC coefficients 1-9 has begun,
/// and past the cut it goes by the scans before the one cut (libjpeg-turbo's jdcoefct.c; a
/// complete file never meets either). A file cut before every component had such a scan behind
/// it is still drawn here, from its DC values as they are, a few levels from libjpeg's smoothed
/// ones: handed to libjpeg instead, a cut 48 MP photo spilled 827 MB of coefficients at 1/8.
static int ended_as_libjpeg_draws(const tessera_dc_decoder *d) {
    if (!d->progressive) return 1;
    for (int i = 0; i < d->component_count; i++) {
        if (!d->components[i].ac_known_before_scan) return 0;
    }
    return 1;
}

static void decode_ac_scan(tessera_dc_decoder *d, const scan_header *scan) {
    count_work(d, scan);
    dc_component *c = scan->components[0];
    const huffman_table *table = &d->ac_tables[scan->ac_table[0]];
    if (!table->defined) unsupported(d, "AC Huffman table missing");
    reset_bits(d);
    d->marker = 0;
    d->overrun = 0;
    int restarts_left = d->restart_interval;
    unsigned eob_run = 0;
    int ss = scan->ss, se = scan->se, al = scan->al;
    int positive = 1 << al, negative = -(1 << al);
    for (int by = 0; by < c->blocks_h && !d->overrun; by++) {
        if ((by & 15) == 0) check_cancelled(d);
        low_block *row = low_rows(d, c, by, 1);
        for (int bx = 0; bx < c->blocks_w && !d->overrun; bx++) {
            if (next_mcu(d, scan, &restarts_left)) eob_run = 0;
            low_block *block = &row[bx];
            if (scan->ah == 0) {
                if (eob_run > 0) {
                    eob_run--;
                    continue;
                }
                for (int k = ss; k <= se; k++) {
                    int rs = decode_huffman(d, table);
                    int run = rs >> 4, size = rs & 15;
                    if (size != 0) {
                        k += run;
                        if (k > 63) unsupported(d, "corrupt AC data");
                        int value = (int)((unsigned)receive_extend(d, size) << al);
                        block->nonzero |= (uint64_t)1 << k;
                        keep_low(block, k, value);
                    } else if (run == 15) {
                        k += 15;
                    } else {
                        eob_run = (1u << run) - 1;
                        if (run) eob_run += (unsigned)get_bits(d, run);
                        break;
                    }
                }
            } else {
                int k = ss;
                if (eob_run == 0) {
                    for (; k <= se; k++) {
                        int rs = decode_huffman(d, table);
                        int run = rs >> 4, size = rs & 15;
                        int value = 0;
                        if (size != 0) {
                            if (size != 1) unsupported(d, "corrupt AC refinement data");
                            value = get_bits(d, 1) ? positive : negative;
                        } else if (run != 15) {
                            eob_run = 1u << run;
                            if (run) eob_run += (unsigned)get_bits(d, run);
                            break;
                        }
                        // Pass `run` zero coefficients (refining the non-zero ones on the way),
                        // then the new value goes in the next zero one.
                        for (; k <= se; k++) {
                            if (block->nonzero & ((uint64_t)1 << k)) {
                                if (get_bits(d, 1)) {
                                    int16_t *slot = low_slot(block, k);
                                    if (slot != NULL && (*slot & positive) == 0) *slot = (int16_t)(*slot + (*slot >= 0 ? positive : negative));
                                }
                            } else {
                                if (run == 0) break;
                                run--;
                            }
                        }
                        if (value != 0 && k <= se) {
                            block->nonzero |= (uint64_t)1 << k;
                            keep_low(block, k, value);
                        }
                    }
                }
                if (eob_run > 0) {
                    // The rest of the band has no new coefficients: refine the non-zero ones.
                    for (; k <= se; k++) {
                        if (block->nonzero & ((uint64_t)1 << k)) {
                            if (get_bits(d, 1)) {
                                int16_t *slot = low_slot(block, k);
                                if (slot != NULL && (*slot & positive) == 0) *slot = (int16_t)(*slot + (*slot >= 0 ? positive : negative));
                            }
                        }
                    }
                    eob_run--;
                }
            }
        }
    }
    if (d->overrun) data_stopped(d);
    reset_bits(d);
    if (d->marker == 0) d->marker = find_marker(d, 1);
}

/// One block's worth of the scan: updates the DC coefficient at `coefficient`.
static inline void decode_block(tessera_dc_decoder *d, const scan_header *scan, int i, int16_t *coefficient,
                                low_block *low) {
    dc_component *c = scan->components[i];
    if (d->progressive && scan->ah != 0) {
        // DC refinement (T.81 G.1.2.1): one raw bit, the next bit down of the coefficient.
        if (get_bits(d, 1)) *coefficient = (int16_t)(*coefficient | (1 << scan->al));
        return;
    }
    int size = decode_huffman(d, &d->dc_tables[scan->dc_table[i]]);
    // 8-bit samples give DC differences of at most 11 bits (T.81 F.1.2.1): more is corrupt
    // data, which libjpeg draws as wrapped-around garbage without a word.
    if (size > 11) fail_with(d, TESSERA_JPEG_ERROR, "corrupt DC data (a difference over 11 bits)");
    // Unsigned: corrupt data must not overflow a signed int (undefined behaviour).
    c->prediction = (int)((unsigned)c->prediction + (unsigned)receive_extend(d, size));
    *coefficient = (int16_t)((unsigned)c->prediction << scan->al);
    if (!d->progressive) {
        // Sequential: read the block's AC codes and drop them (T.81 F.2.2.2).
        const huffman_table *ac = &d->ac_tables[scan->ac_table[i]];
        for (int k = 1; k < 64; k++) {
            int rs = decode_huffman(d, ac);
            int run = rs >> 4, bits = rs & 15;
            if (bits != 0) {
                k += run;
                int value = receive_extend(d, bits);
                if (low != NULL && k < 64) {
                    if (k == 1) low->low[0] = (int16_t)value;
                    else if (k == 2) low->low[1] = (int16_t)value;
                    else if (k == 4) low->low[2] = (int16_t)value;
                }
            } else {
                if (run != 15) break;  // end of block
                k += 15;
            }
        }
    }
}

/// At a restart boundary: the data before it is complete, then an RSTn marker follows.
static void restart(tessera_dc_decoder *d, const scan_header *scan) {
    if (d->overrun) unsupported(d, "image data ends early (truncated or corrupt JPEG)");
    reset_bits(d);
    if (d->marker == 0) d->marker = find_marker(d, 0);
    if (d->marker >= 0xD0 && d->marker <= 0xD7) {
        d->marker = 0;
    } else {
        unsupported(d, "missing restart marker");
    }
    for (int i = 0; i < scan->count; i++) scan->components[i]->prediction = 0;
}

/// Counts the blocks a decoded scan covers against the work limit.
static void count_work(tessera_dc_decoder *d, const scan_header *scan) {
    for (int i = 0; i < scan->count; i++) {
        d->work_blocks += (uint64_t)scan->components[i]->blocks_w * (uint64_t)scan->components[i]->blocks_h;
    }
    if (d->work_limit_blocks != 0 && d->work_blocks > d->work_limit_blocks) {
        char message[200];
        snprintf(message, sizeof message,
                 "its %d scans ask for more decoding than a file of its size can hold (%.0f million blocks): "
                 "refused as a decoding bomb", d->scans, (double)d->work_blocks / 1e6);
        fail_with(d, TESSERA_JPEG_ERROR, message);
    }
}

static void decode_scan(tessera_dc_decoder *d, const scan_header *scan) {
    count_work(d, scan);
    reset_bits(d);
    d->marker = 0;
    d->overrun = 0;
    for (int i = 0; i < scan->count; i++) scan->components[i]->prediction = 0;
    int restarts_left = d->restart_interval;
    if (scan->count == 1) {
        // Non-interleaved: the component's own block grid, one block an MCU (T.81 A.2.2).
        dc_component *c = scan->components[0];
        for (int by = 0; by < c->blocks_h && !d->overrun; by++) {
            if ((by & 15) == 0) check_cancelled(d);
            int16_t *row = plane_row(d, c, by, 1);
            low_block *low_row = !d->progressive && c->reduced ? low_rows(d, c, by, 1) : NULL;
            for (int bx = 0; bx < c->blocks_w && !d->overrun; bx++) {
                next_mcu(d, scan, &restarts_left);
                decode_block(d, scan, 0, &row[bx], low_row != NULL ? &low_row[bx] : NULL);
            }
        }
    } else {
        for (int my = 0; my < d->mcus_y && !d->overrun; my++) {
            check_cancelled(d);
            int16_t *rows[4];
            low_block *lows[4];
            for (int i = 0; i < scan->count; i++) {
                dc_component *c = scan->components[i];
                rows[i] = plane_row(d, c, my * c->v, c->v);
                lows[i] = !d->progressive && c->reduced ? low_rows(d, c, my * c->v, c->v) : NULL;
            }
            for (int mx = 0; mx < d->mcus_x && !d->overrun; mx++) {
                next_mcu(d, scan, &restarts_left);
                for (int i = 0; i < scan->count; i++) {
                    dc_component *c = scan->components[i];
                    for (int y = 0; y < c->v; y++) {
                        for (int x = 0; x < c->h; x++) {
                            size_t at = (size_t)y * c->padded_w + mx * c->h + x;
                            decode_block(d, scan, i, &rows[i][at], lows[i] != NULL ? &lows[i][at] : NULL);
                        }
                    }
                }
            }
        }
    }
    if (d->overrun) data_stopped(d);
    reset_bits(d);
    // The next marker: found by the bit reader already, or after the scan's last bits.
    if (d->marker == 0) d->marker = find_marker(d, 1);
}

/// libjpeg's checks of a scan that make it refuse the file (jdinput.c, jdphuff.c): an
/// interleaved scan's MCU over 10 blocks; a progressive scan's Ss, Se, Ah and Al out of range.
/// A progression out of order (a refinement before its first scan, an AC scan before the DC)
/// is only a warning to libjpeg, which then draws the file its own way: handed to it, so that
/// it draws the same picture and says so.
static void check_scan(tessera_dc_decoder *d, const scan_header *scan) {
    if (scan->count > 1) {
        int blocks = 0;
        for (int i = 0; i < scan->count; i++) blocks += scan->components[i]->h * scan->components[i]->v;
        if (blocks > 10) {
            char message[160];
            snprintf(message, sizeof message, "an interleaved scan of %d blocks an MCU (libjpeg refuses more than 10)", blocks);
            fail_with(d, TESSERA_JPEG_ERROR, message);
        }
    }
    if (!d->progressive) return;
    int dc_band = scan->ss == 0;
    int bad = dc_band ? scan->se != 0 : scan->ss > scan->se || scan->se > 63 || scan->count != 1;
    if (scan->ah != 0 && scan->al != scan->ah - 1) bad = 1;
    if (scan->al > 13) bad = 1;
    if (bad) {
        char message[160];
        snprintf(message, sizeof message, "invalid progressive scan (Ss=%d Se=%d Ah=%d Al=%d), which libjpeg refuses",
                 scan->ss, scan->se, scan->ah, scan->al);
        fail_with(d, TESSERA_JPEG_ERROR, message);
    }
    for (int i = 0; i < d->component_count; i++) {
        const int8_t *bits = d->components[i].coefficient_bits;
        int known = 0;
        for (int k = 1; k <= 9; k++) known |= bits[k] >= 0;
        d->components[i].ac_known_before_scan = known;
    }
    for (int i = 0; i < scan->count; i++) {
        int8_t *bits = scan->components[i]->coefficient_bits;
        if (!dc_band && bits[0] < 0) unsupported(d, "an AC scan before the component's DC scan");
        for (int k = scan->ss; k <= scan->se; k++) {
            if (scan->ah != (bits[k] < 0 ? 0 : bits[k])) unsupported(d, "scans out of progression order");
            bits[k] = (int8_t)scan->al;
        }
    }
}

static void read_scan(tessera_dc_decoder *d) {
    if (!d->frame_seen) unsupported(d, "scan before frame header");
    if (++d->scans > TESSERA_JPEG_MAX_SCANS) {
        char message[160];
        snprintf(message, sizeof message, "more than %d scans (a progressive photo has about 10): refused as a decoding bomb",
                 TESSERA_JPEG_MAX_SCANS);
        fail_with(d, TESSERA_JPEG_ERROR, message);
    }
    long length = required_u16(d);
    scan_header scan;
    memset(&scan, 0, sizeof scan);
    scan.count = required_byte(d);
    if (scan.count < 1 || scan.count > d->component_count || length != 6 + 2 * scan.count) unsupported(d, "bad scan header");
    for (int i = 0; i < scan.count; i++) {
        int id = required_byte(d), tables = required_byte(d);
        dc_component *c = NULL;
        for (int k = 0; k < d->component_count; k++) {
            if (d->components[k].id == id) c = &d->components[k];
        }
        if (c == NULL) unsupported(d, "scan names an unknown component");
        scan.components[i] = c;
        scan.dc_table[i] = tables >> 4;
        scan.ac_table[i] = tables & 15;
        if (scan.dc_table[i] > 3 || scan.ac_table[i] > 3) unsupported(d, "bad table selector");
    }
    scan.ss = required_byte(d);
    scan.se = required_byte(d);
    int approximation = required_byte(d);
    scan.ah = approximation >> 4;
    scan.al = approximation & 15;
    check_scan(d, &scan);
    // After the checks, so that a layout libjpeg would refuse is refused here too.
    if (d->libjpeg_only != NULL) unsupported(d, d->libjpeg_only);
    if (d->progressive) {
        if (scan.ss != 0) {
            // An AC scan: nothing in it changes a DC coefficient. Its data ends at the first
            // marker that is not a restart marker.
            dc_component *c = scan.components[0];
            if (c->reduced) {
                decode_ac_scan(d, &scan);
            } else {
                d->marker = find_marker(d, 1);
            }
            return;
        }
    } else if (scan.ss != 0 || scan.se != 63 || scan.ah != 0 || scan.al != 0) {
        unsupported(d, "bad sequential scan");
    }
    for (int i = 0; i < scan.count; i++) {
        dc_component *c = scan.components[i];
        if (!c->latched) {
            if (!d->quant_defined[c->quant_table]) unsupported(d, "quantisation table missing");
            c->dc_quant = d->quant_dc[c->quant_table];
            for (int k = 0; k < 3; k++) c->low_quant[k] = d->quant_low[c->quant_table][k];
            c->latched = 1;
        }
        if (scan.ah == 0 && !d->dc_tables[scan.dc_table[i]].defined) unsupported(d, "DC Huffman table missing");
        if (!d->progressive && !d->ac_tables[scan.ac_table[i]].defined) unsupported(d, "AC Huffman table missing");
    }
    decode_scan(d, &scan);
}

int tessera_dc_decode(tessera_dc_decoder *d) {
    if (setjmp(d->jump)) return d->status;
    if (required_byte(d) != 0xFF || required_byte(d) != 0xD8) unsupported(d, "not a JPEG");
    d->marker = 0;
    for (;;) {
        int code = d->marker != 0 ? d->marker : find_marker(d, 0);
        d->marker = 0;
        if (code < 0) {
            // The file ended after a scan was cut short, or between or inside scans whose data is
            // skipped: drawn from the scans so far, as libjpeg draws it. Before any scan: handed
            // to libjpeg, which refuses it.
            if (d->scans == 0) unsupported(d, "file ends early (truncated JPEG)");
            d->stopped_early = 1;
            d->smoothed_by_libjpeg = !ended_as_libjpeg_draws(d);
            code = 0xD9;
        }
        switch (code) {
        case 0xC0: case 0xC1: read_frame(d, 0); break;
        case 0xC2: read_frame(d, 1); break;
        case 0xC3: case 0xC5: case 0xC6: case 0xC7: case 0xC9: case 0xCA: case 0xCB:
        case 0xCD: case 0xCE: case 0xCF:
            unsupported(d, "lossless, hierarchical or arithmetic-coded");
            break;
        case 0xC4: read_huffman_tables(d); break;
        case 0xDB: read_quant_tables(d); break;
        case 0xDD:
            if (required_u16(d) != 4) unsupported(d, "bad DRI");
            d->restart_interval = required_u16(d);
            break;
        case 0xDA: read_scan(d); break;
        case 0xD9:
            if (d->scans == 0) fail_with(d, TESSERA_JPEG_ERROR, "no image data");
            d->out_w = (d->width + 7) / 8;
            d->out_h = (d->height + 7) / 8;
            return TESSERA_JPEG_OK;
        case 0xD8: unsupported(d, "nested start of image"); break;
        default:
            if (code >= 0xD0 && code <= 0xD7) break;   // a stray restart marker
            if (code == 0x01) break;                   // TEM: no length
            skip_bytes(d, required_u16(d) - 2);
            break;
        }
    }
}

// MARK: Output

/// The sample libjpeg's 1x1 IDCT gives for a block: dequantised DC / 8, rounded, centred, clamped.
static inline int block_sample(int dc, int quant) {
    long value = (((long)dc * quant + 4) >> 3) + 128;
    return value < 0 ? 0 : value > 255 ? 255 : (int)value;
}

/// The component's block under output index `i` when it has `num / den` of the output's
/// resolution: replication, as libjpeg's upsampling at 1/8 (fancy upsampling is off there).
static int replicated(int i, int num, int den, int count) {
    int index = (int)((long)i * num / den);
    return index < count ? index : count - 1;
}

static int prepare_output(tessera_dc_decoder *d) {
    for (int i = 0; i < d->component_count; i++) {
        dc_component *c = &d->components[i];
        c->samples = malloc(sizeof(int) * (size_t)d->out_w);
        c->column = malloc(sizeof(int) * (size_t)d->out_w);
        if (c->samples == NULL || c->column == NULL) return -1;
        for (int x = 0; x < d->out_w; x++) {
            c->column[x] = c->reduced ? x / 2 : replicated(x, c->h, d->h_max, c->blocks_w);
        }
    }
    return 0;
}

// Weights of the (0,1) and (1,0) coefficients, and of (1,1), in the mean of a 4 x 4 quarter of
// a block, times 2^16: C(0) a / 4 and a^2 / 4, where C(0) = 1/sqrt(2) and
// a = (cos(pi/16) + cos(3 pi/16) + cos(5 pi/16) + cos(7 pi/16)) / 4 (the mean of the u = 1
// basis over half the block; the u = 2, 4, 6 bases have a zero mean there).
#define QUARTER_FIRST 7423
#define QUARTER_BOTH 6726

static void component_row(tessera_dc_decoder *d, dc_component *c, int y) {
    int q = c->dc_quant;
    if (c->reduced) {
        int row = y / 2;
        if (row >= c->padded_h) row = c->padded_h - 1;
        int vertical = (y & 1) ? -1 : 1;   // top quarter: the (1,0) basis is positive there
        uint8_t *p = tessera_rowstore_access(&c->plane, (size_t)row, 1, 0);
        uint8_t *l = p != NULL ? tessera_rowstore_access(&c->low, (size_t)row, 1, 0) : NULL;
        if (l == NULL) fail_with(d, TESSERA_JPEG_ERROR, "could not use the decoder's spill file");
        const int16_t *dc = (const int16_t *)p;
        const low_block *low = (const low_block *)l;
        for (int x = 0; x < d->out_w; x++) {
            int bx = c->column[x];
            int horizontal = (x & 1) ? -1 : 1;
            const low_block *b = &low[bx];
            long value = (long)dc[bx] * q * 8192 + (128L << 16)
                + (long)horizontal * QUARTER_FIRST * b->low[0] * c->low_quant[0]
                + (long)vertical * QUARTER_FIRST * b->low[1] * c->low_quant[1]
                + (long)horizontal * vertical * QUARTER_BOTH * b->low[2] * c->low_quant[2];
            value = (value + 32768) >> 16;
            c->samples[x] = value < 0 ? 0 : value > 255 ? 255 : (int)value;
        }
        return;
    }
    int row = replicated(y, c->v, d->v_max, c->blocks_h);
    uint8_t *p = tessera_rowstore_access(&c->plane, (size_t)row, 1, 0);
    if (p == NULL) fail_with(d, TESSERA_JPEG_ERROR, "could not use the decoder's spill file");
    const int16_t *dc = (const int16_t *)p;
    for (int x = 0; x < d->out_w; x++) c->samples[x] = block_sample(dc[c->column[x]], q);
}

static inline uint8_t clamp255(int value) { return (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value); }

int tessera_dc_read_rows(tessera_dc_decoder *d, uint8_t *rows, size_t stride, int max_rows) {
    if (setjmp(d->jump)) return TESSERA_JPEG_ERROR;
    if (d->out_row == 0 && d->components[0].samples == NULL && prepare_output(d) != 0) {
        fail_with(d, TESSERA_JPEG_ERROR, "out of memory");
    }
    int done = 0;
    while (done < max_rows && d->out_row < d->out_h) {
        uint8_t *out = rows + (size_t)done * stride;
        for (int i = 0; i < d->component_count; i++) component_row(d, &d->components[i], d->out_row);
        if (d->component_count == 1) {
            const int *g = d->components[0].samples;
            for (int x = 0; x < d->out_w; x++) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = (uint8_t)g[x];
        } else if (d->stored_rgb) {
            const int *r = d->components[0].samples, *g = d->components[1].samples, *b = d->components[2].samples;
            for (int x = 0; x < d->out_w; x++) {
                out[3 * x] = (uint8_t)r[x];
                out[3 * x + 1] = (uint8_t)g[x];
                out[3 * x + 2] = (uint8_t)b[x];
            }
        } else {
            // JFIF YCbCr to RGB in libjpeg's fixed point (jdcolor.c's tables: 16 fraction bits).
            const int *luma = d->components[0].samples, *cb = d->components[1].samples, *cr = d->components[2].samples;
            for (int x = 0; x < d->out_w; x++) {
                int yv = luma[x], u = cb[x] - 128, v = cr[x] - 128;
                out[3 * x] = clamp255(yv + ((91881 * v + 32768) >> 16));
                out[3 * x + 1] = clamp255(yv + ((-22554 * u - 46802 * v + 32768) >> 16));
                out[3 * x + 2] = clamp255(yv + ((116130 * u + 32768) >> 16));
            }
        }
        d->out_row++;
        done++;
    }
    return done;
}

// MARK: Lifetime

tessera_dc_decoder *tessera_dc_create(tessera_jpeg_source source, void *context, size_t buffer_bytes,
                                      long memory_limit, const tessera_spill *spill, int stored_rgb) {
    tessera_dc_decoder *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->buffer = malloc(buffer_bytes);
    if (d->buffer == NULL) {
        free(d);
        return NULL;
    }
    d->buffer_bytes = buffer_bytes;
    d->source = source;
    d->context = context;
    d->memory_limit = memory_limit;
    if (spill != NULL) {
        d->spill_copy = *spill;
        d->spill = &d->spill_copy;
    }
    d->stored_rgb = stored_rgb;
    return d;
}

void tessera_dc_output_size(const tessera_dc_decoder *d, uint32_t *width, uint32_t *height) {
    *width = (uint32_t)d->out_w;
    *height = (uint32_t)d->out_h;
}

void tessera_dc_set_work_limit(tessera_dc_decoder *d, uint64_t blocks) { d->work_limit_blocks = blocks; }

void tessera_dc_set_cancel_flag(tessera_dc_decoder *d, const int *flag) { d->cancel_flag = flag; }

uint64_t tessera_dc_plane_bytes(const tessera_dc_decoder *d) { return d->plane_bytes; }

const char *tessera_dc_message(const tessera_dc_decoder *d) { return d->message; }

int tessera_dc_source_failed(const tessera_dc_decoder *d) { return d->source_failed; }

int tessera_dc_ended_early(const tessera_dc_decoder *d) { return d->stopped_early ? (d->smoothed_by_libjpeg ? 2 : 1) : 0; }

void tessera_dc_destroy(tessera_dc_decoder *d) {
    if (d == NULL) return;
    for (int i = 0; i < 4; i++) {
        dc_component *c = &d->components[i];
        if (c->allocated) tessera_rowstore_free(&c->plane);
        free(c->samples);
        free(c->column);
        if (c->low_allocated) tessera_rowstore_free(&c->low);
    }
    free(d->buffer);
    free(d);
}
