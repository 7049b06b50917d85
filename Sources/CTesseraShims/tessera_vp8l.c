// tessera_vp8l.c — what libwebp's lossless decoder will allocate for a VP8L image stream, read
// from the stream's headers before libwebp sees it (the WebP lossless bitstream specification,
// /usr/share/doc/libwebp-dev/doc/webp-lossless-bitstream-spec.txt).
//
// libwebp 1.2 has no allocation hook, and a lossless stream says how much it needs only deep
// inside: each prefix-code group of the main image costs libwebp a table of about 12 KiB
// (2954 to 5004 four-byte entries by the colour cache's size, and 568 bytes of group), and the
// number of groups is the number of distinct values in the entropy image, itself an
// entropy-coded image behind the transforms' images. A 295 KB file of 65,536 groups took
// 378 MiB under a 64 MiB budget. So the transform images are decoded here (their bits only),
// the entropy image is decoded (its values), every group's five codes are read and checked as
// libwebp checks them, and what libwebp allocates for each is counted.
//
// Decoding stops once the count passes `cap` (an image no budget here would admit is not
// decoded further: the count so far is returned, marked as a lower bound). A stream libwebp
// would refuse is refused here with the reason: the codes must be complete, lengths and
// distances inside the image, and no read may run past the stream's end.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera_shims.h"

#define MAX_ALPHABET (256 + 24 + (1 << 11))
#define HTREE_GROUP_BYTES 568  // libwebp 1.2's HTreeGroup: 5 table pointers, 4 flags, a 64-entry packed table

// libwebp 1.2's table entries for one group's five codes, by colour cache bits (0: none).
static const uint16_t table_entries[12] = {
    2300 + 654, 2300 + 656, 2300 + 658, 2300 + 662, 2300 + 670, 2300 + 686,
    2300 + 718, 2300 + 782, 2300 + 912, 2300 + 1168, 2300 + 1680, 2300 + 2704,
};

