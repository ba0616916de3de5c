// ninfer::kernels - decode GEMV over the tiled layout (gemv.h, WeightLayout::Tiled).
//
// Same arithmetic as gemv_kernel.cuh (the same k slots per lane, the same mma sequence), but the
// bytes a warp needs for one k unit of its 16-row tile are one contiguous block, so every load
// instruction of a warp reads 512 contiguous bytes (one 16-byte vector per lane), q4 group
// multipliers come four units per 16-byte load, and the next kUnroll units' weights are loaded
// before the current ones are multiplied (register double buffer), so a warp always has its
// next 4 KB in flight while it computes.
#pragma once

#include "gemv_kernel.cuh"
#include "gemv_tiled_q56.h"

namespace ninfer::kernels::detail {

constexpr int kTiledUnitPad = 8; // units per row are padded to a multiple of this (zero codes)

// The tiled layout's k unit (elements) and step (units loaded at once): the stored kernel's, but
// q8's unit is two of its 32-code groups (64 codes, as fp8's) and a step is 4 units (4 KB).
template <WeightFormat F> struct TiledTraits {
    static constexpr int kUnit = F == WeightFormat::Q8G32Fp16 ? 64 : GemvTraits<F>::kUnit;
    static constexpr int kUnroll = F == WeightFormat::Q8G32Fp16 ? 4 : GemvTraits<F>::kUnroll;
};

// q4/q5/q6: 64-code groups whose fp16 group multipliers use q4's per-(tile, unit quad) layout;
// codes in q4's 512-byte nibble block, q5/q6 in that block plus 128 / 256 bytes, as 5-/6-bit
// fields of the lane's words (gemv_tiled_q56.h).
__host__ __device__ constexpr bool tiled_grouped(WeightFormat f) {
    return f == WeightFormat::Q4G64Fp16 || f == WeightFormat::Q5G64Fp16 || f == WeightFormat::Q6G64Fp16;
}
__host__ __device__ constexpr int tiled_bits(WeightFormat f) {
    return f == WeightFormat::Q5G64Fp16 ? 5 : f == WeightFormat::Q6G64Fp16 ? 6 : 4;
}
// u32 words of high bits per lane and unit (q5 1, q6 2, else 0).
__host__ __device__ constexpr int tiled_high_words(WeightFormat f) { return tiled_grouped(f) ? tiled_bits(f) - 4 : 0; }

// Bytes of one (16-row tile, unit) block of the code plane.
__host__ __device__ constexpr int tiled_block_bytes(WeightFormat f) {
    return tiled_grouped(f) ? 512 + 128 * tiled_high_words(f) : 1024;
}

template <WeightFormat F> struct TiledFrag {
    static constexpr int kVecs = tiled_grouped(F) ? 1 : 2; // 16-byte vectors per lane per unit
    static constexpr int kHigh = tiled_high_words(F) > 0 ? tiled_high_words(F) : 1;
    uint4 w[TiledTraits<F>::kUnroll][kVecs];
    uint32_t h[tiled_high_words(F) > 0 ? TiledTraits<F>::kUnroll : 1][kHigh]; // q5/q6 only
    // Group multipliers: q4/q5/q6 one uint4 per 4 units, q8 one per 2 units (two groups each).
    static constexpr int kScaleVecs = tiled_grouped(F)                ? TiledTraits<F>::kUnroll / 4
                                      : F == WeightFormat::Q8G32Fp16 ? TiledTraits<F>::kUnroll / 2
                                                                      : 1;
    uint4 s[kScaleVecs];
};
// Bytes of a tile's multipliers per unit (16 rows x groups per unit x fp16).
__host__ __device__ constexpr int tiled_scale_unit_bytes(WeightFormat f) { return f == WeightFormat::Q8G32Fp16 ? 64 : 32; }

// q8: lane (r, c)'s codes of a unit are, for mma step m = 0..3, the 4 bytes at k = 16m + 4c of rows r
// (vector 0) and r + 8 (vector 1), one word per step, stored in the byte order k, k + 2, k + 1, k + 3
// (q8_byte_slot); the step's A slots 2c, 2c+1, 2c+8, 2c+9 take k .. k + 3 in order, so x enters in
// memory order (B words: x[16m + 4c ..] in pairs). Bytes 0 and 2 of a word (then 1 and 3 after >> 8)
// become a bf16 pair without a conversion: bf16 (128 + (b & 127)) from one lop3 plus bf16 -128 or
// -256 (b's sign bit lands on the exponent's lowest bit) from another, one bf16 add: exact.
__host__ __device__ constexpr int q8_byte_slot(int b) { return ((b & 1) << 1) | (b >> 1); }
__device__ __forceinline__ uint32_t bf16x2_add(uint32_t a, uint32_t b) {
    __nv_bfloat162 r = __hadd2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
}
// (a & b) | c in one lop3: constants passed as registers (hoisted) so that ptxas does not split a
// two-constant expression into two immediate lop3s.
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ uint32_t q8_pair_to_bf16(uint32_t w) {
    return bf16x2_add(and_or(w, 0x007F007Fu, 0x43004300u), and_or(w, 0x00800080u, 0xC300C300u));
}
__device__ __forceinline__ void q8_unit_a(uint32_t (&a)[4][4], const uint4& r0, const uint4& r8) {
    const uint32_t w0[4] = {r0.x, r0.y, r0.z, r0.w};
    const uint32_t w8[4] = {r8.x, r8.y, r8.z, r8.w};
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        a[m][0] = q8_pair_to_bf16(w0[m]);
        a[m][1] = q8_pair_to_bf16(w8[m]);
        a[m][2] = q8_pair_to_bf16(w0[m] >> 8);
        a[m][3] = q8_pair_to_bf16(w8[m] >> 8);
    }
}
// q8 B words of one unit for lane quad c from x at the unit's first element (guarded per step).
template <bool GUARD>
__device__ __forceinline__ void q8_unit_b(uint32_t (&b)[8], const __nv_bfloat16* x_unit, int64_t k_left, int c, bool has) {
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        const bool ok = has && (!GUARD || 16 * m < k_left);
        const uint2 v = ok ? __ldg(reinterpret_cast<const uint2*>(x_unit + 16 * m + 4 * c)) : make_uint2(0, 0);
        b[2 * m] = v.x;
        b[2 * m + 1] = v.y;
    }
}


