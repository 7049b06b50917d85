// tessera_resample.c — the resampler's (Cells/AreaResampler.swift) innermost loop in C, where
// the compiler vectorises it: a row of float sums to bytes. In Swift the float-to-byte
// conversion stayed one element at a time and took most of a 400 x 300 cell's decode.
#include "tessera_shims.h"

// The same arithmetic as the Swift it replaces: single precision, no fused multiply-add.
#pragma STDC FP_CONTRACT OFF

void tessera_resample_emit_row(float *sums, float scale, uint8_t *out, size_t count) {
    for (size_t i = 0; i < count; i++) {
        float value = sums[i] * scale + 0.5f;
        value = value < 0.0f ? 0.0f : (value > 255.0f ? 255.0f : value);
        out[i] = (uint8_t)value;
        sums[i] = 0.0f;
    }
}

void tessera_resample_accumulate(float *sums, const float *row, float weight, size_t count) {
    for (size_t i = 0; i < count; i++) sums[i] += row[i] * weight;
}

// Every output pixel has the same number of taps, `taps` (AreaResampler pads the shorter ones
// with zero weights: a zero product adds nothing, so the sums are the same to the bit), and its
// three channels are summed in one vector: per tap one 4-byte load, one multiply and one add,
// where the loop above took three of each and a branch that mispredicted as the tap count
// changed from pixel to pixel (perf, a collage of 10,000 photos: this function was a quarter of
// the run's CPU time). Lane c of the vector does channel c's arithmetic, in the same order and
// precision, so the result is the scalar loop's. The 4-byte load reads one byte past the pixel:
// output pixels `vector_end` and on (those whose last tap is the row's last pixel) take the
// scalar loop, and `out` has room for one float past the last pixel's three.
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define TESSERA_RESAMPLE_SSE2 1
#endif

static inline void horizontal_scalar(const uint8_t *pixels, const int32_t *first, int32_t taps, const float *weights,
                                     float *out, size_t from, size_t to) {
    for (size_t x = from; x < to; x++) {
        float r = 0.0f, g = 0.0f, b = 0.0f;
        const uint8_t *p = pixels + (size_t)first[x] * 3;
        const float *w = weights + x * (size_t)taps;
        for (int32_t k = 0; k < taps; k++) {
            r += (float)p[0] * w[k];
            g += (float)p[1] * w[k];
            b += (float)p[2] * w[k];
            p += 3;
        }
        out[x * 3] = r;
        out[x * 3 + 1] = g;
        out[x * 3 + 2] = b;
    }
}

#ifdef TESSERA_RESAMPLE_SSE2
// Input pixel `p`'s three channels (and the next byte) as four floats.
static inline __m128 pixel_floats(const uint8_t *p) {
    int32_t four;
    __builtin_memcpy(&four, p, 4);
    const __m128i zero = _mm_setzero_si128();
    return _mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(four), zero), zero));
}
#endif

void tessera_resample_horizontal(const uint8_t *pixels, const int32_t *first, int32_t taps, const float *weights,
                                 float *out, size_t output_width, size_t vector_end) {
    size_t x = 0;
#ifdef TESSERA_RESAMPLE_SSE2
    const size_t n = (size_t)taps;
    // Four output pixels at a time: four independent chains of adds, where one pixel's chain
    // (an add waiting on the one before) left the core idle. Stored in order, each store's
    // fourth float overwritten by the next pixel's first.
    for (; x + 4 <= vector_end; x += 4) {
        __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps(), s2 = _mm_setzero_ps(), s3 = _mm_setzero_ps();
        const uint8_t *p0 = pixels + (size_t)first[x] * 3, *p1 = pixels + (size_t)first[x + 1] * 3;
        const uint8_t *p2 = pixels + (size_t)first[x + 2] * 3, *p3 = pixels + (size_t)first[x + 3] * 3;
        const float *w = weights + x * n;
        for (size_t k = 0; k < n; k++) {
            s0 = _mm_add_ps(s0, _mm_mul_ps(pixel_floats(p0 + 3 * k), _mm_set1_ps(w[k])));
            s1 = _mm_add_ps(s1, _mm_mul_ps(pixel_floats(p1 + 3 * k), _mm_set1_ps(w[n + k])));
            s2 = _mm_add_ps(s2, _mm_mul_ps(pixel_floats(p2 + 3 * k), _mm_set1_ps(w[2 * n + k])));
            s3 = _mm_add_ps(s3, _mm_mul_ps(pixel_floats(p3 + 3 * k), _mm_set1_ps(w[3 * n + k])));
        }
        _mm_storeu_ps(out + x * 3, s0);
        _mm_storeu_ps(out + x * 3 + 3, s1);
        _mm_storeu_ps(out + x * 3 + 6, s2);
        _mm_storeu_ps(out + x * 3 + 9, s3);
    }
    for (; x < vector_end; x++) {
        __m128 sum = _mm_setzero_ps();
        const uint8_t *p = pixels + (size_t)first[x] * 3;
        const float *w = weights + x * n;
        for (size_t k = 0; k < n; k++) sum = _mm_add_ps(sum, _mm_mul_ps(pixel_floats(p + 3 * k), _mm_set1_ps(w[k])));
        _mm_storeu_ps(out + x * 3, sum);
    }
#endif
    horizontal_scalar(pixels, first, taps, weights, out, x, output_width);
}
