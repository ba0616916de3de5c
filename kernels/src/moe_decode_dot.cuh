// ninfer::kernels - row dot products of the MoE decode kernels: stored-layout weights, f32 x.
//
// Weights are decoded exactly (bf16 widened, fp8 code as bf16 times the row multiplier applied to
// the f32 row sum, q4/q5/q6/q8 signed code times the group multiplier applied to the f32 group sum) and
// multiplied with f32 x, so products are exact and sums f32: the router's top-k and the shared
// score see x unrounded, as core/cpu does. A lane streams 16-byte chunks of NR rows at once and
// multiplies each with the x of up to NT tokens, so the weights are read once for every token
// that uses them and each x vector loaded serves NR rows.
#pragma once

#include "common.cuh"
#include "ninfer/kernels/gemv.h"

#include <cuda_fp8.h>

namespace ninfer::kernels::detail {

// One matrix in the stored layout (docs/ARTIFACT_FORMAT.md §3) as the row dots read it.
struct MoeRows {
    WeightFormat format = WeightFormat::Bf16;
    const uint8_t* data = nullptr;
    const uint8_t* scales = nullptr; // fp8: bf16 per row; q4/q5/q6: fp16 per (row, 64-group), q8: per 32-group
    const uint8_t* high = nullptr;   // q5/q6: the high-bit plane (high_row bytes per row)
    int64_t k = 0, row_bytes = 0, chunks = 0, groups = 0, high_row = 0;
};

inline int64_t moe_align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

inline MoeRows moe_rows(const WeightView& w) {
    MoeRows m;
    m.format = w.format;
    m.data = static_cast<const uint8_t*>(w.data);
    m.k = w.k;
    if (w.format == WeightFormat::Bf16) {
        m.row_bytes = 2 * w.k;
    } else if (w.format == WeightFormat::Fp8E4m3RowBf16) {
        m.row_bytes = w.k;
        m.scales = m.data + moe_align_up(w.n * w.k, 256);
    } else { // row_split_k128_v1: base | high (q5/q6) | scales, each plane 256-byte aligned
        m.groups = moe_align_up(w.k, 128) / (w.format == WeightFormat::Q8G32Fp16 ? 32 : 64);
        m.row_bytes = m.groups * 32;
        m.high_row = m.groups * (w.format == WeightFormat::Q5G64Fp16 ? 8 : w.format == WeightFormat::Q6G64Fp16 ? 16 : 0);
        m.high = m.data + moe_align_up(w.n * m.row_bytes, 256);
        m.scales = m.high + moe_align_up(w.n * m.high_row, 256);
    }
    m.chunks = m.row_bytes / 16;
    return m;
}

template <WeightFormat F>
constexpr int kChunkElems = F == WeightFormat::Bf16 ? 8 : F == WeightFormat::Fp8E4m3RowBf16 || F == WeightFormat::Q8G32Fp16 ? 16 : 32;
// Formats whose 16-byte chunks carry fp16 group multipliers (a chunk is half a group).
template <WeightFormat F>
constexpr bool kGroupedRows = F == WeightFormat::Q4G64Fp16 || F == WeightFormat::Q5G64Fp16 ||
                              F == WeightFormat::Q6G64Fp16 || F == WeightFormat::Q8G32Fp16;

// acc[j] += row j's chunk (elements e0 ..) . x[e0 ..], j < NR; x loaded once for all rows. q5/q6: hi[j]
// holds the chunk's high bits (q5 32 in .x, q6 64), code-major LSB first as stored.
template <WeightFormat F, int NR>
__device__ __forceinline__ void chunk_dot_rows(const uint4 (&w)[NR], const float (&q4_scale)[NR], const uint2 (&hi)[NR],
                                               const float* x, int64_t e0, int64_t k, float (&acc)[NR]) {
    if constexpr (F == WeightFormat::Bf16) {
        const float4 xa = __ldg(reinterpret_cast<const float4*>(x + e0));
        const float4 xb = __ldg(reinterpret_cast<const float4*>(x + e0 + 4));
        const float xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
        for (int j = 0; j < NR; ++j) {
            const uint32_t words[4] = {w[j].x, w[j].y, w[j].z, w[j].w};
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                acc[j] = fmaf(__uint_as_float(words[m] << 16), xs[2 * m], acc[j]);
                acc[j] = fmaf(__uint_as_float(words[m] & 0xFFFF0000u), xs[2 * m + 1], acc[j]);
            }
        }
    } else if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const float4 xv = __ldg(reinterpret_cast<const float4*>(x + e0 + 4 * m));
#pragma unroll
            for (int j = 0; j < NR; ++j) {
                const uint32_t word = m == 0 ? w[j].x : m == 1 ? w[j].y : m == 2 ? w[j].z : w[j].w;
                const uint32_t p02 = fp8_pair_to_bf16(word), p13 = fp8_pair_to_bf16(word >> 8);
                acc[j] = fmaf(__uint_as_float(p02 << 16), xv.x, acc[j]);
                acc[j] = fmaf(__uint_as_float(p13 << 16), xv.y, acc[j]);
                acc[j] = fmaf(__uint_as_float(p02 & 0xFFFF0000u), xv.z, acc[j]);
                acc[j] = fmaf(__uint_as_float(p13 & 0xFFFF0000u), xv.w, acc[j]);
            }
        }
    } else { // half a group (q8: 16 codes, else 32): float(2^23 + (u ^ half)) - (2^23 + half) = signed code, exact
        constexpr int kBits = F == WeightFormat::Q5G64Fp16 ? 5 : F == WeightFormat::Q6G64Fp16 ? 6 : F == WeightFormat::Q8G32Fp16 ? 8 : 4;
        constexpr int kPerWord = kBits == 8 ? 4 : 8, kWidth = 32 / kPerWord; // codes per word, their bits in it
        constexpr uint32_t kHalf = 1u << (kBits - 1), kMask = (1u << kWidth) - 1u;
        // q4/q8 codes come out of the word already as u ^ half; q5/q6 add their high fields first.
        constexpr uint32_t kFlip = kBits == 4 ? 0x88888888u : kBits == 8 ? 0x80808080u : 0u;
        float part[NR];
#pragma unroll
        for (int j = 0; j < NR; ++j) part[j] = 0.f;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            if (e0 + kPerWord * m >= k) break; // codes past k are padding and meet no x
            float xs[kPerWord];
#pragma unroll
            for (int v = 0; v < kPerWord / 4; ++v) {
                const float4 xv = __ldg(reinterpret_cast<const float4*>(x + e0 + kPerWord * m + 4 * v));
                xs[4 * v] = xv.x, xs[4 * v + 1] = xv.y, xs[4 * v + 2] = xv.z, xs[4 * v + 3] = xv.w;
            }
#pragma unroll
            for (int j = 0; j < NR; ++j) {
                const uint32_t t = (m == 0 ? w[j].x : m == 1 ? w[j].y : m == 2 ? w[j].z : w[j].w) ^ kFlip;
                // q5/q6: the word's 8 codes' high fields, bits 8m.. (q5) or 16m.. (q6) of the chunk's stream.
                const uint32_t hw = kBits == 5 ? hi[j].x >> (8 * m) : (m < 2 ? hi[j].x : hi[j].y) >> (16 * (m & 1));
#pragma unroll
                for (int q = 0; q < kPerWord; ++q) {
                    uint32_t u = (t >> (kWidth * q)) & kMask;
                    if constexpr (kBits == 5 || kBits == 6)
                        u = (u | (((hw >> ((kBits - 4) * q)) & ((1u << (kBits - 4)) - 1u)) << 4)) ^ kHalf;
                    part[j] = fmaf(__int_as_float(0x4B000000 | u) - (8388608.f + float(kHalf)), xs[q], part[j]);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < NR; ++j) acc[j] = fmaf(part[j], q4_scale[j], acc[j]);
    }
}

