// ninfer::kernels - persistent warp-specialised bf16 GEMM kernel for sm_90a: C = A · Bᵀ.
//
// 384 threads: warpgroup 0 is the producer (one thread issues the bulk tensor copies of A and B
// k-blocks into a ring of kStages shared-memory stages; the rest of it idles with few registers),
// warpgroups 1 and 2 are consumers, each owning 64 rows of the 128 x BN output tile and issuing
// wgmma m64nBNk16 from the staged tiles. full_bar[s] completes when stage s's bytes have landed;
// empty_bar[s] when all 8 consumer warps are done reading it. Consumers keep one k-block of
// wgmma in flight (wait_group 1) and release the previous stage. The grid is persistent: CTA b
// takes tiles b, b + grid, ...; producer and consumers walk the same list, so the producer fills
// the next tile's first stages while the consumers store the current one. C leaves through a
// per-warp shared-memory staging area as 16-byte stores (gemm_store_warp): storing straight from
// the fragments (4-byte stores, 8 rows per instruction) cost 8-25% (PERF_NOTES, GEMM v2).
// The epilogue (bias, GELU, accumulate into fp32 C; gemm.h) is the kernel's EPI template argument:
// GemmEpi::Plain compiles to the kernel without it.
#pragma once

#include "activation.cuh"
#include "gemm_sm90.cuh"

#include <cuda_bf16.h>

