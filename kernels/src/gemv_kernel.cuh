// ninfer::kernels - decode GEMV kernel: mma.sync with dequantisation in registers, split-K.
//
// One warp owns a 16-row tile; a block holds 4 warps (64 rows) that share x through L1. Tokens
// are the mma's N dimension (8, padded with zeros), so each weight byte is read once for the
// whole batch. A lane (c = lane % 4, row/token g = lane / 4) loads a contiguous piece of rows g
// and g+8; the mma's k slots are assigned to physical columns in whatever order makes the
// dequantisation cheap, and x is permuted the same way with byte permutes (the dot product does
// not care about the order of k). Split-K blocks write fp32 partials; the last block of a row tile
// (atomic counter) sums them in split order, so results do not depend on timing.
#pragma once

#include "common.cuh"
#include "gemv_tiled_q4.h"
#include "ninfer/kernels/gemv.h"

#include <cooperative_groups.h>

namespace ninfer::kernels::detail {

namespace cg = cooperative_groups;

constexpr int kGemvWarps = 4;
constexpr int kGemvRowsPerBlock = 16 * kGemvWarps;

struct GemvParams {
    const uint8_t* w;       // codes / bf16 words
    const uint8_t* scales;  // fp8: bf16 per row; q4/q5/q6/q8: fp16 per (row, group)
    const uint8_t* high;    // q5/q6: high-bit plane
    int64_t n, k;
    int64_t row_bytes;      // bytes of one row in the code (base) plane
    int64_t high_row_bytes; // q5/q6: bytes of one row in the high-bit plane
    int64_t groups_per_row; // grouped formats: physical groups
    const __nv_bfloat16* x;
    const __nv_bfloat16* x_lo; // tiled layout: optional low halves of x (gemv.h)
    int64_t ldx;
    int n_tokens;
    const __nv_bfloat16* residual;
    int64_t ldr;
    void* y;
    int64_t ldy;
    bool y_fp32;
    float* y_tail;     // optional: rows >= tail_row0 go here as f32
    int64_t tail_row0;
    int64_t ld_tail;
    float* partials;
    uint32_t* counters;
    int splits;
    int64_t units_per_split; // k units (32 for bf16, 64 for fp8/q4) per split
    int64_t tiled_units;     // tiled layout: units per row, padded to a multiple of kTiledUnitPad
    Int8X x8;                // q4 int8 route: x already quantised (gemv.h GemvArgs::x8), or q null
    bool cluster_reduce;     // the splits of a row tile are one cluster: partials meet in shared memory
};

template <WeightFormat F> struct GemvTraits;
template <> struct GemvTraits<WeightFormat::Bf16> { static constexpr int kUnit = 32, kUnroll = 4; };
template <> struct GemvTraits<WeightFormat::Fp8E4m3RowBf16> { static constexpr int kUnit = 64, kUnroll = 4; };
template <> struct GemvTraits<WeightFormat::Q4G64Fp16> { static constexpr int kUnit = 64, kUnroll = 8; };
template <> struct GemvTraits<WeightFormat::Q5G64Fp16> { static constexpr int kUnit = 64, kUnroll = 4; };
template <> struct GemvTraits<WeightFormat::Q6G64Fp16> { static constexpr int kUnit = 64, kUnroll = 4; };
template <> struct GemvTraits<WeightFormat::Q8G32Fp16> { static constexpr int kUnit = 32, kUnroll = 8; };

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) { return __byte_perm(a, b, sel); }

// Signed nibbles i and i+4 of w (two's complement codes q, as stored) to a bf16 pair. One lop3
// builds bf16 128 + (q + 8) (gemv_tiled_q4.h q4_pair_bits): bits 0-2 of the code pass, bit 3 is
// inverted (q + 8 = code ^ 8 in 4 bits), 0x43 is the exponent of 128; truth table
// (b & c) | (b & ~c & a) | (~b & c & ~a) with b = 0x43074307, c = 0x43084308 is 0xCA. Subtracting
// 136 leaves q exactly.
__device__ __forceinline__ uint32_t q4_pair_to_bf16(uint32_t w_shifted) {
    uint32_t t;
    asm("lop3.b32 %0, %1, %2, %3, 0xCA;" : "=r"(t) : "r"(w_shifted), "r"(kQ4PairLop3B), "r"(kQ4PairLop3C));
    return bf16x2_sub(t, kQ4PairBias);
}