// q5/q6 lane words 4.. (gemv_tiled_q56.h) of one unit at `block` (global: streamed; shared: plain loads).
template <WeightFormat F, bool SHARED>
__device__ __forceinline__ void tiled_load_high(uint32_t (&h)[TiledFrag<F>::kHigh], const uint8_t* block, int lane) {
    const uint8_t* at = block + 512 + lane * 4 * tiled_high_words(F);
    if constexpr (tiled_high_words(F) == 1) {
        h[0] = SHARED ? *reinterpret_cast<const uint32_t*>(at) : __ldg(reinterpret_cast<const unsigned int*>(at));
    } else if constexpr (tiled_high_words(F) == 2) {
        const uint2 v = SHARED ? *reinterpret_cast<const uint2*>(at) : load_stream8(at);
        h[0] = v.x;
        h[1] = v.y;
    }
}

// q5/q6: one unit's A fragments in q4_unit_a's order (the same code pairs, so x is permuted by
// q4_unit_b) from the lane's BITS words (gemv_tiled_q56.h): regular pairs one lop3 (after a shift
// shared by both halves) and one bf16 subtraction; q5's pair 15 the sum of five signed powers of two,
// q6's pairs 12..15 two shifts and two lop3. Exact, so the same bf16 values as any exact decoder.
template <int BITS>
__device__ __forceinline__ void q56_unit_a(uint32_t (&a)[4][4], const uint32_t (&wa)[2], const uint32_t (&wb)[2],
                                           const uint32_t (&h)[BITS - 4]) {
    constexpr uint32_t kBias = q56_bias_bf16x2(BITS);
    uint32_t w[BITS];
    w[0] = wa[0], w[1] = wa[1], w[2] = wb[0], w[3] = wb[1];
#pragma unroll
    for (int i = 0; i < BITS - 4; ++i) w[4 + i] = h[i];
    uint32_t pw[16]; // pair P = 4 wi + si
#pragma unroll
    for (int P = 0; P < q56_regular_pairs(BITS); ++P)
        pw[P] = bf16x2_sub(and_or(w[q56_word(BITS, P)] >> q56_shift(BITS, P), q56_field_mask(BITS), 0x43004300u), kBias);
    if constexpr (BITS == 5) { // q5_sign_word
        auto sign = [&](int b) { return and_or(w[b], 0x80008000u, 0x3F003F00u + 0x00800080u * uint32_t(b)); };
        const uint32_t s01 = bf16x2_add(sign(0), sign(1)), s23 = bf16x2_add(sign(2), sign(3));
        const uint32_t s4 = bf16x2_add(sign(4), 0xBF00BF00u); // +-2^3 - 0.5
        pw[15] = bf16x2_add(bf16x2_add(s01, s23), s4);
    } else { // q6_irregular_word
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            const uint32_t nib = and_or(w[t] >> 12, 0x000F000Fu, 0x43004300u);
            pw[12 + t] = bf16x2_sub(and_or(w[4 + t / 2] >> (8 + 2 * (t & 1)), 0x00300030u, nib), kBias);
        }
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            a[2 * j + hh][0] = pw[4 * j + 2 * hh];
            a[2 * j + hh][1] = pw[4 * (2 + j) + 2 * hh];
            a[2 * j + hh][2] = pw[4 * j + 2 * hh + 1];
            a[2 * j + hh][3] = pw[4 * (2 + j) + 2 * hh + 1];
        }
}