namespace ninfer::kernels::detail {

constexpr int kGemmTileM = 128, kGemmTileK = 64;
constexpr int kGemmThreads = 384;
constexpr int kGemmRasterM = 8; // m tiles walked together, so concurrent CTAs share B tiles in L2
constexpr int kGemmConsumerWarps = 8;
// Epilogue staging: each consumer warp owns 16 rows x 128 bytes (+16 so that the 8 rows a store
// instruction touches fall in different banks) and moves its C rows out in 128-byte pieces.
constexpr int kGemmStageRowBytes = 128 + 16;
constexpr int kGemmEpilogueBytes = kGemmConsumerWarps * 16 * kGemmStageRowBytes;

template <int BN> struct GemmTile {
    static constexpr int kStages = BN == 256 ? 4 : 6;
    static constexpr int kABytes = kGemmTileM * kGemmTileK * 2;
    static constexpr int kBBytes = BN * kGemmTileK * 2;
    static constexpr int kStageBytes = kABytes + kBBytes;
    static constexpr int kSmemBytes = kStages * kStageBytes + kGemmEpilogueBytes + 1024; // + alignment slack
    static constexpr int kAcc = BN / 2;                             // 64 x BN fp32 over 128 threads
};

struct GemmParams {
    void* c;
    int64_t ldc;
    int c_fp32;
    int m, n, k;
    int tiles_m, tiles_n; // plain: m tiles; grouped: tiles_m unused (per group, from group_offsets)
    int64_t n_tiles;      // plain: tiles_m * tiles_n
    const int32_t* group_offsets;
    int n_groups;
    const float* bias; // the epilogue's [n] column bias, or null (read only by the epilogue kernels)
};

// What happens to each fp32 sum before it leaves (gemm.h's epilogue): Bias adds the column bias
// (0 when there is none), the Gelu forms apply their activation after it, Accumulate adds the
// biased sum to the fp32 C already there.
enum class GemmEpi : int { Plain, Bias, BiasGeluTanh, BiasGeluErf, Accumulate };

// The bias of columns col and col + 1 (col even), zero past n or without a bias.
__device__ __forceinline__ float2 gemm_bias_pair(const GemmParams& p, int col) {
    float2 b = make_float2(0.f, 0.f);
    if (p.bias) {
        if (col + 1 < p.n)
            b = __ldg(reinterpret_cast<const float2*>(p.bias + col));
        else if (col < p.n)
            b.x = __ldg(p.bias + col);
    }
    return b;
}

// The epilogue's activation of a biased sum (vision_bias_act's order: sum + bias, then this).
template <GemmEpi EPI> __device__ __forceinline__ float gemm_act(float v) {
    if constexpr (EPI == GemmEpi::BiasGeluTanh)
        return gelu_tanh(v);
    else if constexpr (EPI == GemmEpi::BiasGeluErf)
        return gelu_erf(v);
    else
        return v;
}

struct GemmTileWork {
    int row_begin, row_end, col, group;
};

// Tile `local` of a [tiles_m x tiles_n] grid whose rows start at row_base: bands of kGemmRasterM
// m-tiles, m fastest inside a band, so the CTAs running at once share B tiles in L2.
__device__ __forceinline__ GemmTileWork gemm_raster(int64_t local, int tiles_m, int tiles_n, int row_base, int row_end,
                                                    int bn) {
    const int64_t band_tiles = int64_t(kGemmRasterM) * tiles_n;
    const int first_m = int(local / band_tiles) * kGemmRasterM;
    const int band_m = min(kGemmRasterM, tiles_m - first_m);
    const int within = int(local % band_tiles);
    GemmTileWork w;
    w.col = (within / band_m) * bn;
    w.row_begin = row_base + (first_m + within % band_m) * kGemmTileM;
    w.row_end = row_end;
    w.group = 0;
    return w;
}

// Grouped problems: the tiles that exist (group g has ceil(rows_g / 128) * tiles_n of them, empty
// groups none) are numbered in group order and a CTA walks its indices upward with this cursor, so
// the work is spread evenly over the CTAs whatever the group sizes, and each CTA reads every
// group's offsets at most once.
struct GemmGroupCursor {
    int group;
    int64_t first_tile; // index of the group's first tile
    int row_begin, row_end, tiles_m;
};

__device__ __forceinline__ void gemm_cursor_load(const GemmParams& p, GemmGroupCursor& c) {
    if (c.group >= p.n_groups) return;
    c.row_begin = p.group_offsets[c.group];
    c.row_end = p.group_offsets[c.group + 1];
    c.tiles_m = (c.row_end - c.row_begin + kGemmTileM - 1) / kGemmTileM;
}

// Finds tile t (t never decreases between calls); false once t is past the last group's tiles.
template <bool GROUPED>
__device__ __forceinline__ bool gemm_next_tile(const GemmParams& p, GemmGroupCursor& c, int64_t t, int bn,
                                               GemmTileWork& w) {
    if constexpr (!GROUPED) {
        if (t >= p.n_tiles) return false;
        w = gemm_raster(t, p.tiles_m, p.tiles_n, 0, p.m, bn);
        return true;
    } else {
        while (c.group < p.n_groups && t >= c.first_tile + int64_t(c.tiles_m) * p.tiles_n) {
            c.first_tile += int64_t(c.tiles_m) * p.tiles_n;
            ++c.group;
            gemm_cursor_load(p, c);
        }
        if (c.group >= p.n_groups) return false;
        w = gemm_raster(t - c.first_tile, c.tiles_m, p.tiles_n, c.row_begin, c.row_end, bn);
        w.group = c.group;
        return true;
    }
}

template <int BN> __device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t da, uint64_t db, int scale_d) {
    if constexpr (BN == 256)
        wgmma_m64n256k16(d, da, db, scale_d);
    else
        wgmma_m64n128k16(d, da, db, scale_d);
}

