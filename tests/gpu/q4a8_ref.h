// ninfer tests - host model of the tiled q4 GEMV's int8-activation route (gemv.h GemvArgs::x_int8):
// x quantised per 64-element group, exact integer group dots with the q4 codes, their exact fp64
// sum, and the bounds a device result of that sum must meet.
//
// Contract: quantise_group() reproduces gemv.h's quantiser bit for bit: amax = max |x| over the
// group's valid elements, inv = min(127 / amax, FLT_MAX) and x * inv rounded to fp32 (nearest), q = rint (ties to
// even) clamped to -127..127, d = amax / 127 in fp32; all zero when amax == 0; a group with a NaN
// (amax NaN) or an infinity (amax inf) has q 0 and d = amax / 127. quantise_row() takes
// x, or with low halves x + x_lo summed in fp32 (the value the route quantises then). Q4Row holds a
// q4_g64_fp16 artifact row's signed codes and group multipliers (docs/ARTIFACT_FORMAT.md §3.2, as
// weights_util.h's random_weight writes it). w4a8_dot() is the route's formula sum_j dot_j * s_j *
// d_j evaluated exactly, and the sum of its terms' magnitudes; fp32_sum_bound() and output_bound()
// how far the device's fp32 sum and its bf16 / fp32 output may be from it.
#pragma once

#include "weights_util.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ninfer::test {

constexpr int kQ4A8Group = 64;

struct QuantGroup {
    float d = 0.f; // amax / 127, 0 for an all-zero group
    int8_t q[kQ4A8Group] = {};
};

// The group starting at x with `count` valid elements (the rest, past k, count as zero).
inline QuantGroup quantise_group(const float* x, int count) {
    QuantGroup g;
    float v[kQ4A8Group] = {};
    float amax = 0.f;
    for (int e = 0; e < count; ++e) {
        v[e] = x[e];
        if (std::isnan(v[e]) || std::fabs(v[e]) > amax) amax = std::isnan(amax) ? amax : std::fabs(v[e]); // NaN sticks
    }
    if (amax == 0.f) return g;
    if (!(amax <= std::numeric_limits<float>::max())) { // NaN or inf: q 0, d NaN or inf
        g.d = amax / 127.0f;
        return g;
    }
    // Every operation in float: x86-64 evaluates float arithmetic in float (SSE, no x87 excess
    // precision), there is no add to contract into an fma, and std::rint rounds ties to even in
    // the default rounding mode.
    const float inv = std::min(127.0f / amax, std::numeric_limits<float>::max()); // finite for tiny amax
    for (int e = 0; e < kQ4A8Group; ++e) {
        const float scaled = v[e] * inv;
        g.q[e] = int8_t(std::clamp(std::rint(scaled), -127.0f, 127.0f));
    }
    g.d = amax / 127.0f;
    return g;
}

// One token row of k elements (x, or x + lo in fp32 when lo is given) as ceil(k / 64) groups.
inline std::vector<QuantGroup> quantise_row(const bf16* x, const bf16* lo, int64_t k) {
    std::vector<float> v(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) v[size_t(i)] = lo ? to_f(x[i]) + to_f(lo[i]) : to_f(x[i]);
    std::vector<QuantGroup> groups(size_t((k + kQ4A8Group - 1) / kQ4A8Group));
    for (size_t j = 0; j < groups.size(); ++j)
        groups[j] = quantise_group(v.data() + j * kQ4A8Group, int(std::min<int64_t>(kQ4A8Group, k - int64_t(j) * kQ4A8Group)));
    return groups;
}

struct Q4Row {
    std::vector<int8_t> code; // k signed codes, -8..7
    std::vector<float> scale; // the fp16 multiplier of each 64-code group, ceil(k / 64) of them
};