// Codes 2m and 2m+1 of a lane's 16 q5/q6 codes to a bf16 pair: base_word holds codes 8(m/4)..,
// byte m%4 = (code 2m low nibble, code 2m+1 high nibble); hb is the lane's slice of the high-bit
// stream (BITS-4 bits per code, code-major, LSB first). v = u ^ sign bit, 128+v-(128+sign) = q.
template <int BITS>
__device__ __forceinline__ uint32_t q56_pair_to_bf16(uint32_t base_word, uint32_t hb, int m) {
    constexpr int kHi = BITS - 4;
    constexpr uint32_t kSign = 1u << (BITS - 1), kHiMask = (1u << kHi) - 1;
    const uint32_t byte = (base_word >> (8 * (m & 3))) & 0xFFu;
    const uint32_t lo = (byte & 0xFu) | (((hb >> (kHi * 2 * m)) & kHiMask) << 4);
    const uint32_t hi = (byte >> 4) | (((hb >> (kHi * (2 * m + 1))) & kHiMask) << 4);
    return bf16x2_sub(((lo ^ kSign) | ((hi ^ kSign) << 16)) | 0x43004300u, 0x43004300u + kSign * 0x10001u);
}

// Signed bytes h and h+1 (h = 2 * half) of w to a bf16 pair (int8 codes are exact in bf16).
__device__ __forceinline__ uint32_t s8_pair_to_bf16(uint32_t w, int half) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(float(int8_t(w >> (16 * half))), float(int8_t(w >> (16 * half + 8))));
    return *reinterpret_cast<const uint32_t*>(&v);
}

// A unit's four mma steps: A fragments a[m] (dequantised once, reused by every pass over x) times
// the B fragments that x_for<m> selects from the lane's 8 x words.
// fp8: codes j0..j3 of word j pair as (j0,j2) and (j1,j3); x is permuted to match.
__device__ __forceinline__ void fp8_unit_a(uint32_t (&a)[4][4], const uint32_t (&wa)[4], const uint32_t (&wb)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        a[j][0] = fp8_pair_to_bf16(wa[j]);
        a[j][1] = fp8_pair_to_bf16(wb[j]);
        a[j][2] = fp8_pair_to_bf16(wa[j] >> 8);
        a[j][3] = fp8_pair_to_bf16(wb[j] >> 8);
    }
}
// A unit's four mma steps m = 0..3 on B words b[2m], b[2m+1] (x already in the format's k order).
__device__ __forceinline__ void unit_mma_b(float (&acc)[4], const uint32_t (&a)[4][4], const uint32_t (&b)[8]) {
#pragma unroll
    for (int m = 0; m < 4; ++m) mma_bf16_16816(acc, a[m][0], a[m][1], a[m][2], a[m][3], b[2 * m], b[2 * m + 1]);
}
// The lane's 16 x values xs (columns c*16..c*16+15 of the unit, in memory order) as the B words
// of fp8_unit_mma / q4_unit_mma (the same permutation as their A fragments).
__device__ __forceinline__ void fp8_unit_b(uint32_t (&b)[8], const uint32_t (&xs)[8]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        b[2 * j] = prmt(xs[2 * j], xs[2 * j + 1], 0x5410);
        b[2 * j + 1] = prmt(xs[2 * j], xs[2 * j + 1], 0x7632);
    }
}
__device__ __forceinline__ void q4_unit_b(uint32_t (&b)[8], const uint32_t (&xs)[8]) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint32_t lo = xs[4 * j + h], hi = xs[4 * j + h + 2];
            b[2 * (2 * j + h)] = prmt(lo, hi, 0x5410);
            b[2 * (2 * j + h) + 1] = prmt(lo, hi, 0x7632);
        }
}
__device__ __forceinline__ void fp8_unit_mma(float (&acc)[4], const uint32_t (&a)[4][4], const uint32_t (&xs)[8]) {
    uint32_t b[8];
    fp8_unit_b(b, xs);
    unit_mma_b(acc, a, b);
}
__device__ __forceinline__ void mma_fp8_unit(float (&acc)[4], const uint32_t (&wa)[4], const uint32_t (&wb)[4],
                                             const uint32_t (&xs)[8]) {
    uint32_t a[4][4];
    fp8_unit_a(a, wa, wb);
    fp8_unit_mma(acc, a, xs);
}

