// ninfer::core - the CPU backend's elementwise and per-vector math (docs/MODEL.md §4-§7), all f32.
//
// Contract: pure functions over raw f32 arrays; `out` may alias the input where noted.
// - rms_norm_offset: y = x * rsqrt(mean(x^2) + eps) * (1 + w)       (every norm but GDN's)
// - gated_rms_norm:  y = w * (o * rsqrt(mean(o^2) + eps)) * silu(z)  (GDN output, plain weight)
// - l2_normalize:    x * rsqrt(sum(x^2) + 1e-6), in place
// - rope_neox:       rotate-half over the first rotary_dim dims, pair (i, i + rotary_dim/2)
// - softplus follows torch (threshold 20).
#pragma once

#include "core/backend/mrope.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ninfer::core::cpu {

float dot(const float* a, const float* b, size_t n);
void axpy(float a, const float* x, float* y, size_t n); // y += a * x

void rms_norm_offset(const float* x, const float* w, size_t n, float eps, float* out);
void gated_rms_norm(const float* o, const float* z, const float* w, size_t n, float eps, float* out);
void l2_normalize(float* x, size_t n);

// Rotary tables for one position: cos/sin of pos * theta^(-2i/rotary_dim), i < rotary_dim/2,
// computed like transformers (f32 inverse frequencies and f32 angle).
void rope_tables(uint32_t position, uint32_t rotary_dim, double theta, float* cos_out, float* sin_out);
void rope_neox(float* x, uint32_t rotary_dim, const float* cos_t, const float* sin_t);
// M-RoPE tables (docs/MODEL.md §5): pair j turns by the temporal, height or width position as the
// config's mrope_section says, interleaved (h where j%3==1 && j<3*s[1], w where j%3==2 &&
// j<3*s[2], else t) or in contiguous sections [t | h | w]. Equal positions (text) give exactly
// rope_tables(position); so does an empty section list (plain RoPE uses the temporal position).
void mrope_tables(const MropePosition& p, uint32_t rotary_dim, double theta,
                  std::span<const uint32_t> sections, bool interleaved, float* cos_out, float* sin_out);

void softmax(float* x, size_t n); // in place, f32, max-subtracted

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

} // namespace ninfer::core::cpu