inline Q4Row q4_row(const std::vector<uint8_t>& bytes, int64_t n, int64_t k, int64_t r) {
    const int64_t g = q4_groups(k);
    const size_t row_at = size_t(r * g * 32), scale_off = (size_t(n * g * 32) + 255) / 256 * 256;
    Q4Row row;
    row.code.resize(size_t(k));
    row.scale.resize(size_t((k + kQ4A8Group - 1) / kQ4A8Group));
    for (int64_t i = 0; i < k; ++i) {
        const uint8_t byte = bytes[row_at + size_t(i / 2)];
        const int nibble = (i % 2) ? byte >> 4 : byte & 15; // even index in the low nibble
        row.code[size_t(i)] = int8_t(nibble >= 8 ? nibble - 16 : nibble);
    }
    for (size_t j = 0; j < row.scale.size(); ++j) {
        __half s;
        std::memcpy(&s, &bytes[scale_off + (size_t(r * g) + j) * 2], 2);
        row.scale[j] = __half2float(s);
    }
    return row;
}

struct W4A8Value {
    double y = 0;   // sum_j dot_j * s_j * d_j
    double mag = 0; // sum_j |dot_j * s_j * d_j|
};

// Each term is exact in double: |dot| <= 64 * 127 * 8 < 2^16, s has 11 significant bits and d 24,
// 51 <= 53 bits; the fp64 sum of <= 272 of them is within 2^-45 * mag of the exact sum, far below
// the fp32 bound the device's result is held to.
inline W4A8Value w4a8_dot(const Q4Row& w, const std::vector<QuantGroup>& x, int64_t k) {
    W4A8Value v;
    for (size_t j = 0; j < x.size(); ++j) {
        const int64_t base = int64_t(j) * kQ4A8Group, count = std::min<int64_t>(kQ4A8Group, k - base);
        int32_t dot = 0;
        for (int64_t e = 0; e < count; ++e) dot += int32_t(x[j].q[e]) * int32_t(w.code[size_t(base + e)]);
        const double term = double(dot) * double(w.scale[j]) * double(x[j].d);
        v.y += term;
        v.mag += std::fabs(term);
    }
    return v;
}

// Bound of |acc - y| for the device's fp32 sum acc of the `groups` terms of w4a8_dot (magnitudes
// summing to mag). Per term the device rounds one product (s * d, or float(dot) * s before * d:
// at most two, fma or not) and then adds the terms in some tree (lanes, steps, splits, partials):
// any leaf passes through at most groups - 1 additions whose operands are both nonzero (zero
// padding units and empty splits add exactly). With u = 2^-24 that is at most groups + 1 roundings
// along any path, so (Higham, Accuracy and Stability, 3.1 and 4.2) |acc - y| <= gamma_{groups+1}
// * mag, gamma_m = m u / (1 - m u). float(dot) itself is exact (|dot| < 2^24 even with the codes
// times 16).
inline double fp32_sum_bound(int64_t groups, double mag) {
    const double u = std::ldexp(1.0, -24), m = double(groups + 1);
    return m * u / (1.0 - m * u) * mag;
}

// Bound of |got - (y + r)| for an output element whose fp32 sum acc is within e of y:
// - fp32 output, no residual: acc, so e.
// - bf16 output, no residual: A = bf16(acc), |A - acc| <= 2^-8 |acc| <= 2^-8 (|y| + e) (round to
//   nearest with 8 significant bits), so a = 2^-8 (|y| + e) + e.
// - with a residual r the device adds r in fp32 to the value v above (acc, or A) and rounds that
//   sum (fp32 output: once, 2^-24; bf16 output: to fp32 and then to bf16, 2^-8 (1 + 2^-24) + 2^-24
//   of it): |v + r| <= |y + r| + a, so the bound is rnd (|y + r| + a) + a.
inline double output_bound(double y, double r, double e, bool bf16_out, bool residual) {
    const double u8 = std::ldexp(1.0, -8), u24 = std::ldexp(1.0, -24);
    const double a = bf16_out ? u8 * (std::fabs(y) + e) + e : e;
    if (!residual) return a;
    const double rnd = bf16_out ? u8 * (1.0 + u24) + u24 : u24;
    return rnd * (std::fabs(y + r) + a) + a;
}

} // namespace ninfer::test
