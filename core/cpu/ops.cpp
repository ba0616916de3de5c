// ninfer::core - f32 vector math of the CPU backend (norms, RoPE, softmax, dot products).
#include "core/cpu/ops.h"

#include "core/cpu/simd.h"

#include <algorithm>
#include <vector>

namespace ninfer::core::cpu {

NINFER_SIMD_CLONES float dot(const float* a, const float* b, size_t n) {
    v8f acc0 = splat8(0.0f), acc1 = splat8(0.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 += load8(a + i) * load8(b + i);
        acc1 += load8(a + i + 8) * load8(b + i + 8);
    }
    for (; i + 8 <= n; i += 8)
        acc0 += load8(a + i) * load8(b + i);
    float s = hsum8(acc0 + acc1);
    for (; i < n; ++i)
        s += a[i] * b[i];
    return s;
}

NINFER_SIMD_CLONES void axpy(float a, const float* x, float* y, size_t n) {
    const v8f va = splat8(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        store8(y + i, load8(y + i) + va * load8(x + i));
    for (; i < n; ++i)
        y[i] += a * x[i];
}

static float mean_square(const float* x, size_t n) { return dot(x, x, n) / float(n); }

void rms_norm_offset(const float* x, const float* w, size_t n, float eps, float* out) {
    const float r = 1.0f / std::sqrt(mean_square(x, n) + eps);
    for (size_t i = 0; i < n; ++i)
        out[i] = (x[i] * r) * (1.0f + w[i]);
}

void gated_rms_norm(const float* o, const float* z, const float* w, size_t n, float eps, float* out) {
    const float r = 1.0f / std::sqrt(mean_square(o, n) + eps);
    for (size_t i = 0; i < n; ++i)
        out[i] = w[i] * (o[i] * r) * silu(z[i]);
}

void l2_normalize(float* x, size_t n) {
    const float r = 1.0f / std::sqrt(dot(x, x, n) + 1e-6f);
    for (size_t i = 0; i < n; ++i)
        x[i] *= r;
}

void rope_tables(uint32_t position, uint32_t rotary_dim, double theta, float* cos_out,
                 float* sin_out) {
    const uint32_t half = rotary_dim / 2;
    for (uint32_t i = 0; i < half; ++i) {
        const float exponent = float(2 * i) / float(rotary_dim);
        const float inv_freq = 1.0f / std::pow(float(theta), exponent);
        const float angle = float(position) * inv_freq;
        cos_out[i] = std::cos(angle);
        sin_out[i] = std::sin(angle);
    }
}

void mrope_tables(const MropePosition& p, uint32_t rotary_dim, double theta,
                  std::span<const uint32_t> sections, bool interleaved, float* cos_out, float* sin_out) {
    rope_tables(p.t, rotary_dim, theta, cos_out, sin_out);
    if ((p.h == p.t && p.w == p.t) || sections.size() < 3)
        return;
    const uint32_t half = rotary_dim / 2;
    std::vector<float> cos_h(half), sin_h(half), cos_w(half), sin_w(half);
    rope_tables(p.h, rotary_dim, theta, cos_h.data(), sin_h.data());
    rope_tables(p.w, rotary_dim, theta, cos_w.data(), sin_w.data());
    for (uint32_t j = 0; j < half; ++j) {
        const bool height = interleaved ? j % 3 == 1 && j < 3 * sections[1]
                                        : j >= sections[0] && j < sections[0] + sections[1];
        const bool width = interleaved ? j % 3 == 2 && j < 3 * sections[2] : j >= sections[0] + sections[1];
        if (height) {
            cos_out[j] = cos_h[j];
            sin_out[j] = sin_h[j];
        } else if (width) {
            cos_out[j] = cos_w[j];
            sin_out[j] = sin_w[j];
        }
    }
}

void rope_neox(float* x, uint32_t rotary_dim, const float* c, const float* s) {
    const uint32_t half = rotary_dim / 2;
    for (uint32_t i = 0; i < half; ++i) {
        const float a = x[i], b = x[i + half];
        x[i] = a * c[i] - b * s[i];
        x[i + half] = b * c[i] + a * s[i];
    }
}

void softmax(float* x, size_t n) {
    const float m = *std::max_element(x, x + n);
    float sum = 0;
    for (size_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - m);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    for (size_t i = 0; i < n; ++i)
        x[i] *= inv;
}

} // namespace ninfer::core::cpu