// What differs between the two C element types in gemm_store_warp: the pair of fragment values
// written to the staging rows, the 16-byte vector moved to C, and the ragged last columns.
template <typename Out> struct GemmStoreOut;
template <> struct GemmStoreOut<float> {
    using Vec = float4;
    __device__ __forceinline__ static void stage_pair(uint8_t* at, float lo, float hi) {
        *reinterpret_cast<float2*>(at) = make_float2(lo, hi);
    }
    // ragged last columns (n % 4 != 0)
    __device__ __forceinline__ static void store_ragged(float* dst, const float4& v, int col, int n) {
        dst[0] = v.x;
        if (col + 1 < n) dst[1] = v.y;
        if (col + 2 < n) dst[2] = v.z;
    }
    // Accumulate: C = C + v, as vision_residual's x + (y + bias).
    __device__ __forceinline__ static float4 add(const float4& c, const float4& v) {
        return make_float4(c.x + v.x, c.y + v.y, c.z + v.z, c.w + v.w);
    }
    __device__ __forceinline__ static void add_ragged(float* dst, const float4& v, int col, int n) {
        dst[0] = dst[0] + v.x;
        if (col + 1 < n) dst[1] = dst[1] + v.y;
        if (col + 2 < n) dst[2] = dst[2] + v.z;
    }
};
template <> struct GemmStoreOut<__nv_bfloat16> {
    using Vec = uint4;
    __device__ __forceinline__ static void stage_pair(uint8_t* at, float lo, float hi) {
        *reinterpret_cast<__nv_bfloat162*>(at) = __floats2bfloat162_rn(lo, hi);
    }
    // ragged last columns (n % 8 != 0): unrolled so v stays in registers
    __device__ __forceinline__ static void store_ragged(__nv_bfloat16* dst, const uint4& v, int col, int n) {
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 7; ++e)
            if (col + e < n) dst[e] = __ushort_as_bfloat16(uint16_t(words[e / 2] >> (16 * (e % 2))));
    }
};

// Accumulate: the C tile this warp will add to (16 rows x BN fp32 columns from col0) is prefetched
// into L2 when the tile starts, so the epilogue's reads of it wait for L2, not for memory.
template <int BN>
__device__ __forceinline__ void gemm_prefetch_c(const GemmParams& p, int row0, int row_end, int col0, int lane) {
    constexpr int kLines = BN * 4 / 128; // 128-byte lines in one row of the tile
#pragma unroll
    for (int i = lane; i < 16 * kLines; i += 32) {
        const int row = row0 + i / kLines, col = col0 + (i % kLines) * 32;
        const float* line = static_cast<const float*>(p.c) + int64_t(row) * p.ldc + col;
        if (row < row_end && col < p.n) asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
    }
}

// Accumulate, one staged fp32 piece (16 rows x 32 columns from column col): the C vectors a lane
// will add to, loaded before the piece is staged so the reads overlap the staging ...
struct GemmPieceC {
    float4 v[4];
};
__device__ __forceinline__ GemmPieceC gemm_load_piece(const GemmParams& p, int row0, int row_end, int col, int lane) {
    GemmPieceC c;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int i = lane + 32 * t, row = row0 + i / 8, cc = col + (i % 8) * 4;
        c.v[t] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row < row_end && cc + 4 <= p.n)
            c.v[t] = *reinterpret_cast<const float4*>(static_cast<const float*>(p.c) + int64_t(row) * p.ldc + cc);
    }
    return c;
}
// ... then C + staged value stored back (ragged last columns element by element).
__device__ __forceinline__ void gemm_add_piece(const GemmParams& p, const GemmPieceC& c, const uint8_t* stage, int row0,
                                               int row_end, int col, int lane) {
    using S = GemmStoreOut<float>;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int i = lane + 32 * t, row = row0 + i / 8, cc = col + (i % 8) * 4;
        if (row >= row_end || cc >= p.n) continue;
        const float4 v = *reinterpret_cast<const float4*>(stage + (i / 8) * kGemmStageRowBytes + (i % 8) * 16);
        float* dst = static_cast<float*>(p.c) + int64_t(row) * p.ldc + cc;
        if (cc + 4 <= p.n)
            *reinterpret_cast<float4*>(dst) = S::add(c.v[t], v);
        else
            S::add_ragged(dst, v, cc, p.n);
    }
}

