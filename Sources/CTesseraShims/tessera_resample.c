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

void tessera_resample_horizontal(const uint8_t *pixels, const int32_t *first, const int32_t *taps, const int32_t *weight_start,
                                 const float *weights, float *out, size_t output_width) {
    for (size_t x = 0; x < output_width; x++) {
        float r = 0.0f, g = 0.0f, b = 0.0f;
        const uint8_t *p = pixels + (size_t)first[x] * 3;
        const float *w = weights + weight_start[x];
        for (int32_t k = 0; k < taps[x]; k++) {
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