template <WeightFormat F>
__device__ __forceinline__ void tiled_load(TiledFrag<F>& f, const uint8_t* wtile, const uint8_t* stile, int64_t u,
                                           int lane, int g) {
    constexpr int kUnroll = TiledTraits<F>::kUnroll, kBlock = tiled_block_bytes(F);
#pragma unroll
    for (int i = 0; i < kUnroll; ++i)
#pragma unroll
        for (int h = 0; h < TiledFrag<F>::kVecs; ++h)
            f.w[i][h] = load_stream16(wtile + (u + i) * kBlock + h * 512 + lane * 16);
    if constexpr (tiled_high_words(F) > 0) {
#pragma unroll
        for (int i = 0; i < kUnroll; ++i) tiled_load_high<F, false>(f.h[i], wtile + (u + i) * kBlock, lane);
    }
    if constexpr (tiled_grouped(F)) {
#pragma unroll
        for (int q = 0; q < kUnroll / 4; ++q)
            f.s[q] = load_stream16(stile + ((u / 4 + q) * 8 + g) * 16);
    } else if constexpr (F == WeightFormat::Q8G32Fp16) {
#pragma unroll
        for (int q = 0; q < kUnroll / 2; ++q)
            f.s[q] = load_stream16(stile + ((u / 2 + q) * 8 + g) * 16);
    }
}

