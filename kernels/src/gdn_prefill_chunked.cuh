// ninfer::kernels - the chunked (WY / state-passing) delta rule of gdn_prefill, internal to
// gdn_prefill.cu and gdn_prefill_chunked.cu (model.md §6 "Chunked prefill").
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

cudaError_t gdn_chunked_launch(const GdnPrefillArgs& a, const ChunkPtrs& p, cudaStream_t stream);

} // namespace ninfer::kernels::detail
