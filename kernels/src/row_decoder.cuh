// ninfer::kernels - exact per-element decoding of every stored weight format (the runner's f32-x
// kernels: embedding rows, f32-x GEMV, expert GEMV), shared by runner_ops.cu.
#pragma once

#include "common.cuh"
#include "ninfer/kernels/gemv.h"

#include <cuda_fp8.h>

namespace ninfer::kernels::detail {

// Exact decoding of one element of a stored-layout matrix, as core's codecs do it
// (docs/ARTIFACT_FORMAT.md §2, §3).
struct RowDecoder {
    WeightFormat format;
    const uint8_t* data;
    int64_t n, k, g;         // g: physical groups per row (row_split formats)
    const uint8_t* scales;   // fp8: bf16 per row; row_split: fp16 per (row, group); nvfp4: E4M3 plane
    const uint8_t* high;     // q5/q6: high-bit plane
    int64_t high_row;        // q5/q6: high-bit bytes per row
    const float* div;        // nvfp4: f32 divisor per row (gemv.h)

    __device__ int group_size() const { return format == WeightFormat::Q8G32Fp16 ? 32 : 64; }
    __device__ float scale_of(int64_t row, int64_t col) const {
        if (format == WeightFormat::Fp8E4m3RowBf16)
            return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(scales)[row]);
        return __half2float(reinterpret_cast<const __half*>(scales)[row * g + col / group_size()]);
    }
    // Signed q5/q6 code: base nibble plus the lane's high bits (lane-major stream, LSB first).
    __device__ float q56_code(int64_t row, int64_t col, int bits) const {
        const int64_t grp = col / 64, i = col % 64;
        const uint8_t b = data[row * g * 32 + grp * 32 + i / 2];
        const int hb = bits - 4;
        const int64_t t = i * hb;
        const uint8_t* h = high + row * high_row + grp * (64 * hb / 8);
        // A lane's 1 or 2 high bits never straddle a byte (t is a multiple of hb).
        const int u = ((i & 1) ? (b >> 4) : (b & 0xF)) | int(((uint32_t(h[t / 8]) >> (t % 8)) & ((1u << hb) - 1)) << 4);
        return float(u >= (1 << (bits - 1)) ? u - (1 << bits) : u);
    }
    __device__ float code(int64_t row, int64_t col) const {
        switch (format) {
        case WeightFormat::Bf16:
            return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(data)[row * k + col]);
        case WeightFormat::Fp8E4m3RowBf16: {
            const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(data[row * k + col]), __NV_E4M3);
            return __half2float(__half(h));
        }
        case WeightFormat::Q4G64Fp16: {
            const uint8_t b = data[row * g * 32 + (col / 64) * 32 + (col % 64) / 2];
            const int nib = (col & 1) ? (b >> 4) : (b & 0xF);
            return float((nib ^ 8) - 8);
        }
        case WeightFormat::Q5G64Fp16: return q56_code(row, col, 5);
        case WeightFormat::Q6G64Fp16: return q56_code(row, col, 6);
        case WeightFormat::Q8G32Fp16: return float(int8_t(data[row * g * 32 + col]));
        case WeightFormat::Nvfp4: {
            const uint8_t b = data[row * (k / 2) + col / 2];
            const int nib = (col & 1) ? (b >> 4) : (b & 0xF);
            const float mag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
            return (nib & 8) ? -mag[nib & 7] : mag[nib & 7];
        }
        }
        return 0.f;
    }
    __device__ float value(int64_t row, int64_t col) const {
        const float c = code(row, col);
        if (format == WeightFormat::Bf16) return c;
        if (format == WeightFormat::Nvfp4) {
            const int64_t grp = col / 16, units = k / 64;
            const int64_t at = ((row / 128) * units + grp / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + grp % 4;
            const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(scales[at]), __NV_E4M3);
            return c * __half2float(__half(h)) / div[row]; // (e2m1 * scale) / d_w, the codec's order
        }
        return c * scale_of(row, col);
    }
};

inline int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

inline RowDecoder make_decoder(const WeightView& w) {
    RowDecoder d{w.format, static_cast<const uint8_t*>(w.data), w.n, w.k, 0, nullptr, nullptr, 0, nullptr};
    switch (w.format) {
    case WeightFormat::Bf16: break;
    case WeightFormat::Fp8E4m3RowBf16: d.scales = d.data + align_up(w.n * w.k, 256); break;
    case WeightFormat::Nvfp4:
        d.scales = d.data + align_up(w.n * w.k / 2, 256);
        d.div = reinterpret_cast<const float*>(d.scales + w.n * w.k / 16);
        break;
    case WeightFormat::Q4G64Fp16:
    case WeightFormat::Q5G64Fp16:
    case WeightFormat::Q6G64Fp16:
    case WeightFormat::Q8G32Fp16: {
        const int64_t group = w.format == WeightFormat::Q8G32Fp16 ? 32 : 64;
        const int64_t high_group = w.format == WeightFormat::Q5G64Fp16 ? 8 : w.format == WeightFormat::Q6G64Fp16 ? 16 : 0;
        d.g = align_up(w.k, 128) / group;
        d.high = d.data + align_up(w.n * d.g * 32, 256);
        d.high_row = d.g * high_group;
        d.scales = d.high + align_up(w.n * d.high_row, 256);
        break;
    }
    }
    return d;
}

} // namespace ninfer::kernels::detail