// x of pass q at unit u + i for this lane, read from global memory (L1) and, for fp8/q4, permuted
// into the B words of unit_mma_b; zero (GUARD) past k. A column without a token is zero (SKIP) or
// reads token 0's x, where tiled_columns points it (!SKIP: no predicate or zeroing per load; mma
// columns are independent and gemv_store never stores such a column, so the stored sums are the
// same bits). The ring kernels take !SKIP (but fp8's); the register kernel keeps SKIP, whose
// registers ptxas allocates better with it (q4 spills 12 -> 64 B and q8's two passes start to spill
// without).
template <WeightFormat F, bool GUARD, int P, bool SKIP = true> struct GlobalX {
    const GemvParams& p;
    int64_t u;
    int c;
    const bool (&has)[P];
    const __nv_bfloat16* const (&xg)[P];
    __device__ __forceinline__ bool present(int q) const { return !SKIP || has[q]; }
    __device__ __forceinline__ uint4 bf16_words(int i, int q) const { // bf16: 8 columns, memory order
        const int64_t kk = (u + i) * TiledTraits<F>::kUnit + c * 8;
        return present(q) && (!GUARD || kk < p.k) ? load_cached16(xg[q] + kk) : make_uint4(0, 0, 0, 0);
    }
    __device__ __forceinline__ void words(int i, int q, uint32_t (&b)[8]) const {
        if constexpr (F == WeightFormat::Q8G32Fp16) {
            const int64_t k0 = (u + i) * TiledTraits<F>::kUnit;
            q8_unit_b<GUARD>(b, xg[q] + k0, p.k - k0, c, present(q));
            return;
        }
        const int64_t kk = (u + i) * TiledTraits<F>::kUnit + c * 16;
        const bool ok = present(q) && (!GUARD || kk < p.k);
        const uint4 b0 = ok ? load_cached16(xg[q] + kk) : make_uint4(0, 0, 0, 0);
        const uint4 b1 = ok ? load_cached16(xg[q] + kk + 8) : make_uint4(0, 0, 0, 0);
        const uint32_t xs[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
        if constexpr (F == WeightFormat::Fp8E4m3RowBf16) fp8_unit_b(b, xs);
        else q4_unit_b(b, xs);
    }
};

// One step of kUnroll units for P passes over x: each weight fragment is dequantised once and
// multiplied with every pass's x (X: GlobalX, or the pipelined kernel's staged copy) into acc[q].
template <WeightFormat F, int P, class X>
__device__ __forceinline__ void tiled_compute(const TiledFrag<F>& f, const X& x, float (&acc)[P][4]) {
    constexpr int kUnroll = TiledTraits<F>::kUnroll;
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
        if constexpr (F == WeightFormat::Bf16) {
            const uint4 a0 = f.w[i][0], a1 = f.w[i][1];
#pragma unroll
            for (int q = 0; q < P; ++q) {
                const uint4 b = x.bf16_words(i, q);
                mma_bf16_16816(acc[q], a0.x, a1.x, a0.y, a1.y, b.x, b.y);
                mma_bf16_16816(acc[q], a0.z, a1.z, a0.w, a1.w, b.z, b.w);
            }
        } else if constexpr (F == WeightFormat::Q8G32Fp16) {
            // Steps 0, 1 are the unit's first 32-group, 2, 3 its second: a partial sum per group.
            uint32_t a[4][4];
            q8_unit_a(a, f.w[i][0], f.w[i][1]);
            const uint4 sq = f.s[i / 2];
            const uint32_t sw0 = i % 2 ? sq.z : sq.x, sw1 = i % 2 ? sq.w : sq.y; // {row g, row g + 8} per group
            const float2 s0 = __half22float2(*reinterpret_cast<const __half2*>(&sw0));
            const float2 s1 = __half22float2(*reinterpret_cast<const __half2*>(&sw1));
#pragma unroll
            for (int q = 0; q < P; ++q) {
                uint32_t b[8];
                x.words(i, q, b);
                float p0[4] = {0.f, 0.f, 0.f, 0.f}, p1[4] = {0.f, 0.f, 0.f, 0.f};
                mma_bf16_16816(p0, a[0][0], a[0][1], a[0][2], a[0][3], b[0], b[1]);
                mma_bf16_16816(p0, a[1][0], a[1][1], a[1][2], a[1][3], b[2], b[3]);
                mma_bf16_16816(p1, a[2][0], a[2][1], a[2][2], a[2][3], b[4], b[5]);
                mma_bf16_16816(p1, a[3][0], a[3][1], a[3][2], a[3][3], b[6], b[7]);
                acc[q][0] = fmaf(p1[0], s1.x, fmaf(p0[0], s0.x, acc[q][0]));
                acc[q][1] = fmaf(p1[1], s1.x, fmaf(p0[1], s0.x, acc[q][1]));
                acc[q][2] = fmaf(p1[2], s1.y, fmaf(p0[2], s0.y, acc[q][2]));
                acc[q][3] = fmaf(p1[3], s1.y, fmaf(p0[3], s0.y, acc[q][3]));
            }
        } else {
            uint32_t a[4][4];
            if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
                const uint32_t wa[4] = {f.w[i][0].x, f.w[i][0].y, f.w[i][0].z, f.w[i][0].w};
                const uint32_t wb[4] = {f.w[i][1].x, f.w[i][1].y, f.w[i][1].z, f.w[i][1].w};
                fp8_unit_a(a, wa, wb);
            } else {
                const uint32_t wa[2] = {f.w[i][0].x, f.w[i][0].y};
                const uint32_t wb[2] = {f.w[i][0].z, f.w[i][0].w};
                if constexpr (tiled_high_words(F) > 0) q56_unit_a<tiled_bits(F)>(a, wa, wb, f.h[i]);
                else q4_unit_a(a, wa, wb);
            }
            float2 s = make_float2(1.f, 1.f);
            if constexpr (tiled_grouped(F)) {
                const uint4 sq = f.s[i / 4];
                const uint32_t sw = (i % 4) == 0 ? sq.x : (i % 4) == 1 ? sq.y : (i % 4) == 2 ? sq.z : sq.w;
                s = __half22float2(*reinterpret_cast<const __half2*>(&sw));
            }
#pragma unroll
            for (int q = 0; q < P; ++q) {
                uint32_t b[8];
                x.words(i, q, b);
                if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
                    unit_mma_b(acc[q], a, b);
                } else {
                    float part[4] = {0.f, 0.f, 0.f, 0.f};
                    unit_mma_b(part, a, b);
                    acc[q][0] = fmaf(part[0], s.x, acc[q][0]);
                    acc[q][1] = fmaf(part[1], s.x, acc[q][1]);
                    acc[q][2] = fmaf(part[2], s.y, acc[q][2]);
                    acc[q][3] = fmaf(part[3], s.y, acc[q][3]);
                }
            }
        }
    }
}

