// ninfer::kernels - the chunked (WY / state-passing) delta rule of gdn_prefill, internal to
// gdn_prefill.cu and gdn_prefill_chunked.cu (docs/MODEL.md §6 "Chunked prefill").
//
// Contract: gdn_chunked_launch enqueues two kernels that turn the prep's outputs into the fp32
// scan output o [t][Hv*128] and the updated state slot, the same function as the column scan:
// 1. per chunk of kGdnChunk tokens and key head (all chunks at once): KK^T and QK^T on tensor
//    cores from the raw bf16 conv outputs (exact products, f32 sums), the per-token scales applied
//    in f32; per value head of the group the gates, A = strictly-lower(beta_i exp(G_i-G_j) k_i.k_j)
//    and, by f32 forward substitution (no explicit inverse), U = (I+A)^-1 diag(beta) V and
//    W = (I+A)^-1 diag(beta exp G) K; W and P = tril(exp(G_i-G_j) q_i.k_j) as bf16 hi/lo pairs.
// 2. per value head and 64-column slice of the state, chunk after chunk (the only serial part):
//    V' = U - W S, o = exp(G) (Q S) + P V', S = exp(G_C) S + K^T (exp(G_C - G) V'), the state in
//    registers (f32), every product on mma.sync with fp32 inputs split into bf16 hi + lo (three
//    products hi.hi + hi.lo + lo.hi; two where one side is exact bf16).
// Inputs (prep with ChunkPtrs non-null): qk holds the raw bf16 conv outputs [t][2 Hk][128] (q
// heads then k heads), qk_scale the f32 l2 scales [t][2 Hk] (q's includes 128^-0.5), gb the LOG
// decay [Hv][tp] then beta [Hv][tp]. Scratch regions (per chunk n and value head h, nh = n Hv + h):
// w bf16 [nh][2][64][128], u f32 [nh][64][128], p bf16 [nh][2][64][64], sc f32 [nh][3][64]
// (exp(G_i) sq_i, exp(G_C - G_i) sk_i, exp(G_C) at [2][0]). Rows past T are zero.
#pragma once

#include "common.cuh"
#include "ninfer/kernels/gdn_prefill.h"

namespace ninfer::kernels::detail {

constexpr int kChunk = 64;
constexpr int kChunkLdb = kGdnHeadDim + 8; // bf16 row of 128 + 16 bytes: ldmatrix rows in distinct banks
constexpr int kChunkLdp = kChunk + 8;      // bf16 row of 64 + 16 bytes

__device__ __forceinline__ uint32_t pack_bf16(float lo_half, float hi_half) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo_half, hi_half);
    return *reinterpret_cast<const uint32_t*>(&v);
}
// x = hi + lo with hi = bf16(x), lo = bf16(x - hi): 16 significant bits, so a product of two split
// operands (dropping lo.lo) is good to ~2^-16 relative, where one bf16 term alone gives ~2^-8.
__device__ __forceinline__ void split2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
    const float h0 = __bfloat162float(__float2bfloat16(x0)), h1 = __bfloat162float(__float2bfloat16(x1));
    hi = pack_bf16(h0, h1);
    lo = pack_bf16(x0 - h0, x1 - h1);
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_bf16_16816(d, a[0], a[1], a[2], a[3], b0, b1);
}
// Fragment addresses (lane l): A 16x16 from row-major [m][k]; B 16x16 (two n8 tiles) from [n][k]
// (non-trans) or A from [k][m] (trans) share one formula; B from row-major [k][n] (trans).
__device__ __forceinline__ int a_row(int lane) { return lane & 15; }
__device__ __forceinline__ int a_col(int lane) { return (lane >> 4) * 8; }
__device__ __forceinline__ int nk_row(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
__device__ __forceinline__ int nk_col(int lane) { return ((lane >> 3) & 1) * 8; }

// Chunks sit at absolute multiples of kChunk (a.start_pos is the first token's position), so a prompt
// prefilled in several calls is cut into the same chunks as in one call, except the chunk a call
// boundary falls in. Chunk n holds call tokens t0 + row for rows [begin, end).
__host__ __device__ __forceinline__ int chunk_phase(const GdnPrefillArgs& a) { return int(a.start_pos % kChunk); }
__host__ __device__ __forceinline__ int chunk_count(const GdnPrefillArgs& a) {
    return (a.n_tokens + chunk_phase(a) + kChunk - 1) / kChunk;
}
struct ChunkRows {
    int t0, begin, end;
    __device__ ChunkRows(int n, const GdnPrefillArgs& a)
        : t0(n * kChunk - chunk_phase(a)), begin(max(0, -t0)), end(min(kChunk, a.n_tokens - t0)) {}
    __device__ bool valid(int row) const { return row >= begin && row < end; }
};


struct ChunkPtrs {
    const __nv_bfloat16* qk = nullptr;
    const float* qk_scale = nullptr;
    const __nv_bfloat16* v = nullptr;
    const float* gb = nullptr;
    int tp = 0;
    __nv_bfloat16* w = nullptr;
    float* u = nullptr;
    __nv_bfloat16* p = nullptr;
    float* sc = nullptr;
    float* o = nullptr;
};

// Bytes of the four per-chunk regions for T tokens and Hv value heads (each 256-aligned).
size_t chunk_region_bytes(int n_tokens, int n_v_heads, size_t (&offsets)[4]);

// The two kernels (gdn_prefill_wy.cu, gdn_prefill_chunked.cu): min_blocks (1, 2) caps kernel 1's
// registers for that many blocks per SM; warps (8, 16) per block of kernel 2.
cudaError_t launch_chunk_wy(const GdnPrefillArgs& a, const ChunkPtrs& p, int min_blocks, cudaStream_t stream);
cudaError_t launch_chunk_state(const GdnPrefillArgs& a, const ChunkPtrs& p, int warps, cudaStream_t stream);
// Both, by a.chunk_variant (0 = kGdnChunkDefaultVariant).
cudaError_t gdn_chunked_launch(const GdnPrefillArgs& a, const ChunkPtrs& p, cudaStream_t stream);

template <typename Kernel> cudaError_t allow_smem(Kernel kernel, size_t bytes) {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
}

} // namespace ninfer::kernels::detail