template <WeightFormat F, int NR>
__device__ __forceinline__ void load_chunk(const MoeRows& m, const int64_t (&row)[NR], int64_t ch, uint4 (&w)[NR],
                                           float (&s)[NR], uint2 (&h)[NR]) {
#pragma unroll
    for (int j = 0; j < NR; ++j) {
        w[j] = load_stream16(m.data + row[j] * m.row_bytes + ch * 16);
        s[j] = kGroupedRows<F> ? __half2float(reinterpret_cast<const __half*>(m.scales)[row[j] * m.groups + ch / 2])
                               : 1.f;
        // q5/q6: the chunk is half ch % 2 of group ch / 2, whose high bytes are 8 / 16 per group.
        if constexpr (F == WeightFormat::Q5G64Fp16)
            h[j] = make_uint2(__ldg(reinterpret_cast<const unsigned int*>(m.high + row[j] * m.high_row + ch * 4)), 0u);
        else if constexpr (F == WeightFormat::Q6G64Fp16)
            h[j] = __ldg(reinterpret_cast<const uint2*>(m.high + row[j] * m.high_row + ch * 8));
        else
            h[j] = make_uint2(0u, 0u);
    }
}

// acc[t][j] += sum over this lane's chunks (c0, c0 + stride, ...) of row[j] . x[t], t < nt <= NT,
// chunks in that order (so the sums do not depend on NT). Two chunks' loads are issued before the
// first is used unless Single (fewer registers where a lane has about one chunk per row). The fp8
// row multiplier is not applied (the caller scales the reduced sum).
template <WeightFormat F, int NR, int NT, bool Single = false>
__device__ __forceinline__ void rows_dot(const MoeRows& m, const int64_t (&row)[NR], const float* const (&x)[NT], int nt,
                                         int64_t c0, int64_t stride, float (&acc)[NT][NR]) {
    if constexpr (Single) {
        for (int64_t ch = c0; ch < m.chunks; ch += stride) {
            uint4 w[NR];
            float sc[NR];
            uint2 h[NR];
            load_chunk<F, NR>(m, row, ch, w, sc, h);
#pragma unroll
            for (int t = 0; t < NT; ++t)
                if (t < nt) chunk_dot_rows<F, NR>(w, sc, h, x[t], ch * kChunkElems<F>, m.k, acc[t]);
        }
    } else {
        for (int64_t ch = c0; ch < m.chunks; ch += 2 * stride) {
            const bool second = ch + stride < m.chunks;
            uint4 wa[NR], wb[NR];
            float sa[NR], sb[NR];
            uint2 ha[NR], hb[NR];
            load_chunk<F, NR>(m, row, ch, wa, sa, ha);
            if (second) load_chunk<F, NR>(m, row, ch + stride, wb, sb, hb);
#pragma unroll
            for (int t = 0; t < NT; ++t)
                if (t < nt) chunk_dot_rows<F, NR>(wa, sa, ha, x[t], ch * kChunkElems<F>, m.k, acc[t]);
            if (!second) break;
#pragma unroll
            for (int t = 0; t < NT; ++t)
                if (t < nt) chunk_dot_rows<F, NR>(wb, sb, hb, x[t], (ch + stride) * kChunkElems<F>, m.k, acc[t]);
        }
    }
}