// Token columns of one thread (both tiled kernels). Column g of the mma's B operand is token g;
// with x_lo it is the high (g < 4) or low (g >= 4) half of token 4q + g % 4 in pass q (P = 2
// passes for 5..8 tokens), and the two halves' sums meet in tiled_finish. A column's mma sequence
// is the same whatever the other columns hold, so the results do not depend on n_tokens.
template <int P> struct TiledColumns {
    bool has[P];                   // pass q reads x for this thread's column
    const __nv_bfloat16* xg[P];    // that column's x row (token 0's without a token: GlobalX)
    int tok[P];                    // first token of the thread's output pair in pass q
    bool active[P];                // the thread stores pass q's sums
};
template <int P> __device__ __forceinline__ TiledColumns<P> tiled_columns(const GemvParams& p, int g, int c) {
    TiledColumns<P> cols;
    const bool lo = p.x_lo != nullptr;
#pragma unroll
    for (int q = 0; q < P; ++q) {
        const int t = lo ? 4 * q + (g & 3) : g;
        cols.has[q] = t < p.n_tokens;
        cols.xg[q] = (lo && g >= 4 ? p.x_lo : p.x) + int64_t(cols.has[q] ? t : 0) * p.ldx;
        cols.tok[q] = lo ? 4 * q + 2 * c : 2 * c;
        cols.active[q] = !lo || c < 2;
    }
    return cols;
}

// Step of kUnroll units at unit u, the guarded variant only where x ends inside the step.
template <WeightFormat F, int P, bool SKIP = true>
__device__ __forceinline__ void tiled_step(const TiledFrag<F>& f, const GemvParams& p, int64_t u, int c,
                                           const TiledColumns<P>& cols, float (&acc)[P][4]) {
    if ((u + TiledTraits<F>::kUnroll) * TiledTraits<F>::kUnit <= p.k)
        tiled_compute<F, P>(f, GlobalX<F, false, P, SKIP>{p, u, c, cols.has, cols.xg}, acc);
    else
        tiled_compute<F, P>(f, GlobalX<F, true, P, SKIP>{p, u, c, cols.has, cols.xg}, acc);
}

