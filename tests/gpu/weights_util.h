// ninfer tests - host encoders/decoders for the decode weight formats (docs/ARTIFACT_FORMAT.md
// §3.2, §3.4), used by the GEMV test and benchmark to make random weights and an exact fp64
// reference.
//
// Contract: random_weight() returns bytes laid out exactly as the artifact stores them, with valid
// random codes and multipliers (no NaN codes, positive finite scales, zero padding);
// decode_row() returns row r's k logical values as doubles, exactly. q5/q6/q8 and nvfp4 are encoded
// and decoded by the CPU codec (core/formats/codec.h); bf16, fp8 and q4 by the code here. nvfp4
// bytes are in gemv.h's device form (one divisor per row): row r's divisor is the encoder's d_w
// times 2^(r % 3 - 1), so rows of different divisors are covered and the values stay exact.
// TiledWeight holds random_weight()'s bytes, their device copy (stored) and the tiled decode layout
// made from it by gemv_pack_tiled (view); DeviceGemvScratch the split-K scratch of a GEMV of n rows.
#pragma once

#include "core/formats/codec.h"
#include "gpu_test_util.h"
#include "ninfer/kernels/gemv.h"

#include <cstdint>
#include <vector>

namespace ninfer::test {

inline double e4m3_value(uint8_t c) {
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
    return s ? -mag : mag;
}

inline int64_t q4_groups(int64_t k) { return (k + 127) / 128 * 2; }

// The formats whose bytes come from the CPU codec.
inline bool codec_format(kernels::WeightFormat f) { return f > kernels::WeightFormat::Q4G64Fp16; }
inline core::TensorFormat core_format(kernels::WeightFormat f) {
    using kernels::WeightFormat;
    return f == WeightFormat::Q5G64Fp16   ? core::TensorFormat::Q5G64Fp16
           : f == WeightFormat::Q6G64Fp16 ? core::TensorFormat::Q6G64Fp16
           : f == WeightFormat::Nvfp4     ? core::TensorFormat::Nvfp4
                                          : core::TensorFormat::Q8G32Fp16;
}

inline size_t nvfp4_div_off(int64_t n, int64_t k) { return (size_t(n * k / 2) + 255) / 256 * 256 + size_t(n * k / 16); }
inline float nvfp4_row_factor(int64_t r) { return std::ldexp(1.f, int(r % 3) - 1); }

// Fills bytes fast with a xorshift stream (the weights are large; the mt19937 would dominate).
inline void fill_random_bytes(std::vector<uint8_t>& b, size_t begin, size_t end, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = begin; i < end; i += 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        for (size_t j = 0; j < 8 && i + j < end; ++j) b[i + j] = uint8_t(x >> (8 * j));
    }
}

inline std::vector<uint8_t> random_weight(kernels::WeightFormat f, int64_t n, int64_t k, uint64_t seed) {
    using kernels::WeightFormat;
    std::vector<uint8_t> b(kernels::weight_bytes(f, n, k), 0);
    Rng rng(seed);
    if (codec_format(f)) {
        // Values in (-0.05, 0.05) with a magnitude that changes every 64 columns (so do the scales).
        std::vector<uint8_t> r(size_t(n * k) * 2);
        fill_random_bytes(r, 0, r.size(), seed);
        std::vector<float> v(size_t(n * k));
        for (size_t i = 0; i < v.size(); ++i)
            v[i] = (float(r[2 * i] | (r[2 * i + 1] << 8)) / 32768.f - 1.f) * std::ldexp(0.05f, -int((i / 64) % 5));
        const uint64_t shape[2] = {uint64_t(n), uint64_t(k)};
        b = core::encode(core_format(f), shape, v);
        if (f == WeightFormat::Nvfp4) { // the device form: one divisor per row
            float d_w;
            std::memcpy(&d_w, &b[nvfp4_div_off(n, k)], 4);
            b.resize(kernels::weight_bytes(f, n, k));
            for (int64_t r = 0; r < n; ++r) {
                const float d = d_w * nvfp4_row_factor(r);
                std::memcpy(&b[nvfp4_div_off(n, k) + 4 * size_t(r)], &d, 4);
            }
        } else if (f != WeightFormat::Q8G32Fp16) // random base nibbles: codes over the whole range, -16/-32 too
            for (int64_t row = 0; row < n; ++row) {
                const int64_t row_bytes = (k + 127) / 128 * 2 * 32;
                fill_random_bytes(b, size_t(row * row_bytes), size_t(row * row_bytes + k / 2), seed + uint64_t(row) + 1);
            }
    } else if (f == WeightFormat::Bf16) {
        for (int64_t i = 0; i < n * k; ++i) {
            const bf16 v = to_bf16(rng.uniform(-1.f, 1.f) * 0.05f);
            std::memcpy(&b[size_t(i) * 2], &v, 2);
        }
    } else if (f == WeightFormat::Fp8E4m3RowBf16) {
        fill_random_bytes(b, 0, size_t(n * k), seed);
        for (int64_t i = 0; i < n * k; ++i)
            if ((b[i] & 0x7F) == 0x7F) b[i] ^= 0x01; // the two NaN codes are invalid
        const size_t scale_off = (size_t(n * k) + 255) / 256 * 256;
        for (int64_t r = 0; r < n; ++r) {
            const bf16 s = to_bf16(std::ldexp(rng.uniform(1.f, 2.f), -rng.integer(6, 12)));
            std::memcpy(&b[scale_off + 2 * r], &s, 2);
        }
    } else {
        const int64_t g = q4_groups(k), row_bytes = g * 32;
        for (int64_t r = 0; r < n; ++r) {
            fill_random_bytes(b, size_t(r * row_bytes), size_t(r * row_bytes + k / 2), seed + uint64_t(r));
            if (k % 2) b[size_t(r * row_bytes + k / 2)] = 0; // k is even in every use; keep padding zero
        }
        const size_t scale_off = (size_t(n * row_bytes) + 255) / 256 * 256;
        for (int64_t r = 0; r < n; ++r)
            for (int64_t gi = 0; gi < g; ++gi) {
                const __half s = gi < (k + 63) / 64 ? __float2half(std::ldexp(rng.uniform(1.f, 2.f), -rng.integer(5, 9)))
                                                    : __float2half(0.f);
                std::memcpy(&b[scale_off + size_t(r * g + gi) * 2], &s, 2);
            }
    }
    return b;
}