// Start moving a line of constant data (weights) towards L2 before the kernel may read anything else.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Bulk-prefetch bytes [at, at + size) of global memory into L2 (TMA; at and size multiples of 16).
__device__ __forceinline__ void prefetch_bulk_l2(const uint8_t* at, int64_t size) {
    if (size > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(at), "r"(uint32_t(size)) : "memory");
}

// Slice `part` of `parts` of bytes [base, base + bytes) towards L2 (slices of 16-byte multiples).
// 32-bit arithmetic (one expert's rows are far below 4 GB): a 64-bit division is a called routine
// whose stack frame the calling kernel then carries.
__device__ __forceinline__ void prefetch_slice_l2(const uint8_t* base, int64_t bytes, int part, int parts) {
    const uint32_t n = uint32_t(bytes), step = ((n + uint32_t(parts) - 1) / uint32_t(parts) + 15) & ~15u;
    const uint32_t at = uint32_t(part) * step;
    if (at < n) prefetch_bulk_l2(base + at, min(step, n - at));
}

// Slice `part` of `parts` of rows [row0, row0 + n_rows) of m (codes and multipliers) towards L2.
// Every stored row and multiplier run is a multiple of 16 bytes (k % 16 == 0, H % 16 == 0).
__device__ __forceinline__ void prefetch_rows_l2(const MoeRows& m, int64_t row0, int64_t n_rows, int part, int parts) {
    prefetch_slice_l2(m.data + row0 * m.row_bytes, n_rows * m.row_bytes, part, parts);
    if (m.groups) prefetch_slice_l2(m.scales + row0 * m.groups * 2, n_rows * m.groups * 2, part, parts);
    else if (m.format == WeightFormat::Fp8E4m3RowBf16) prefetch_slice_l2(m.scales + row0 * 2, n_rows * 2, part, parts);
    if (m.high_row) prefetch_slice_l2(m.high + row0 * m.high_row, n_rows * m.high_row, part, parts);
}

__device__ __forceinline__ float fp8_row_scale(const MoeRows& m, int64_t row) {
    return m.format == WeightFormat::Fp8E4m3RowBf16
               ? __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(m.scales)[row])
               : 1.f;
}

} // namespace ninfer::kernels::detail