// Epilogue of both tiled kernels: fp8 row multipliers, the low halves' sums into the high
// halves' lanes, then gemv_store (split-K partials or y).
template <WeightFormat F, int P, int kPartBatch = 1, bool kCluster = true>
__device__ __forceinline__ void tiled_finish(const GemvParams& p, float (&acc)[P][4], const TiledColumns<P>& cols,
                                             int64_t src_tile, int64_t tile_row, int g) {
#pragma unroll
    for (int q = 0; q < P; ++q) {
        if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
            const __nv_bfloat16* rs = reinterpret_cast<const __nv_bfloat16*>(p.scales) + src_tile * 16;
            scale_rows(acc[q], __bfloat162float(rs[g]), __bfloat162float(rs[g + 8]));
        }
        if (p.x_lo) // lanes c = 0, 1 (high halves) take the low halves' sums from lanes c + 2
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[q][e] += __shfl_down_sync(0xffffffffu, acc[q][e], 2);
    }
    gemv_store<P, kPartBatch, kCluster>(p, tile_row, g, acc, cols.tok, cols.active);
}

// What one warp of either tiled kernel works on: grid (ceil(n / 64), splits), 128 threads, warp w
// of block b owns tile 4b + w (rows >= n are computed from a valid tile and never stored) over
// units [u_begin, u_end) of split blockIdx.y.
template <WeightFormat F> struct TiledWarp {
    int lane, c, g;
    int64_t tile, src_tile;
    const uint8_t* wtile; // the tile's code blocks
    const uint8_t* stile; // q4: the tile's multipliers, 16 rows x 2 bytes per unit
    int64_t u_begin, u_end;
    __device__ __forceinline__ explicit TiledWarp(const GemvParams& p) {
        lane = threadIdx.x & 31;
        c = lane & 3;
        g = lane >> 2;
        tile = int64_t(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
        src_tile = min(tile, (p.n + 15) / 16 - 1);
        wtile = p.w + src_tile * p.tiled_units * tiled_block_bytes(F);
        stile = p.scales + src_tile * p.tiled_units * tiled_scale_unit_bytes(F);
        u_begin = int64_t(blockIdx.y) * p.units_per_split;
        u_end = min(p.tiled_units, u_begin + p.units_per_split);
    }
};

// Register double buffer. PDL: the first two steps' weights are loaded before waiting for x (a
// split of two steps, the 35B-A3B's GDN in_proj, then has nothing left to fetch after the wait);
// three blocks an SM so that both steps stay in registers.
template <WeightFormat F, int P>
__global__ void __launch_bounds__(kGemvWarps * 32, 3) gemv_tiled_kernel(GemvParams p) {
    constexpr int kUnroll = TiledTraits<F>::kUnroll;
    const TiledWarp<F> wp(p);
    const TiledColumns<P> cols = tiled_columns<P>(p, wp.g, wp.c);
    float acc[P][4] = {};
    TiledFrag<F> cur, nxt;
    if (wp.u_begin < wp.u_end) tiled_load<F>(cur, wp.wtile, wp.stile, wp.u_begin, wp.lane, wp.g);
    if constexpr (P == 1) { // two passes (batch 5..8) would spill with both steps in registers
        if (wp.u_begin + kUnroll < wp.u_end) tiled_load<F>(nxt, wp.wtile, wp.stile, wp.u_begin + kUnroll, wp.lane, wp.g);
    }
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // x, residual and the split-K scratch come from earlier kernels
    for (int64_t u = wp.u_begin; u < wp.u_end; u += kUnroll) {
        if constexpr (P == 1) {
            tiled_step<F, P>(cur, p, u, wp.c, cols, acc);
            cur = nxt;
            if (u + 2 * kUnroll < wp.u_end) tiled_load<F>(nxt, wp.wtile, wp.stile, u + 2 * kUnroll, wp.lane, wp.g);
        } else {
            if (u + kUnroll < wp.u_end) tiled_load<F>(nxt, wp.wtile, wp.stile, u + kUnroll, wp.lane, wp.g);
            tiled_step<F, P>(cur, p, u, wp.c, cols, acc);
            cur = nxt;
        }
    }
    tiled_finish<F, P>(p, acc, cols, wp.src_tile, wp.tile * 16, wp.g);
}

} // namespace ninfer::kernels::detail
