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

namespace ninfer::kernels::detail {

constexpr int kTiledUnitPad = 8; // units per row are padded to a multiple of this (zero codes)

// Bytes of one (16-row tile, unit) block of the code plane.
__host__ __device__ constexpr int tiled_block_bytes(WeightFormat f) { return f == WeightFormat::Q4G64Fp16 ? 512 : 1024; }

template <WeightFormat F> struct TiledFrag {
    static constexpr int kVecs = F == WeightFormat::Q4G64Fp16 ? 1 : 2; // 16-byte vectors per lane per unit
    uint4 w[GemvTraits<F>::kUnroll][kVecs];
    uint4 s[F == WeightFormat::Q4G64Fp16 ? GemvTraits<F>::kUnroll / 4 : 1];
};

template <WeightFormat F>
__device__ __forceinline__ void tiled_load(TiledFrag<F>& f, const uint8_t* wtile, const uint8_t* stile, int64_t u,
                                           int lane, int g) {
    constexpr int kUnroll = GemvTraits<F>::kUnroll, kBlock = tiled_block_bytes(F);
#pragma unroll
    for (int i = 0; i < kUnroll; ++i)
#pragma unroll
        for (int h = 0; h < TiledFrag<F>::kVecs; ++h)
            f.w[i][h] = load_stream16(wtile + (u + i) * kBlock + h * 512 + lane * 16);
    if constexpr (F == WeightFormat::Q4G64Fp16) {
#pragma unroll
        for (int q = 0; q < kUnroll / 4; ++q)
            f.s[q] = load_stream16(stile + ((u / 4 + q) * 8 + g) * 16);
    }
}

template <WeightFormat F, bool GUARD>
__device__ __forceinline__ void tiled_compute(const TiledFrag<F>& f, const GemvParams& p, int64_t u, int c,
                                              bool has_token, const __nv_bfloat16* xg, float (&acc)[4]) {
    constexpr int kUnit = GemvTraits<F>::kUnit;
    constexpr int kUnroll = GemvTraits<F>::kUnroll;
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
        if constexpr (F == WeightFormat::Bf16) {
            const int64_t kk = (u + i) * kUnit + c * 8;
            const uint4 b = has_token && (!GUARD || kk < p.k) ? load_cached16(xg + kk) : make_uint4(0, 0, 0, 0);
            const uint4 a0 = f.w[i][0], a1 = f.w[i][1];
            mma_bf16_16816(acc, a0.x, a1.x, a0.y, a1.y, b.x, b.y);
            mma_bf16_16816(acc, a0.z, a1.z, a0.w, a1.w, b.z, b.w);
        } else if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
            const int64_t kk = (u + i) * kUnit + c * 16;
            const bool ok = has_token && (!GUARD || kk < p.k);
            const uint4 b0 = ok ? load_cached16(xg + kk) : make_uint4(0, 0, 0, 0);
            const uint4 b1 = ok ? load_cached16(xg + kk + 8) : make_uint4(0, 0, 0, 0);
            const uint32_t wa[4] = {f.w[i][0].x, f.w[i][0].y, f.w[i][0].z, f.w[i][0].w};
            const uint32_t wb[4] = {f.w[i][1].x, f.w[i][1].y, f.w[i][1].z, f.w[i][1].w};
            const uint32_t xs[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            mma_fp8_unit(acc, wa, wb, xs);
        } else {
            const int64_t kk = (u + i) * kUnit + c * 16;
            const bool ok = has_token && (!GUARD || kk < p.k);
            const uint4 b0 = ok ? load_cached16(xg + kk) : make_uint4(0, 0, 0, 0);
            const uint4 b1 = ok ? load_cached16(xg + kk + 8) : make_uint4(0, 0, 0, 0);
            const uint32_t wa[2] = {f.w[i][0].x ^ 0x88888888u, f.w[i][0].y ^ 0x88888888u};
            const uint32_t wb[2] = {f.w[i][0].z ^ 0x88888888u, f.w[i][0].w ^ 0x88888888u};
            const uint32_t xs[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            float part[4] = {0.f, 0.f, 0.f, 0.f};
            mma_q4_unit(part, wa, wb, xs);
            const uint4 sq = f.s[i / 4];
            const uint32_t sw = (i % 4) == 0 ? sq.x : (i % 4) == 1 ? sq.y : (i % 4) == 2 ? sq.z : sq.w;
            const float2 s = __half22float2(*reinterpret_cast<const __half2*>(&sw));
            acc[0] = fmaf(part[0], s.x, acc[0]);
            acc[1] = fmaf(part[1], s.x, acc[1]);
            acc[2] = fmaf(part[2], s.y, acc[2]);
            acc[3] = fmaf(part[3], s.y, acc[3]);
        }
    }
}

// grid (ceil(n / 64), splits), 128 threads: warp w of block b owns tile 4b + w.
template <WeightFormat F>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_tiled_kernel(GemvParams p) {
    constexpr int kUnit = GemvTraits<F>::kUnit;
    constexpr int kUnroll = GemvTraits<F>::kUnroll;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = lane & 3, g = lane >> 2;
    const int64_t tiles = (p.n + 15) / 16;
    const int64_t tile = int64_t(blockIdx.x) * kGemvWarps + warp;
    const int64_t tile_row = tile * 16; // rows >= n are computed from a valid tile and never stored
    const int64_t src_tile = min(tile, tiles - 1);
    const bool has_token = g < p.n_tokens;
    const __nv_bfloat16* xg = p.x + int64_t(has_token ? g : 0) * p.ldx;
    const uint8_t* wtile = p.w + src_tile * p.tiled_units * tiled_block_bytes(F);
    const uint8_t* stile = p.scales + src_tile * p.tiled_units * 32; // q4: 16 rows x 2 bytes per unit

    const int64_t u_begin = int64_t(blockIdx.y) * p.units_per_split;
    const int64_t u_end = min(p.tiled_units, u_begin + p.units_per_split);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    if (u_begin < u_end) {
        TiledFrag<F> cur, nxt;
        tiled_load<F>(cur, wtile, stile, u_begin, lane, g);
        for (int64_t u = u_begin; u < u_end; u += kUnroll) {
            if (u + kUnroll < u_end) tiled_load<F>(nxt, wtile, stile, u + kUnroll, lane, g);
            if ((u + kUnroll) * kUnit <= p.k)
                tiled_compute<F, false>(cur, p, u, c, has_token, xg, acc);
            else
                tiled_compute<F, true>(cur, p, u, c, has_token, xg, acc);
            cur = nxt;
        }
    }

    if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
        const __nv_bfloat16* rs = reinterpret_cast<const __nv_bfloat16*>(p.scales) + src_tile * 16;
        scale_rows(acc, __bfloat162float(rs[g]), __bfloat162float(rs[g + 8]));
    }
    gemv_store(p, tile_row, c, g, acc);
}

} // namespace ninfer::kernels::detail