// Four fp32 values to C at column col as Out (16 or 8 bytes; the ragged last columns one by one).
__device__ __forceinline__ void gemm_store4(float* dst, const float4& v, int col, int n) {
    if (col + 4 <= n)
        *reinterpret_cast<float4*>(dst) = v;
    else
        GemmStoreOut<float>::store_ragged(dst, v, col, n);
}
__device__ __forceinline__ void gemm_store4(__nv_bfloat16* dst, const float4& v, int col, int n) {
    if (col + 4 <= n) {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
        *reinterpret_cast<uint2*>(dst) =
            make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
        return;
    }
    dst[0] = __float2bfloat16(v.x);
    if (col + 1 < n) dst[1] = __float2bfloat16(v.y);
    if (col + 2 < n) dst[2] = __float2bfloat16(v.z);
}

// The GELU epilogues: the biased sums are staged in fp32 (32-column pieces) and the activation runs
// in a rolled loop over the staged 16-byte vectors, so its code appears once per piece rather than
// once per fragment value (fully unrolled, the GELU made the kernel's code 145 KB against the plain
// kernel's 31 KB). C gets 16-byte (fp32) or 8-byte (bf16) stores.
template <int BN, typename Out, GemmEpi EPI>
__device__ __forceinline__ void gemm_store_warp_act(const GemmParams& p, const float (&d)[BN / 2], uint8_t* stage,
                                                    int row0, int row_end, int col0, int lane) {
    const int r = lane / 4, c = lane % 4;
#pragma unroll
    for (int q = 0; q < BN / 32; ++q) {
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
            const int f = 4 * q + jj; // fragment column group: columns 8f .. 8f + 7 of the tile
            const float2 b = gemm_bias_pair(p, col0 + 8 * f + 2 * c);
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2*>(stage + (r + 8 * h) * kGemmStageRowBytes + jj * 32 + c * 8) =
                    make_float2(d[4 * f + 2 * h] + b.x, d[4 * f + 2 * h + 1] + b.y);
        }
        __syncwarp();
#pragma unroll 1
        for (int t = 0; t < 4; ++t) {
            const int i = lane + 32 * t, row = row0 + i / 8, col = col0 + 32 * q + (i % 8) * 4;
            if (row >= row_end || col >= p.n) continue;
            float4 v = *reinterpret_cast<const float4*>(stage + (i / 8) * kGemmStageRowBytes + (i % 8) * 16);
            v = make_float4(gemm_act<EPI>(v.x), gemm_act<EPI>(v.y), gemm_act<EPI>(v.z), gemm_act<EPI>(v.w));
            gemm_store4(static_cast<Out*>(p.c) + int64_t(row) * p.ldc + col, v, col, p.n);
        }
        __syncwarp();
    }
}