// q4: one group, word j holds codes 8j..8j+7 (nibble i = code i), paired (i, i+4).
// Experiment switch (build with -DNINFER_Q4_SHR_IMAD=1; not a run-time option): the shifts by 8 and
// 12 as IMAD.HI (w * 2^(32 - s)) >> 32 on the FMA pipe instead of SHF on the integer pipe, which
// also carries the 16 lop3 per unit. Same values, same instruction count.
#ifndef NINFER_Q4_SHR_IMAD
#define NINFER_Q4_SHR_IMAD 0
#endif
template <int S> __device__ __forceinline__ uint32_t q4_shr(uint32_t w) {
    if constexpr (NINFER_Q4_SHR_IMAD && S >= 8) return __umulhi(w, 1u << (32 - S));
    else return w >> S;
}
__device__ __forceinline__ void q4_unit_a(uint32_t (&a)[4][4], const uint32_t (&wa)[2], const uint32_t (&wb)[2]) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        a[2 * j][0] = q4_pair_to_bf16(wa[j]);
        a[2 * j][1] = q4_pair_to_bf16(wb[j]);
        a[2 * j][2] = q4_pair_to_bf16(q4_shr<4>(wa[j]));
        a[2 * j][3] = q4_pair_to_bf16(q4_shr<4>(wb[j]));
        a[2 * j + 1][0] = q4_pair_to_bf16(q4_shr<8>(wa[j]));
        a[2 * j + 1][1] = q4_pair_to_bf16(q4_shr<8>(wb[j]));
        a[2 * j + 1][2] = q4_pair_to_bf16(q4_shr<12>(wa[j]));
        a[2 * j + 1][3] = q4_pair_to_bf16(q4_shr<12>(wb[j]));
    }
}
__device__ __forceinline__ void q4_unit_mma(float (&part)[4], const uint32_t (&a)[4][4], const uint32_t (&xs)[8]) {
    uint32_t b[8];
    q4_unit_b(b, xs);
    unit_mma_b(part, a, b);
}
// part gets the unscaled sums of one group.
__device__ __forceinline__ void mma_q4_unit(float (&part)[4], const uint32_t (&wa)[2], const uint32_t (&wb)[2],
                                            const uint32_t (&xs)[8]) {
    uint32_t a[4][4];
    q4_unit_a(a, wa, wb);
    q4_unit_mma(part, a, xs);
}

// acc rows (g, g+8) times their multipliers.
__device__ __forceinline__ void scale_rows(float (&acc)[4], float s0, float s1) {
    acc[0] *= s0;
    acc[1] *= s0;
    acc[2] *= s1;
    acc[3] *= s1;
}