static const uint8_t code_length_order[19] = { 17, 18, 0, 1, 2, 3, 4, 5, 16, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

// The 120 nearest distance codes as (x, y) offsets, in the specification's order.
static const int8_t nearby[120][2] = {
    {0, 1}, {1, 0}, {1, 1}, {-1, 1}, {0, 2}, {2, 0}, {1, 2}, {-1, 2}, {2, 1}, {-2, 1}, {2, 2}, {-2, 2},
    {0, 3}, {3, 0}, {1, 3}, {-1, 3}, {3, 1}, {-3, 1}, {2, 3}, {-2, 3}, {3, 2}, {-3, 2}, {0, 4}, {4, 0},
    {1, 4}, {-1, 4}, {4, 1}, {-4, 1}, {3, 3}, {-3, 3}, {2, 4}, {-2, 4}, {4, 2}, {-4, 2}, {0, 5}, {3, 4},
    {-3, 4}, {4, 3}, {-4, 3}, {5, 0}, {1, 5}, {-1, 5}, {5, 1}, {-5, 1}, {2, 5}, {-2, 5}, {5, 2}, {-5, 2},
    {4, 4}, {-4, 4}, {3, 5}, {-3, 5}, {5, 3}, {-5, 3}, {0, 6}, {6, 0}, {1, 6}, {-1, 6}, {6, 1}, {-6, 1},
    {2, 6}, {-2, 6}, {6, 2}, {-6, 2}, {4, 5}, {-4, 5}, {5, 4}, {-5, 4}, {3, 6}, {-3, 6}, {6, 3}, {-6, 3},
    {0, 7}, {7, 0}, {1, 7}, {-1, 7}, {5, 5}, {-5, 5}, {7, 1}, {-7, 1}, {4, 6}, {-4, 6}, {6, 4}, {-6, 4},
    {2, 7}, {-2, 7}, {7, 2}, {-7, 2}, {3, 7}, {-3, 7}, {7, 3}, {-7, 3}, {5, 6}, {-5, 6}, {6, 5}, {-6, 5},
    {8, 0}, {4, 7}, {-4, 7}, {7, 4}, {-7, 4}, {8, 1}, {8, 2}, {6, 6}, {-6, 6}, {8, 3}, {5, 7}, {-5, 7},
    {7, 5}, {-7, 5}, {8, 4}, {6, 7}, {-6, 7}, {7, 6}, {-7, 6}, {8, 5}, {7, 7}, {-7, 7}, {8, 6}, {8, 7},
};

// MARK: Bits, least significant first

typedef struct {
    const uint8_t *data;
    size_t size;
    uint64_t bit;
    int past_end;  // a read ran past the stream's end (libwebp's end of stream: an error)
} bit_reader;

static uint32_t read_bits(bit_reader *r, int count) {
    if (count == 0) return 0;
    if (r->bit + (uint64_t)count > (uint64_t)r->size * 8) {
        r->past_end = 1;
        r->bit = (uint64_t)r->size * 8;
        return 0;
    }
    size_t byte = (size_t)(r->bit >> 3);
    uint64_t window = 0;
    for (int i = 0; i < 5 && byte + (size_t)i < r->size; i++) window |= (uint64_t)r->data[byte + (size_t)i] << (8 * i);
    r->bit += (uint64_t)count;
    return (uint32_t)((window >> (r->bit - (uint64_t)count - ((uint64_t)byte << 3))) & ((1ull << count) - 1));
}

// MARK: Canonical prefix codes

typedef struct {
    uint16_t count[16];            // symbols of each length
    uint16_t symbols[MAX_ALPHABET];  // by length, then by value
    int single;                    // one symbol: read with no bits
} prefix_code;

/// Builds the canonical code of `lengths`, or 0 when libwebp would refuse it: every length
/// zero, or a code that is not complete (more than one symbol).
static int build_code(prefix_code *code, const uint8_t *lengths, int alphabet) {
    memset(code->count, 0, sizeof code->count);
    int used = 0;
    for (int s = 0; s < alphabet; s++) {
        if (lengths[s] == 0) continue;
        code->count[lengths[s]]++;
        used++;
    }
    if (used == 0) return 0;
    uint16_t offset[16] = { 0 };
    for (int l = 1; l < 15; l++) offset[l + 1] = (uint16_t)(offset[l] + code->count[l]);
    for (int s = 0; s < alphabet; s++) {
        if (lengths[s] != 0) code->symbols[offset[lengths[s]]++] = (uint16_t)s;
    }
    code->single = used == 1;
    if (code->single) return 1;
    uint32_t kraft = 0;
    for (int l = 1; l <= 15; l++) kraft += (uint32_t)code->count[l] << (15 - l);
    return kraft == (1u << 15);
}

static int read_symbol(bit_reader *r, const prefix_code *code) {
    if (code->single) return code->symbols[0];
    int value = 0, first = 0, index = 0;
    for (int length = 1; length <= 15; length++) {
        value |= (int)read_bits(r, 1);
        int count = code->count[length];
        if (value - first < count) return code->symbols[index + value - first];
        index += count;
        first = (first + count) << 1;
        value <<= 1;
    }
    return 0;  // not reached for a complete code
}

/// Reads one prefix code of `alphabet` symbols as libwebp 1.2 reads it; 0 when it would refuse it.
static int read_code(bit_reader *r, int alphabet, prefix_code *code) {
    uint8_t lengths[MAX_ALPHABET];
    memset(lengths, 0, (size_t)alphabet);
    if (read_bits(r, 1)) {
        int symbols = (int)read_bits(r, 1) + 1;
        int first = (int)read_bits(r, read_bits(r, 1) ? 8 : 1);
        if (first < alphabet) lengths[first] = 1;
        if (symbols == 2) {
            int second = (int)read_bits(r, 8);
            if (second < alphabet) lengths[second] = 1;
        }
    } else {
        uint8_t length_lengths[19] = { 0 };
        int stored = (int)read_bits(r, 4) + 4;
        for (int i = 0; i < stored; i++) length_lengths[code_length_order[i]] = (uint8_t)read_bits(r, 3);
        prefix_code *lengths_code = malloc(sizeof *lengths_code);
        if (lengths_code == NULL) return 0;
        int ok = build_code(lengths_code, length_lengths, 19);
        int max_symbol = alphabet;
        if (ok && read_bits(r, 1)) {
            int width = 2 + 2 * (int)read_bits(r, 3);
            max_symbol = 2 + (int)read_bits(r, width);
            if (max_symbol > alphabet) ok = 0;
        }
        int symbol = 0, previous = 8;
        while (ok && symbol < alphabet && max_symbol-- > 0 && !r->past_end) {
            int length = read_symbol(r, lengths_code);
            if (length < 16) {
                lengths[symbol++] = (uint8_t)length;
                if (length != 0) previous = length;
                continue;
            }
            static const int extra[3] = { 2, 3, 7 }, least[3] = { 3, 3, 11 };
            int repeat = (int)read_bits(r, extra[length - 16]) + least[length - 16];
            if (symbol + repeat > alphabet) { ok = 0; break; }
            memset(lengths + symbol, length == 16 ? previous : 0, (size_t)repeat);
            symbol += repeat;
        }
        free(lengths_code);
        if (!ok) return 0;
    }
    return !r->past_end && build_code(code, lengths, alphabet);
}

// MARK: Image streams

typedef struct {
    bit_reader bits;
    uint64_t cap;
    uint64_t bytes;       // libwebp's allocations counted so far
    uint64_t peak_extra;  // the largest of the short-lived ones (a sub-image's codes and cache)
    int over;             // `bytes` passed `cap`: decoding stopped
    const char *error;
} measure;

static int count(measure *m, uint64_t bytes) {
    m->bytes += bytes;
    if (m->bytes > m->cap) m->over = 1;
    return !m->over;
}

static uint64_t group_bytes(int cache_bits) { return (uint64_t)table_entries[cache_bits] * 4 + HTREE_GROUP_BYTES; }

static int alphabet_size(int which, int cache_bits) {
    static const int sizes[5] = { 256 + 24, 256, 256, 256, 40 };
    return sizes[which] + (which == 0 && cache_bits > 0 ? 1 << cache_bits : 0);
}

static uint32_t copy_distance(bit_reader *r, int symbol) {
    if (symbol < 4) return (uint32_t)symbol + 1;
    int extra = (symbol - 2) >> 1;
    uint32_t offset = (uint32_t)(2 + (symbol & 1)) << extra;
    return offset + read_bits(r, extra) + 1;
}

/// Decodes a sub-image (a transform's or the entropy image) of `width` x `height` with one
/// group of codes, into `pixels` when given (only its bits are needed otherwise).
static int decode_sub_image(measure *m, int width, int height, uint32_t *pixels) {
    bit_reader *r = &m->bits;
    int cache_bits = 0;
    if (read_bits(r, 1)) {
        cache_bits = (int)read_bits(r, 4);
        if (cache_bits < 1 || cache_bits > 11) { m->error = "a colour cache size out of range"; return 0; }
    }
    uint64_t passing = group_bytes(cache_bits) + (cache_bits ? (4ull << cache_bits) : 0);
    if (passing > m->peak_extra) m->peak_extra = passing;
    prefix_code *codes = malloc(5 * sizeof *codes);
    // The values matter only for the entropy image: the bits read never depend on them.
    uint32_t *cache = cache_bits && pixels != NULL ? calloc((size_t)1 << cache_bits, 4) : NULL;
    int ok = codes != NULL && (cache_bits == 0 || pixels == NULL || cache != NULL);
    if (!ok) m->error = "out of memory";
    for (int which = 0; ok && which < 5; which++) {
        ok = read_code(r, alphabet_size(which, cache_bits), &codes[which]);
        if (!ok) m->error = r->past_end ? "the stream ends early" : "a prefix code libwebp refuses";
    }
    uint64_t total = (uint64_t)width * (uint64_t)height, at = 0;
    while (ok && at < total) {
        int green = read_symbol(r, &codes[0]);
        if (green < 256) {
            uint32_t red = (uint32_t)read_symbol(r, &codes[1]);
            uint32_t blue = (uint32_t)read_symbol(r, &codes[2]);
            uint32_t alpha = (uint32_t)read_symbol(r, &codes[3]);
            uint32_t argb = alpha << 24 | red << 16 | (uint32_t)green << 8 | blue;
            if (pixels != NULL) pixels[at] = argb;
            if (cache != NULL) cache[(argb * 0x1e35a7bdu) >> (32 - cache_bits)] = argb;
            at++;
        } else if (green < 256 + 24) {
            uint32_t length = copy_distance(r, green - 256);
            uint32_t code = copy_distance(r, read_symbol(r, &codes[4]));
            int64_t distance;
            if (code > 120) {
                distance = (int64_t)code - 120;
            } else {
                distance = (int64_t)nearby[code - 1][1] * width + nearby[code - 1][0];
                if (distance < 1) distance = 1;
            }
            if ((uint64_t)distance > at || length > total - at) {
                if (!r->past_end) { m->error = "a backward reference outside the image"; ok = 0; }
                break;
            }
            if (pixels == NULL) { at += length; continue; }
            for (uint32_t i = 0; i < length; i++, at++) {
                uint32_t argb = pixels[at - (uint64_t)distance];
                pixels[at] = argb;
                if (cache != NULL) cache[(argb * 0x1e35a7bdu) >> (32 - cache_bits)] = argb;
            }
        } else if (green < 256 + 24 + (cache_bits ? 1 << cache_bits : 0)) {
            if (pixels != NULL) {
                uint32_t argb = cache[green - 256 - 24];
                pixels[at] = argb;
                cache[(argb * 0x1e35a7bdu) >> (32 - cache_bits)] = argb;  // every pixel goes in, as libwebp does
            }
            at++;
        } else {
            m->error = "a symbol out of range";
            ok = 0;
        }
        if (r->past_end) break;
    }
    if (ok && r->past_end) { m->error = "the stream ends early"; ok = 0; }
    free(codes);
    free(cache);
    return ok;
}

static uint32_t sub_sampled(uint32_t size, int bits) { return (size + (1u << bits) - 1) >> bits; }

/// The transforms of the main stream: each one's image decoded for its bits and counted as
/// libwebp keeps it. `width` becomes the packed width a colour-indexing transform leaves.
static int measure_transforms(measure *m, uint32_t *width, uint32_t height, int *transforms, int *only_indexing) {
    bit_reader *r = &m->bits;
    int seen = 0;
    *transforms = 0;
    while (read_bits(r, 1)) {
        int type = (int)read_bits(r, 2);
        if (seen & (1 << type)) { m->error = "a transform given twice"; return 0; }
        seen |= 1 << type;
        (*transforms)++;
        if (type == 0 || type == 1) {
            int bits = (int)read_bits(r, 3) + 2;
            uint32_t w = sub_sampled(*width, bits), h = sub_sampled(height, bits);
            if (!count(m, (uint64_t)w * h * 4)) return 1;
            if (!decode_sub_image(m, (int)w, (int)h, NULL)) return 0;
        } else if (type == 3) {
            int colors = (int)read_bits(r, 8) + 1;
            int bits = colors > 16 ? 0 : colors > 4 ? 1 : colors > 2 ? 2 : 3;
            count(m, (uint64_t)colors * 4 + (4u << (8 >> bits)));
            if (!decode_sub_image(m, colors, 1, NULL)) return 0;
            *width = sub_sampled(*width, bits);
        }
        if (r->past_end) { m->error = "the stream ends early"; return 0; }
    }
    *only_indexing = seen == (1 << 3);
    return 1;
}

int tessera_vp8l_measure(const uint8_t *data, size_t size, uint32_t width, uint32_t height, int alpha, uint64_t cap,
                         tessera_vp8l_cost *cost, char *message, size_t message_bytes) {
    memset(cost, 0, sizeof *cost);
    measure m = { .bits = { .data = data, .size = size }, .cap = cap };
    bit_reader *r = &m.bits;
    uint32_t packed = width;
    // The pixels libwebp decodes into, counted first at what they cost at the least: half a
    // byte a pixel (four bytes a pixel of a width packed eight to one; an alpha plane's is a
    // byte a pixel besides), twice any entropy image decoded below. A picture whose pixels
    // alone pass the cap is not read further (an entropy image of 4096 x 2875 took 47 MB of
    // the scan's memory before, outside any budget: a helper's finding).
    uint64_t least = (uint64_t)width * height / 2;
    if (!count(&m, least)) {
        cost->bytes = m.bytes;
        cost->at_least = 1;
        return 0;
    }
    int transforms = 0, only_indexing = 0, ok = measure_transforms(&m, &packed, height, &transforms, &only_indexing);
    int cache_bits = 0;
    uint32_t *entropy = NULL;
    uint8_t *used = NULL;
    uint32_t groups_max = 1, groups = 1;
    int mapped = 0;
    if (ok && !m.over && read_bits(r, 1)) {
        cache_bits = (int)read_bits(r, 4);
        if (cache_bits < 1 || cache_bits > 11) { m.error = "a colour cache size out of range"; ok = 0; }
    }
    uint64_t entropy_pixels = 0;
    if (ok && !m.over && read_bits(r, 1)) {
        int bits = (int)read_bits(r, 3) + 2;
        uint32_t w = sub_sampled(packed, bits), h = sub_sampled(height, bits);
        entropy_pixels = (uint64_t)w * h;
        if (count(&m, entropy_pixels * 4)) {
            entropy = malloc((size_t)entropy_pixels * 4);
            if (entropy == NULL) { m.error = "out of memory"; ok = 0; }
            ok = ok && decode_sub_image(&m, (int)w, (int)h, entropy);
        }
    }
    if (ok && !m.over && entropy != NULL) {
        used = calloc(1 << 16, 1);
        if (used == NULL) { m.error = "out of memory"; ok = 0; }
        uint32_t distinct = 0;
        for (uint64_t i = 0; ok && i < entropy_pixels; i++) {
            uint32_t group = (entropy[i] >> 8) & 0xffff;
            if (!used[group]) { used[group] = 1; distinct++; }
            if (group + 1 > groups_max) groups_max = group + 1;
        }
        // libwebp 1.2 builds tables for every group up to the largest, unless that is over
        // 1000 or over the pixels: then only for the ones used (and keeps a map of them).
        mapped = groups_max > 1000 || (uint64_t)groups_max > (uint64_t)packed * height;
        groups = mapped ? distinct : groups_max;
        if (mapped) count(&m, (uint64_t)groups_max * 4);
    }
    free(entropy);
    cost->groups = groups;
    if (ok && !m.over) count(&m, (uint64_t)groups * group_bytes(cache_bits) + (cache_bits ? 4ull << cache_bits : 0));
    // Every group's five codes are read (the unused ones too, as libwebp reads them), for the
    // one-byte alpha decoder's condition: red, blue and alpha of one symbol in every group.
    int trivial = cache_bits == 0;
    prefix_code *code = ok && !m.over ? malloc(sizeof *code) : NULL;
    if (ok && !m.over && code == NULL) { m.error = "out of memory"; ok = 0; }
    for (uint32_t group = 0; ok && !m.over && group < groups_max; group++) {
        for (int which = 0; ok && which < 5; which++) {
            ok = read_code(r, alphabet_size(which, cache_bits), code);
            if (!ok) m.error = r->past_end ? "the stream ends early" : "a prefix code libwebp refuses";
            else if (which >= 1 && which <= 3 && !code->single && (!mapped || used[group])) trivial = 0;
        }
    }
    free(code);
    free(used);
    // The pixels libwebp decodes into: one byte each for an alpha plane of a colour index
    // alone with trivial codes, else four, with a row and sixteen rows of cache at full width.
    cost->one_byte_alpha = alpha && transforms == 1 && only_indexing && trivial;
    uint64_t pixels = (uint64_t)packed * height;
    if (ok && !m.over) {
        m.bytes -= least;  // counted at the start
        count(&m, cost->one_byte_alpha ? pixels : (pixels + (uint64_t)width * 17) * 4);
    }
    cost->bytes = m.bytes + m.peak_extra;
    cost->at_least = m.over;
    if (!ok && !m.over) {
        snprintf(message, message_bytes, "%s", m.error != NULL ? m.error : "corrupt lossless data");
        return -1;
    }
    return 0;
}