// Writes one warp's 16 x BN accumulator rows to C as Out: each 128-byte piece of its rows (64 bf16
// or 32 fp32 columns) goes through the warp's staging rows so that every global store is a 16-byte
// vector and 8 lanes cover one 128-byte line (direct fragment stores write 4-8 bytes per lane).
// Fragment: d[4j + 2h + e] is row (lane/4 + 8h), column (8j + 2(lane%4) + e) of the warp's rows.
// Bias and Accumulate add the bias as the fragments are staged (before any bf16 rounding);
// Accumulate loads a piece's C vectors before staging it, then adds and stores.
template <int BN, typename Out, GemmEpi EPI>
__device__ __forceinline__ void gemm_store_warp_as(const GemmParams& p, const float (&d)[BN / 2], uint8_t* stage,
                                                   int row0, int row_end, int col0, int lane) {
    using S = GemmStoreOut<Out>;
    constexpr int kElemBytes = int(sizeof(Out));
    constexpr int kPieceCols = 128 / kElemBytes;   // columns in one 128-byte piece
    constexpr int kFragCols = kPieceCols / 8;      // 8-column fragment groups j in one piece
    constexpr int kVecCols = 16 / kElemBytes;      // columns in one 16-byte store
    const int r = lane / 4, c = lane % 4;
#pragma unroll
    for (int q = 0; q < BN / kPieceCols; ++q) {
        [[maybe_unused]] GemmPieceC cq;
        if constexpr (EPI == GemmEpi::Accumulate) cq = gemm_load_piece(p, row0, row_end, col0 + kPieceCols * q, lane);
        // Plain keeps the form it had: written otherwise, the plain kernels' code came out different.
        if constexpr (EPI == GemmEpi::Plain) {
#pragma unroll
            for (int jj = 0; jj < kFragCols; ++jj)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    S::stage_pair(
                        stage + (r + 8 * h) * kGemmStageRowBytes + jj * (8 * kElemBytes) + c * (2 * kElemBytes),
                        d[4 * (kFragCols * q + jj) + 2 * h], d[4 * (kFragCols * q + jj) + 2 * h + 1]);
        } else {
#pragma unroll
            for (int jj = 0; jj < kFragCols; ++jj) {
                const int f = kFragCols * q + jj; // fragment column group: columns 8f .. 8f + 7 of the tile
                const float2 b = gemm_bias_pair(p, col0 + 8 * f + 2 * c);
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    S::stage_pair(
                        stage + (r + 8 * h) * kGemmStageRowBytes + jj * (8 * kElemBytes) + c * (2 * kElemBytes),
                        d[4 * f + 2 * h] + b.x, d[4 * f + 2 * h + 1] + b.y);
            }
        }
        __syncwarp();
        if constexpr (EPI == GemmEpi::Accumulate) {
            static_assert(sizeof(Out) == 4, "accumulate needs fp32 C");
            gemm_add_piece(p, cq, stage, row0, row_end, col0 + kPieceCols * q, lane);
        } else {
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const int i = lane + 32 * t, row = row0 + i / 8, col = col0 + kPieceCols * q + (i % 8) * kVecCols;
                if (row >= row_end || col >= p.n) continue;
                const typename S::Vec v =
                    *reinterpret_cast<const typename S::Vec*>(stage + (i / 8) * kGemmStageRowBytes + (i % 8) * 16);
                Out* dst = static_cast<Out*>(p.c) + int64_t(row) * p.ldc + col;
                if (col + kVecCols <= p.n)
                    *reinterpret_cast<typename S::Vec*>(dst) = v;
                else
                    S::store_ragged(dst, v, col, p.n);
            }
        }
        __syncwarp();
    }
}

template <int BN, GemmEpi EPI>
__device__ __forceinline__ void gemm_store_warp(const GemmParams& p, const float (&d)[BN / 2], uint8_t* stage,
                                                int row0, int row_end, int col0, int lane) {
    if constexpr (EPI == GemmEpi::Accumulate) { // fp32 C only (gemm.cu checks)
        gemm_store_warp_as<BN, float, EPI>(p, d, stage, row0, row_end, col0, lane);
    } else if constexpr (EPI == GemmEpi::BiasGeluTanh || EPI == GemmEpi::BiasGeluErf) {
        if (p.c_fp32) {
            gemm_store_warp_act<BN, float, EPI>(p, d, stage, row0, row_end, col0, lane);
            return;
        }
        gemm_store_warp_act<BN, __nv_bfloat16, EPI>(p, d, stage, row0, row_end, col0, lane);
    } else {
        if (p.c_fp32) {
            gemm_store_warp_as<BN, float, EPI>(p, d, stage, row0, row_end, col0, lane);
            return;
        }
        gemm_store_warp_as<BN, __nv_bfloat16, EPI>(p, d, stage, row0, row_end, col0, lane);
    }
}