// kUnroll k units starting at unit u. GUARD = false only when all of them lie inside the split and
// inside k, so the steady state carries no predicates.
template <WeightFormat F, bool GUARD>
__device__ __forceinline__ void gemv_units(const GemvParams& p, int64_t u, int64_t u_end, int c, bool has_token,
                                           const __nv_bfloat16* xg, const uint8_t* w0, const uint8_t* w1,
                                           int64_t r0, int64_t r1, float (&acc)[4]) {
    constexpr int kUnit = GemvTraits<F>::kUnit;
    constexpr int kUnroll = GemvTraits<F>::kUnroll;
    if constexpr (F == WeightFormat::Bf16) {
        uint4 a[kUnroll][2], b[kUnroll];
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) {
            const int64_t kk = (u + i) * kUnit + c * 8;
            const bool ok = !GUARD || ((u + i) < u_end && kk < p.k);
            a[i][0] = ok ? load_stream16(w0 + kk * 2) : make_uint4(0, 0, 0, 0);
            a[i][1] = ok ? load_stream16(w1 + kk * 2) : make_uint4(0, 0, 0, 0);
            b[i] = ok && has_token ? load_cached16(xg + kk) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) {
            mma_bf16_16816(acc, a[i][0].x, a[i][1].x, a[i][0].y, a[i][1].y, b[i].x, b[i].y);
            mma_bf16_16816(acc, a[i][0].z, a[i][1].z, a[i][0].w, a[i][1].w, b[i].z, b[i].w);
        }
    } else if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
        uint4 a[kUnroll][2], b[kUnroll][2];
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) {
            const int64_t kk = (u + i) * kUnit + c * 16;
            const bool ok = !GUARD || ((u + i) < u_end && kk < p.k);
            a[i][0] = ok ? load_stream16(w0 + kk) : make_uint4(0, 0, 0, 0);
            a[i][1] = ok ? load_stream16(w1 + kk) : make_uint4(0, 0, 0, 0);
            b[i][0] = ok && has_token ? load_cached16(xg + kk) : make_uint4(0, 0, 0, 0);
            b[i][1] = ok && has_token ? load_cached16(xg + kk + 8) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) {
            const uint32_t wa[4] = {a[i][0].x, a[i][0].y, a[i][0].z, a[i][0].w};
            const uint32_t wb[4] = {a[i][1].x, a[i][1].y, a[i][1].z, a[i][1].w};
            const uint32_t xs[8] = {b[i][0].x, b[i][0].y, b[i][0].z, b[i][0].w,
                                    b[i][1].x, b[i][1].y, b[i][1].z, b[i][1].w};
            mma_fp8_unit(acc, wa, wb, xs);
        }
    } else if constexpr (F == WeightFormat::Q4G64Fp16) {
        uint2 a[kUnroll][2];
        uint4 b[kUnroll][2];
        __half s[kUnroll][2];
        const __half* sc0 = reinterpret_cast<const __half*>(p.scales) + r0 * p.groups_per_row;
        const __half* sc1 = reinterpret_cast<const __half*>(p.scales) + r1 * p.groups_per_row;
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) {
            const int64_t grp = u + i;
            const int64_t kk = grp * kUnit + c * 16;
            const bool ok = !GUARD || (grp < u_end && kk < p.k);
            a[i][0] = ok ? load_stream8(w0 + grp * 32 + c * 8) : make_uint2(0, 0);
            a[i][1] = ok ? load_stream8(w1 + grp * 32 + c * 8) : make_uint2(0, 0);
            b[i][0] = ok && has_token ? load_cached16(xg + kk) : make_uint4(0, 0, 0, 0);
            b[i][1] = ok && has_token ? load_cached16(xg + kk + 8) : make_uint4(0, 0, 0, 0);
            s[i][0] = !GUARD || grp < u_end ? sc0[grp] : __half(0.f);
            s[i][1] = !GUARD || grp < u_end ? sc1[grp] : __half(0.f);
        }
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) {
            float part[4] = {0.f, 0.f, 0.f, 0.f};
            const uint32_t wa[2] = {a[i][0].x, a[i][0].y};
            const uint32_t wb[2] = {a[i][1].x, a[i][1].y};
            const uint32_t xs[8] = {b[i][0].x, b[i][0].y, b[i][0].z, b[i][0].w,
                                    b[i][1].x, b[i][1].y, b[i][1].z, b[i][1].w};
            mma_q4_unit(part, wa, wb, xs);
            const float s0 = __half2float(s[i][0]), s1 = __half2float(s[i][1]);
            acc[0] = fmaf(part[0], s0, acc[0]);
            acc[1] = fmaf(part[1], s0, acc[1]);
            acc[2] = fmaf(part[2], s1, acc[2]);
            acc[3] = fmaf(part[3], s1, acc[3]);
        }
    } else { // q5/q6 (lane: 16 codes, 8 base bytes + its high bits) and q8 (lane: 8 int8 codes)
        constexpr bool kQ8 = F == WeightFormat::Q8G32Fp16;
        constexpr int kBits = F == WeightFormat::Q5G64Fp16 ? 5 : 6;
        constexpr int kLaneCodes = kQ8 ? 8 : 16;
        uint2 a[kUnroll][2];
        uint32_t h[kUnroll][2];
        uint4 b[kUnroll][2];
        __half s[kUnroll][2];
        const __half* sc0 = reinterpret_cast<const __half*>(p.scales) + r0 * p.groups_per_row;
        const __half* sc1 = reinterpret_cast<const __half*>(p.scales) + r1 * p.groups_per_row;
        const uint8_t* h0 = p.high + r0 * p.high_row_bytes;
        const uint8_t* h1 = p.high + r1 * p.high_row_bytes;
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) {
            const int64_t grp = u + i;
            const int64_t kk = grp * kUnit + c * kLaneCodes;
            const bool ok = !GUARD || (grp < u_end && kk < p.k);
            a[i][0] = ok ? load_stream8(w0 + grp * 32 + c * 8) : make_uint2(0, 0);
            a[i][1] = ok ? load_stream8(w1 + grp * 32 + c * 8) : make_uint2(0, 0);
            if constexpr (F == WeightFormat::Q5G64Fp16) {
                h[i][0] = ok ? uint32_t(__ldg(reinterpret_cast<const unsigned short*>(h0 + grp * 8 + c * 2))) : 0u;
                h[i][1] = ok ? uint32_t(__ldg(reinterpret_cast<const unsigned short*>(h1 + grp * 8 + c * 2))) : 0u;
            } else if constexpr (F == WeightFormat::Q6G64Fp16) {
                h[i][0] = ok ? __ldg(reinterpret_cast<const unsigned int*>(h0 + grp * 16 + c * 4)) : 0u;
                h[i][1] = ok ? __ldg(reinterpret_cast<const unsigned int*>(h1 + grp * 16 + c * 4)) : 0u;
            } else {
                h[i][0] = h[i][1] = 0u;
            }
            b[i][0] = ok && has_token ? load_cached16(xg + kk) : make_uint4(0, 0, 0, 0);
            b[i][1] = !kQ8 && ok && has_token ? load_cached16(xg + kk + 8) : make_uint4(0, 0, 0, 0);
            s[i][0] = !GUARD || grp < u_end ? sc0[grp] : __half(0.f);
            s[i][1] = !GUARD || grp < u_end ? sc1[grp] : __half(0.f);
        }
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) {
            // wa[m], wb[m]: codes (2m, 2m+1) of rows r0, r1; xs[m]: x at the same two columns.
            uint32_t wa[kLaneCodes / 2], wb[kLaneCodes / 2];
#pragma unroll
            for (int m = 0; m < kLaneCodes / 2; ++m) {
                if constexpr (kQ8) {
                    wa[m] = s8_pair_to_bf16(m < 2 ? a[i][0].x : a[i][0].y, m & 1);
                    wb[m] = s8_pair_to_bf16(m < 2 ? a[i][1].x : a[i][1].y, m & 1);
                } else {
                    wa[m] = q56_pair_to_bf16<kBits>(m < 4 ? a[i][0].x : a[i][0].y, h[i][0], m);
                    wb[m] = q56_pair_to_bf16<kBits>(m < 4 ? a[i][1].x : a[i][1].y, h[i][1], m);
                }
            }
            const uint32_t xs[8] = {b[i][0].x, b[i][0].y, b[i][0].z, b[i][0].w,
                                    b[i][1].x, b[i][1].y, b[i][1].z, b[i][1].w};
            float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int j = 0; j < kLaneCodes / 4; ++j)
                mma_bf16_16816(part, wa[2 * j], wb[2 * j], wa[2 * j + 1], wb[2 * j + 1], xs[2 * j], xs[2 * j + 1]);
            const float s0 = __half2float(s[i][0]), s1 = __half2float(s[i][1]);
            acc[0] = fmaf(part[0], s0, acc[0]);
            acc[1] = fmaf(part[1], s0, acc[1]);
            acc[2] = fmaf(part[2], s1, acc[2]);
            acc[3] = fmaf(part[3], s1, acc[3]);
        }
    }
}

