// tessera_pyramid.c — the Deep Zoom pyramid's 2 x 2 averaging (DeepZoomWriter's averageRows),
// in C for the vector unit.
//
// Why here: every level of a pyramid is averaged from the one above, so 1.6 gigapixels of rows
// go through this for a 1.2-gigapixel picture. Written byte by byte (as the Swift version was)
// it took about a tenth of the pyramid's CPU time (perf, issue 30); the SSSE3 version below does
// 16 input pixels at a time and takes about a quarter of that. The result is the same to the
// byte: each output channel is (a + b + c + d + 2) >> 2 computed in 16 bits, the last column of
// an odd width (a + c + 1) >> 1. Machines without SSSE3 (and other architectures) run the plain
// loop.
#include <stdint.h>
#include <stddef.h>

#include "tessera_shims.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define TESSERA_HAVE_SSSE3_PATH 1
#endif

static void average_plain(const uint8_t *top, const uint8_t *bottom, uint8_t *out, size_t input_width) {
    size_t pairs = input_width / 2, i = 0, o = 0;
    for (size_t p = 0; p < pairs; p++, i += 6, o += 3) {
        for (int c = 0; c < 3; c++) {
            out[o + c] = (uint8_t)((top[i + c] + top[i + 3 + c] + bottom[i + c] + bottom[i + 3 + c] + 2) >> 2);
        }
    }
    if (input_width % 2 == 1) {
        for (int c = 0; c < 3; c++) out[o + c] = (uint8_t)((top[i + c] + bottom[i + c] + 1) >> 1);
    }
}

#ifdef TESSERA_HAVE_SSSE3_PATH
// One vector of 16 sums: lane j = (t[j] + t[j+3] + b[j] + b[j+3] + 2) >> 2 as bytes; `ts`, `bs`
// are the rows' bytes 3 further on.
__attribute__((target("ssse3")))
static inline __m128i quad_means(__m128i t, __m128i ts, __m128i b, __m128i bs) {
    const __m128i zero = _mm_setzero_si128(), two = _mm_set1_epi16(2);
    __m128i lo = _mm_add_epi16(_mm_add_epi16(_mm_unpacklo_epi8(t, zero), _mm_unpacklo_epi8(ts, zero)),
                               _mm_add_epi16(_mm_unpacklo_epi8(b, zero), _mm_unpacklo_epi8(bs, zero)));
    __m128i hi = _mm_add_epi16(_mm_add_epi16(_mm_unpackhi_epi8(t, zero), _mm_unpackhi_epi8(ts, zero)),
                               _mm_add_epi16(_mm_unpackhi_epi8(b, zero), _mm_unpackhi_epi8(bs, zero)));
    lo = _mm_srli_epi16(_mm_add_epi16(lo, two), 2);
    hi = _mm_srli_epi16(_mm_add_epi16(hi, two), 2);
    return _mm_packus_epi16(lo, hi);
}

// 16 input pixels (48 bytes of each row, read no further) to 8 output pixels (24 bytes) at a
// time: the means of every byte with the one 3 on, of which the bytes j with j mod 6 < 3 (the
// first pixel of each pair) are gathered into the output with byte shuffles.
__attribute__((target("ssse3")))
static void average_ssse3(const uint8_t *top, const uint8_t *bottom, uint8_t *out, size_t input_width) {
    const size_t blocks = input_width / 16;
    // r0 holds input bytes 0..15, r1 16..31, r2 32..47; output bytes 0..15 come from r0 and r1,
    // 16..23 from r1 and r2 (-1: a zero byte, for the OR).
    const __m128i from0 = _mm_setr_epi8(0, 1, 2, 6, 7, 8, 12, 13, 14, -1, -1, -1, -1, -1, -1, -1);
    const __m128i from1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 3, 4, 8, 9, 10, 14);
    const __m128i from1b = _mm_setr_epi8(15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i from2 = _mm_setr_epi8(-1, 0, 4, 5, 6, 10, 11, 12, -1, -1, -1, -1, -1, -1, -1, -1);
    for (size_t k = 0; k < blocks; k++) {
        const uint8_t *t = top + k * 48, *b = bottom + k * 48;
        __m128i t0 = _mm_loadu_si128((const __m128i *)t), b0 = _mm_loadu_si128((const __m128i *)b);
        __m128i t1 = _mm_loadu_si128((const __m128i *)(t + 16)), b1 = _mm_loadu_si128((const __m128i *)(b + 16));
        __m128i t2 = _mm_loadu_si128((const __m128i *)(t + 32)), b2 = _mm_loadu_si128((const __m128i *)(b + 32));
        __m128i r0 = quad_means(t0, _mm_loadu_si128((const __m128i *)(t + 3)), b0, _mm_loadu_si128((const __m128i *)(b + 3)));
        __m128i r1 = quad_means(t1, _mm_loadu_si128((const __m128i *)(t + 19)), b1, _mm_loadu_si128((const __m128i *)(b + 19)));
        // Bytes 35..47 shifted down (the top lanes, unused, get zeros): no read past byte 47.
        __m128i r2 = quad_means(t2, _mm_srli_si128(t2, 3), b2, _mm_srli_si128(b2, 3));
        __m128i low = _mm_or_si128(_mm_shuffle_epi8(r0, from0), _mm_shuffle_epi8(r1, from1));
        __m128i high = _mm_or_si128(_mm_shuffle_epi8(r1, from1b), _mm_shuffle_epi8(r2, from2));
        _mm_storeu_si128((__m128i *)(out + k * 24), low);
        _mm_storel_epi64((__m128i *)(out + k * 24 + 16), high);
    }
    average_plain(top + blocks * 48, bottom + blocks * 48, out + blocks * 24, input_width - blocks * 16);
}

// 1: SSSE3 present; 0: not; -1: not asked yet (a benign race: every thread finds the same).
static int has_ssse3 = -1;

static int ssse3_present(void) {
    if (has_ssse3 < 0) {
        unsigned int a = 0, b = 0, c = 0, d = 0;
        has_ssse3 = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSSE3) ? 1 : 0;
    }
    return has_ssse3;
}
#endif

void tessera_average_rows(const uint8_t *top, const uint8_t *bottom, uint8_t *out, size_t input_width) {
#ifdef TESSERA_HAVE_SSSE3_PATH
    if (input_width >= 16 && ssse3_present()) {
        average_ssse3(top, bottom, out, input_width);
        return;
    }
#endif
    average_plain(top, bottom, out, input_width);
}