template <int BN, bool GROUPED, GemmEpi EPI>
__global__ void __launch_bounds__(kGemmThreads, 1)
    gemm_bf16_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const GemmParams p) {
    using T = GemmTile<BN>;
    extern __shared__ uint8_t gemm_smem[];
    __shared__ alignas(8) uint64_t full_bar[T::kStages];
    __shared__ alignas(8) uint64_t empty_bar[T::kStages];
    const uint32_t smem = (smem_u32(gemm_smem) + 1023u) & ~1023u; // the 128-byte swizzle needs 1024
    const int wg = threadIdx.x / 128;
    const int k_blocks = (p.k + kGemmTileK - 1) / kGemmTileK;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < T::kStages; ++s) {
            mbar_init(smem_u32(&full_bar[s]), 1);
            mbar_init(smem_u32(&empty_bar[s]), kGemmConsumerWarps);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
        regs_release<40>();
        if (threadIdx.x != 0) return;
        tma_prefetch_map(&map_a);
        tma_prefetch_map(&map_b);
        int it = 0;
        GemmGroupCursor cur{0, 0, 0, 0, 0};
        if constexpr (GROUPED) gemm_cursor_load(p, cur);
        GemmTileWork w;
        for (int64_t t = blockIdx.x; gemm_next_tile<GROUPED>(p, cur, t, BN, w); t += gridDim.x) {
            for (int kb = 0; kb < k_blocks; ++kb, ++it) {
                const int s = it % T::kStages;
                mbar_wait(smem_u32(&empty_bar[s]), ((it / T::kStages) & 1) ^ 1);
                const uint32_t full = smem_u32(&full_bar[s]);
                mbar_arrive_expect_tx(full, T::kStageBytes);
                const uint32_t sa = smem + s * T::kStageBytes;
                tma_load_2d(sa, &map_a, full, kb * kGemmTileK, w.row_begin);
                if constexpr (GROUPED)
                    tma_load_3d(sa + T::kABytes, &map_b, full, kb * kGemmTileK, w.col, w.group);
                else
                    tma_load_2d(sa + T::kABytes, &map_b, full, kb * kGemmTileK, w.col);
            }
        }
        return;
    }

    regs_claim<232>();
    const int consumer = wg - 1; // rows consumer * 64 .. + 63 of the tile
    const int lane = threadIdx.x & 31, warp = (threadIdx.x / 32) & 3;
    float acc[T::kAcc];
    int it = 0;
    GemmGroupCursor cur{0, 0, 0, 0, 0};
    if constexpr (GROUPED) gemm_cursor_load(p, cur);
    GemmTileWork w;
    for (int64_t t = blockIdx.x; gemm_next_tile<GROUPED>(p, cur, t, BN, w); t += gridDim.x) {
        if constexpr (EPI == GemmEpi::Accumulate)
            gemm_prefetch_c<BN>(p, w.row_begin + consumer * 64 + warp * 16, w.row_end, w.col, lane);
        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
            const int s = it % T::kStages;
            mbar_wait(smem_u32(&full_bar[s]), (it / T::kStages) & 1);
            const uint32_t sa = smem + s * T::kStageBytes;
            const uint64_t da = wgmma_desc(sa + consumer * 64 * 128), db = wgmma_desc(sa + T::kABytes);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < kGemmTileK / 16; ++kk) // 16 columns = 32 bytes = 2 descriptor units
                wgmma_tile<BN>(acc, da + 2 * kk, db + 2 * kk, kb > 0 || kk > 0);
            wgmma_commit();
            wgmma_wait<1>(); // the previous k-block's wgmma are done: release its stage
            if (kb > 0 && lane == 0) mbar_arrive(smem_u32(&empty_bar[(it - 1) % T::kStages]));
        }
        wgmma_wait<0>();
        if (lane == 0) mbar_arrive(smem_u32(&empty_bar[(it - 1) % T::kStages]));
        wgmma_pin(acc);

        gemm_store_warp<BN, EPI>(p, acc, gemm_smem + (smem - smem_u32(gemm_smem)) + T::kStages * T::kStageBytes +
                                        (threadIdx.x / 32 - 4) * 16 * kGemmStageRowBytes,
                            w.row_begin + consumer * 64 + warp * 16, w.row_end, w.col, lane);
    }
}

} // namespace ninfer::kernels::detail