constexpr int kGemvMaxClusterSplits = 16; // the largest (non-portable) cluster

// Pass q of a thread holds rows (tile_row+g, tile_row+g+8) x tokens (tok[q], tok[q]+1) when
// active[q]: store them, or (split-K) write fp32 partials[(split * 8 + t) * n + row] and let the
// last block of this 64-row tile reduce them in split order. With p.cluster_reduce the tile's
// splits are one cluster (rank = split = blockIdx.y): the partials stay in each block's shared
// memory, and after a cluster barrier block r sums items r, r + S, ... of the tile's (token, row)
// items from every rank, in split order (the same bits as the counter path), with no global
// fence, atomic or L2 round trip on the way. kCluster false compiles that path out (the ring
// kernels but the batch-2..8 int8 ones: compiled in, it slowed them even with clusters off;
// kernels/PERF_NOTES.md session 7).
template <int P, int kPartBatch = 1, bool kCluster = true>
__device__ __forceinline__ void gemv_store(const GemvParams& p, int64_t tile_row, int g, const float (&acc)[P][4],
                                           const int (&tok)[P], const bool (&active)[P]) {
    auto store = [&](int64_t row, int t, float v) {
        if (p.y_tail && row >= p.tail_row0) {
            p.y_tail[int64_t(t) * p.ld_tail + row - p.tail_row0] = v;
        } else if (p.y_fp32) {
            float* y = static_cast<float*>(p.y) + int64_t(t) * p.ldy + row;
            if (p.residual) v += __bfloat162float(p.residual[int64_t(t) * p.ldr + row]);
            *y = v;
        } else {
            __nv_bfloat16* y = static_cast<__nv_bfloat16*>(p.y) + int64_t(t) * p.ldy + row;
            if (p.residual) v = __bfloat162float(__float2bfloat16(v)) + __bfloat162float(p.residual[int64_t(t) * p.ldr + row]);
            *y = __float2bfloat16(v);
        }
    };

    if (kCluster && p.cluster_reduce) {
        __shared__ float part[kGemvMaxTokens][kGemvRowsPerBlock];
        const int64_t row0 = int64_t(blockIdx.x) * kGemvRowsPerBlock;
#pragma unroll
        for (int q = 0; q < P; ++q)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int64_t row = tile_row + g + (e >= 2 ? 8 : 0);
                const int t = tok[q] + (e & 1);
                if (active[q] && row < p.n && t < p.n_tokens) part[t][row - row0] = acc[q][e];
            }
        cg::cluster_group cluster = cg::this_cluster();
        cluster.sync(); // every rank's partials written (release / acquire at cluster scope)
        const int S = p.splits;
        for (int idx = int(blockIdx.y) * blockDim.x + threadIdx.x; idx < kGemvRowsPerBlock * p.n_tokens;
             idx += S * blockDim.x) {
            const int t = idx / kGemvRowsPerBlock, local = idx % kGemvRowsPerBlock;
            if (row0 + local >= p.n) continue;
            float v[kGemvMaxClusterSplits];
#pragma unroll
            for (int r = 0; r < kGemvMaxClusterSplits; ++r)
                if (r < S) v[r] = cluster.map_shared_rank(&part[0][0], r)[t * kGemvRowsPerBlock + local];
            float sum = 0.f;
#pragma unroll
            for (int r = 0; r < kGemvMaxClusterSplits; ++r)
                if (r < S) sum += v[r];
            store(row0 + local, t, sum);
        }
        cluster.sync(); // no block leaves while another still reads its shared memory
        return;
    }
