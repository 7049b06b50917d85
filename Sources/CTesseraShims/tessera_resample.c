// tessera_resample.c — the resampler's (Cells/AreaResampler.swift) innermost loop in C, where
// the compiler vectorises it: a row of float sums to bytes. In Swift the float-to-byte
// conversion stayed one element at a time and took most of a 400 x 300 cell's decode.
#include "tessera_shims.h"

// The same arithmetic as the Swift it replaces: single precision, no fused multiply-add.
#pragma STDC FP_CONTRACT OFF

// AVX2 (eight floats a step, where the baseline's SSE2 does four) where the processor has it:
// the same operations in the same order on each element, so the bytes are the same. A collage
// of 10,000 photos spent a third of its CPU time in these three loops (perf), over 1.25 GP of
// output: more than the JPEG encoder of the same pixels.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TESSERA_RESAMPLE_X86 1

static int avx2_state = -1;
static int avx2_allowed = 1;

static int avx2_present(void) {
    int state = __atomic_load_n(&avx2_state, __ATOMIC_RELAXED);
    if (state < 0) {
        state = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&avx2_state, state, __ATOMIC_RELAXED);
    }
    return state && __atomic_load_n(&avx2_allowed, __ATOMIC_RELAXED);
}

__attribute__((target("avx2")))
static size_t emit_row_avx2(float *sums, float scale, uint8_t *out, size_t count) {
    const __m256 factor = _mm256_set1_ps(scale), half = _mm256_set1_ps(0.5f);
    const __m256 low = _mm256_setzero_ps(), high = _mm256_set1_ps(255.0f);
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 value = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(sums + i), factor), half);
        value = _mm256_min_ps(_mm256_max_ps(value, low), high);
        __m256i whole = _mm256_cvttps_epi32(value);
        __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(whole), _mm256_extracti128_si256(whole, 1));
        _mm_storel_epi64((__m128i *)(out + i), _mm_packus_epi16(words, words));
        _mm256_storeu_ps(sums + i, low);
    }
    return i;
}

__attribute__((target("avx2")))
static size_t accumulate_avx2(float *sums, const float *row, float weight, size_t count) {
    const __m256 w = _mm256_set1_ps(weight);
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        _mm256_storeu_ps(sums + i, _mm256_add_ps(_mm256_loadu_ps(sums + i), _mm256_mul_ps(_mm256_loadu_ps(row + i), w)));
    }
    return i;
}
#endif

int tessera_resample_use_avx2(int enabled) {
#ifdef TESSERA_RESAMPLE_X86
    __atomic_store_n(&avx2_allowed, enabled != 0, __ATOMIC_RELAXED);
    return avx2_present();
#else
    (void)enabled;
    return 0;
#endif
}

void tessera_resample_emit_row(float *sums, float scale, uint8_t *out, size_t count) {
    size_t i = 0;
#ifdef TESSERA_RESAMPLE_X86
    if (avx2_present()) i = emit_row_avx2(sums, scale, out, count);
#endif
    for (; i < count; i++) {
        float value = sums[i] * scale + 0.5f;
        value = value < 0.0f ? 0.0f : (value > 255.0f ? 255.0f : value);
        out[i] = (uint8_t)value;
        sums[i] = 0.0f;
    }
}

void tessera_resample_accumulate(float *sums, const float *row, float weight, size_t count) {
    size_t i = 0;
#ifdef TESSERA_RESAMPLE_X86
    if (avx2_present()) i = accumulate_avx2(sums, row, weight, count);
#endif
    for (; i < count; i++) sums[i] += row[i] * weight;
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
#ifdef TESSERA_RESAMPLE_X86
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

#ifdef TESSERA_RESAMPLE_SSE2
// Two input pixels (three channels and the next byte each) as eight floats, `a`'s low.
__attribute__((target("avx2")))
static inline __m256 pixel_pair_floats(const uint8_t *a, const uint8_t *b) {
    int32_t first, second;
    __builtin_memcpy(&first, a, 4);
    __builtin_memcpy(&second, b, 4);
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(first), _mm_cvtsi32_si128(second))));
}

// Weight `a` in the low four lanes, `b` in the high four.
__attribute__((target("avx2")))
static inline __m256 weight_pair(const float *a, const float *b) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_broadcast_ss(a)), _mm_broadcast_ss(b), 1);
}

// The SSE2 loop's arithmetic on eight output pixels at a time, two to a vector: lanes 0-3 are
// one pixel's, 4-7 the next one's. Returns where it stopped.
__attribute__((target("avx2")))
static size_t horizontal_avx2(const uint8_t *pixels, const int32_t *first, size_t n, const float *weights,
                              float *out, size_t vector_end) {
    size_t x = 0;
    for (; x + 8 <= vector_end; x += 8) {
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
        const uint8_t *p[8];
        for (int j = 0; j < 8; j++) p[j] = pixels + (size_t)first[x + j] * 3;
        const float *w = weights + x * n;
        for (size_t k = 0; k < n; k++) {
            s0 = _mm256_add_ps(s0, _mm256_mul_ps(pixel_pair_floats(p[0] + 3 * k, p[1] + 3 * k), weight_pair(w + k, w + n + k)));
            s1 = _mm256_add_ps(s1, _mm256_mul_ps(pixel_pair_floats(p[2] + 3 * k, p[3] + 3 * k), weight_pair(w + 2 * n + k, w + 3 * n + k)));
            s2 = _mm256_add_ps(s2, _mm256_mul_ps(pixel_pair_floats(p[4] + 3 * k, p[5] + 3 * k), weight_pair(w + 4 * n + k, w + 5 * n + k)));
            s3 = _mm256_add_ps(s3, _mm256_mul_ps(pixel_pair_floats(p[6] + 3 * k, p[7] + 3 * k), weight_pair(w + 6 * n + k, w + 7 * n + k)));
        }
        // In order, each store's fourth float overwritten by the next pixel's first.
        float *o = out + x * 3;
        _mm_storeu_ps(o, _mm256_castps256_ps128(s0));
        _mm_storeu_ps(o + 3, _mm256_extractf128_ps(s0, 1));
        _mm_storeu_ps(o + 6, _mm256_castps256_ps128(s1));
        _mm_storeu_ps(o + 9, _mm256_extractf128_ps(s1, 1));
        _mm_storeu_ps(o + 12, _mm256_castps256_ps128(s2));
        _mm_storeu_ps(o + 15, _mm256_extractf128_ps(s2, 1));
        _mm_storeu_ps(o + 18, _mm256_castps256_ps128(s3));
        _mm_storeu_ps(o + 21, _mm256_extractf128_ps(s3, 1));
    }
    return x;
}
#endif

void tessera_resample_horizontal(const uint8_t *pixels, const int32_t *first, int32_t taps, const float *weights,
                                 float *out, size_t output_width, size_t vector_end) {
    size_t x = 0;
#ifdef TESSERA_RESAMPLE_SSE2
    const size_t n = (size_t)taps;
    if (avx2_present()) x = horizontal_avx2(pixels, first, n, weights, out, vector_end);
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