inline std::vector<double> decode_row(kernels::WeightFormat f, const std::vector<uint8_t>& b, int64_t n, int64_t k,
                                      int64_t r) {
    using kernels::WeightFormat;
    std::vector<double> w(static_cast<size_t>(k));
    if (codec_format(f)) {
        core::StoredTensor t;
        t.format = core_format(f);
        t.shape = {uint64_t(n), uint64_t(k)};
        t.data = b.data();
        t.bytes = f == WeightFormat::Nvfp4 ? nvfp4_div_off(n, k) + 4 : b.size(); // row 0's divisor is d_w / 2
        std::vector<float> row(static_cast<size_t>(k));
        core::decode_rows(t, uint64_t(r), 1, row.data());
        // nvfp4: (e2m1 * s) / (d_w / 2) from the codec, times 2 / 2^(r%3-1): powers of two, exact.
        const double factor = f == WeightFormat::Nvfp4 ? 1.0 / (2.0 * nvfp4_row_factor(r)) : 1.0;
        for (int64_t i = 0; i < k; ++i) w[i] = row[i] * factor;
    } else if (f == WeightFormat::Bf16) {
        for (int64_t i = 0; i < k; ++i) {
            bf16 v;
            std::memcpy(&v, &b[size_t(r * k + i) * 2], 2);
            w[i] = to_f(v);
        }
    } else if (f == WeightFormat::Fp8E4m3RowBf16) {
        bf16 s;
        std::memcpy(&s, &b[(size_t(n * k) + 255) / 256 * 256 + 2 * r], 2);
        for (int64_t i = 0; i < k; ++i) w[i] = double(float(e4m3_value(b[size_t(r * k + i)]) * to_f(s)));
    } else {
        const int64_t g = q4_groups(k);
        const size_t scale_off = (size_t(n * g * 32) + 255) / 256 * 256;
        for (int64_t i = 0; i < k; ++i) {
            const uint8_t byte = b[size_t(r * g * 32 + i / 2)];
            const int u = (i % 2) ? byte >> 4 : byte & 15;
            const int q = u >= 8 ? u - 16 : u;
            __half s;
            std::memcpy(&s, &b[scale_off + size_t(r * g + i / 64) * 2], 2);
            w[i] = double(__half2float(s) * float(q));
        }
    }
    return w;
}

// A random weight on the device, in the artifact layout (stored) and the tiled decode layout (view).
struct TiledWeight {
    std::vector<uint8_t> bytes; // artifact layout
    DeviceBuffer<uint8_t> artifact, tiled;
    kernels::WeightView stored, view;
    TiledWeight(kernels::WeightFormat f, int64_t n, int64_t k, uint64_t seed)
        : bytes(random_weight(f, n, k, seed)), artifact(bytes), tiled(kernels::tiled_weight_bytes(f, n, k)) {
        stored = {f, artifact.get(), n, k};
        CUDA_OK(kernels::gemv_pack_tiled(stored, tiled.get(), nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        view = {f, tiled.get(), n, k, kernels::WeightLayout::Tiled};
    }
};

// Split-K scratch for GEMVs of up to n rows (counters start at zero, as gemv.h requires).
struct DeviceGemvScratch {
    DeviceBuffer<float> partials;
    DeviceBuffer<uint32_t> counters;
    explicit DeviceGemvScratch(int64_t n)
        : partials(kernels::gemv_scratch_floats(n)), counters(kernels::gemv_scratch_counters(n), 0) {}
    kernels::GemvScratch view() { return {partials.get(), partials.size(), counters.get(), counters.size()}; }
};

} // namespace ninfer::test