#pragma unroll
    for (int q = 0; q < P; ++q) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int64_t row = tile_row + g + (e >= 2 ? 8 : 0);
            const int t = tok[q] + (e & 1);
            if (!active[q] || row >= p.n || t >= p.n_tokens) continue;
            if (p.splits == 1) store(row, t, acc[q][e]);
            else __stcg(p.partials + (int64_t(blockIdx.y) * kGemvMaxTokens + t) * p.n + row, acc[q][e]);
        }
    }
    if (p.splits == 1) return;
    __threadfence();
    __syncthreads();
    __shared__ bool is_last;
    if (threadIdx.x == 0) is_last = atomicAdd(p.counters + blockIdx.x, 1u) == uint32_t(p.splits - 1);
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const int64_t row0 = int64_t(blockIdx.x) * kGemvRowsPerBlock;
    for (int idx = threadIdx.x; idx < kGemvRowsPerBlock * p.n_tokens; idx += blockDim.x) {
        const int t = idx / kGemvRowsPerBlock;
        const int64_t row = row0 + idx % kGemvRowsPerBlock;
        if (row >= p.n) continue;
        // kPartBatch partials loaded before the first add, added in split order (the same bits for
        // any kPartBatch). The pipe kernels take 8: a load + add loop waited one L2 round trip per
        // split on their critical path. The register kernels keep 1: with 8 the 35B-A3B's
        // latency-bound step got slower (kernels/PERF_NOTES.md session 6).
        float v = 0.f;
        if constexpr (kPartBatch == 1) {
            for (int sp = 0; sp < p.splits; ++sp) v += __ldcg(p.partials + (int64_t(sp) * kGemvMaxTokens + t) * p.n + row);
        } else {
            for (int s0 = 0; s0 < p.splits; s0 += kPartBatch) {
                float part[kPartBatch];
#pragma unroll
                for (int j = 0; j < kPartBatch; ++j)
                    part[j] = s0 + j < p.splits ? __ldcg(p.partials + (int64_t(s0 + j) * kGemvMaxTokens + t) * p.n + row) : 0.f;
#pragma unroll
                for (int j = 0; j < kPartBatch; ++j)
                    if (s0 + j < p.splits) v += part[j];
            }
        }
        store(row, t, v);
    }
    if (threadIdx.x == 0) p.counters[blockIdx.x] = 0;
}

// A thread's share of gemv_kernel (and gemv_nvfp4_kernel): warp w of block x owns the 16 rows from
// tile_row; lane (g = lane / 4, c = lane % 4) loads rows r0 = tile_row + g and r1 = r0 + 8 (clamped
// to the last row so that loads stay in bounds; gemv_store drops them) and token g's x (xg; token 0
// when g has no token, its b operand then being zero).
struct GemvLane {
    int c, g;
    int64_t tile_row, r0, r1;
    bool has_token;
    const __nv_bfloat16* xg;
};

// Also the PDL hand-off: dependents may start at once, and nothing the earlier kernels write is
// read before the wait.
__device__ __forceinline__ GemvLane gemv_lane_begin(const GemvParams& p) {
    GemvLane l;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    l.c = lane & 3;
    l.g = lane >> 2;
    l.tile_row = int64_t(blockIdx.x) * kGemvRowsPerBlock + warp * 16;
    l.r0 = min(l.tile_row + l.g, p.n - 1);
    l.r1 = min(l.tile_row + l.g + 8, p.n - 1);
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: x, residual and the split-K scratch come from earlier kernels
    l.has_token = l.g < p.n_tokens;
    l.xg = p.x + int64_t(l.has_token ? l.g : 0) * p.ldx;
    return l;
}

// Stores the lane's mma accumulator: rows (r0, r1) x tokens (2c, 2c + 1).
__device__ __forceinline__ void gemv_lane_store(const GemvParams& p, const GemvLane& l, const float (&acc)[4]) {
    const float accs[1][4] = {{acc[0], acc[1], acc[2], acc[3]}};
    gemv_store<1>(p, l.tile_row, l.g, accs, {2 * l.c}, {true});
}

template <WeightFormat F>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(GemvParams p) {
    constexpr int kUnit = GemvTraits<F>::kUnit;
    constexpr int kUnroll = GemvTraits<F>::kUnroll;
    const GemvLane l = gemv_lane_begin(p);

    const int64_t n_units = (p.k + kUnit - 1) / kUnit;
    const int64_t u_begin = int64_t(blockIdx.y) * p.units_per_split;
    const int64_t u_end = min(n_units, u_begin + p.units_per_split);

    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const uint8_t* w0 = p.w + l.r0 * p.row_bytes;
    const uint8_t* w1 = p.w + l.r1 * p.row_bytes;

    for (int64_t u = u_begin; u < u_end; u += kUnroll) {
        if (u + kUnroll <= u_end && (u + kUnroll) * kUnit <= p.k)
            gemv_units<F, false>(p, u, u_end, l.c, l.has_token, l.xg, w0, w1, l.r0, l.r1, acc);
        else
            gemv_units<F, true>(p, u, u_end, l.c, l.has_token, l.xg, w0, w1, l.r0, l.r1, acc);
    }

    if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
        const __nv_bfloat16* rs = reinterpret_cast<const __nv_bfloat16*>(p.scales);
        scale_rows(acc, __bfloat162float(rs[l.r0]), __bfloat162float(rs[l.r1]));
    }
    gemv_lane_store(p, l, acc);
}

} // namespace ninfer::kernels::detail
