// ninfer::kernels - MoE decode: the parameters of the three launches, and the routing that the
// last router block of the first launch does (softmax, top-k, renormalisation, expert work list).
#pragma once

#include "moe_decode_dot.cuh"
#include "moe_route_warp.cuh"
#include "ninfer/kernels/moe_decode.h"

namespace ninfer::kernels::detail {

// Work list: work[0] = number of entries; entry i at work + 1 + i * kMoeEntryInts holds
// {expert, n_tok, pair[0..n_tok)}, pair = t * (top_k + 1) + j (token t's j-th choice; the shared
// expert's pair is j = top_k). Entries come in ascending expert id, each listing its tokens in
// ascending order. The shared expert has no entry (the first launch computes its gate/up).
constexpr int kMoeEntryInts = 2 + 8;
constexpr int kMoeMaxExperts = 1024, kMoeMaxTopK = 32;
constexpr int kRouteWarps = 8, kRouteRows = 4; // router blocks: 4 rows each, k split over 8 warps
constexpr int kGateUpRowsPerWarp = 2;          // intermediate rows i, i+1: gate and up = 4 row dots
constexpr int kExpertWarps = 8;
constexpr int kGateUpRowsPerBlock = kGateUpRowsPerWarp * kExpertWarps;
constexpr int kDownMaxTile = 16;
constexpr int kPrefetchMaxEntries = 16; // the gate/up launch prefetches down rows up to this many experts
// Down blocks: up to 16 warps (K + 1 of them) at <= 96 registers: 2 blocks of 9 warps per SM (at 104
// registers only one fits: ncu, Block Limit Registers 1, two waves at batch 1).
constexpr int kDownMaxWarps = 16;

struct MoeParams {
    MoeRows router, score, gate_up, shared_gate_up, down, shared_down;
    int n_experts, top_k, n_tokens;
    int64_t inter, shared_inter, hidden;
    int route_blocks; // first launch: blocks [0, route_blocks) router/score rows, then shared gate/up
    int down_tile;    // output rows per block of the down launch (128 / lanes per routed down row)
    const float* x;
    int64_t x_stride;
    float* logits; // [t][E + 1]: router logits, then the score
    int32_t* ids;
    float* weights; // [t][K + 1]
    int32_t* work;
    uint32_t* counter;
    float* act; // [t * (K + 1) + j][act_stride]
    int64_t act_stride;
    uint32_t* x_parts; // after act's rows: x as three bf16 parts for the mma gate/up (moe_decode_mma.cuh)
    bool mma;          // routed gate/up on tensor cores (q4 experts)
    float* out;
    int64_t out_stride;
    // The v4 path (moe_decode_v4.cu) only:
    uint32_t* act_parts; // after x_parts: the SwiGLU rows as three bf16 parts in B-fragment order
    int act_groups;      // 64-code groups per act_parts row (the down rows' q4 groups, max of I and Is)
    int shared_blocks;   // first launch: shared gate/up blocks, (Is / 16) per chunk of shared_tokens tokens
    int shared_tokens;   // tokens per shared gate/up block (x split into its shared memory)
};

// The last block, before routing: no expert chosen yet (tok_mask[e] bit t: token t chose e).
__device__ __forceinline__ void clear_choices(const MoeParams& p, uint32_t* tok_mask) {
    for (int e = threadIdx.x; e < p.n_experts; e += blockDim.x) tok_mask[e] = 0;
}

// The last block: warp t routes token t (moe_route_warp.cuh, core/cpu order), then lists its choices
// in ascending id (the order core/cpu adds the experts' outputs in: the combine's j order), lane j
// writing the choice of rank j. Needs a __syncthreads() after clear_choices() and before plan_work().
// Token t's logits (then its score) at logits + t * stride: global memory written by other blocks
// (Ldcg) or this block's shared memory.
template <bool Ldcg = true>
__device__ void route_tokens(const MoeParams& p, int32_t (*chosen)[kMoeMaxTopK], uint32_t* tok_mask,
                             const float* logits, int64_t stride) {
    const int t = threadIdx.x >> 5, lane = threadIdx.x & 31, E = p.n_experts, K = p.top_k;
    if (t >= p.n_tokens) return;
    const float* l = logits + int64_t(t) * stride;
    const float score = Ldcg ? __ldcg(l + E) : l[E]; // issued before the routing so its latency hides there
    int id;
    float pr, sum;
    route_token_warp_any<Ldcg>(l, E, K, id, pr, sum);
    int rank = 0; // among the K choices, by id
    for (int i = 0; i < K; ++i) rank += __shfl_sync(0xffffffffu, id, i) < id;
    if (lane < K) {
        chosen[t][rank] = id;
        p.ids[t * K + rank] = id;
        p.weights[t * (K + 1) + rank] = pr / sum;
        atomicOr(tok_mask + id, 1u << t);
    }
    if (lane == 0) p.weights[t * (K + 1) + K] = 1.f / (1.f + expf(-score));
}

// The last block, all threads: entries for the experts any token chose, in ascending id (a block
// scan over per-thread runs of experts), each listing its tokens in ascending order.
__device__ inline void plan_work(const MoeParams& p, const int32_t (*chosen)[kMoeMaxTopK], const uint32_t* tok_mask) {
    __shared__ int warp_total[kRouteWarps];
    const int E = p.n_experts, K = p.top_k, tid = threadIdx.x;
    const int per = (E + blockDim.x - 1) / blockDim.x, e0 = tid * per, e1 = min(E, e0 + per);
    int mine = 0;
    for (int e = e0; e < e1; ++e) mine += tok_mask[e] != 0;
    // Exclusive scan of `mine` over the block.
    const int lane = tid & 31, warp = tid >> 5;
    int incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
    }
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    int before = incl - mine, total = 0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) {
        if (w < warp) before += warp_total[w];
        total += warp_total[w];
    }
    int at = before;
    for (int e = e0; e < e1; ++e) {
        uint32_t mask = tok_mask[e];
        if (!mask) continue;
        int32_t* en = p.work + 1 + at * kMoeEntryInts;
        int n = 0;
        for (; mask; mask &= mask - 1) {
            const int t = __ffs(mask) - 1;
            int j = 0; // e's rank among token t's choices
            while (chosen[t][j] != e) ++j;
            en[2 + n++] = t * (K + 1) + j;
        }
        en[0] = e;
        en[1] = n;
        ++at;
    }
    if (tid == 0) {
        p.work[0] = total;
        *p.counter = 0; // ready for the next launch
    }
}

// A router block's 4 rows . x of every token: thread c0 (of kRouteWarps warps) takes chunks c0,
// c0 + 256, ... (route_block: c0 = threadIdx.x; the v4 cluster: the thread it stands in for).
template <int NT>
__device__ __forceinline__ void route_dots(const MoeRows& m, const int64_t (&rows)[kRouteRows], const float* const (&xs)[NT],
                                           int nt, int c0, float (&acc)[NT][kRouteRows]) {
    switch (m.format) {
    case WeightFormat::Bf16: rows_dot<WeightFormat::Bf16, kRouteRows, NT>(m, rows, xs, nt, c0, kRouteWarps * 32, acc); break;
    case WeightFormat::Fp8E4m3RowBf16:
        rows_dot<WeightFormat::Fp8E4m3RowBf16, kRouteRows, NT>(m, rows, xs, nt, c0, kRouteWarps * 32, acc);
        break;
    default: rows_dot<WeightFormat::Q4G64Fp16, kRouteRows, NT>(m, rows, xs, nt, c0, kRouteWarps * 32, acc); break;
    }
}

// Router block b < route_blocks - 1: router rows 4b..4b+3 for every token; b = route_blocks - 1:
// the score row. The last router block to finish routes (the counter counts router blocks only).
template <int NT> __device__ void route_block(const MoeParams& p) {
    __shared__ float part[kRouteWarps][NT][kRouteRows];
    __shared__ int32_t chosen[kMoeDecodeMaxTokens][kMoeMaxTopK];
    __shared__ uint32_t tok_mask[kMoeMaxExperts];
    __shared__ bool is_last;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, E = p.n_experts;
    const bool score_block = blockIdx.x == p.route_blocks - 1;
    const MoeRows& m = score_block ? p.score : p.router;
    const int n_rows = score_block ? 1 : E, row0 = score_block ? 0 : blockIdx.x * kRouteRows;
    int64_t rows[kRouteRows];
#pragma unroll
    for (int j = 0; j < kRouteRows; ++j) rows[j] = min(row0 + j, n_rows - 1);
    const float* xs[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) xs[t] = p.x + int64_t(min(t, p.n_tokens - 1)) * p.x_stride;
    float acc[NT][kRouteRows] = {};
    route_dots<NT>(m, rows, xs, p.n_tokens, threadIdx.x, acc);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        if (t >= p.n_tokens) break;
#pragma unroll
        for (int j = 0; j < kRouteRows; ++j) {
            const float v = warp_sum(acc[t][j]);
            if (lane == 0) part[warp][t][j] = v;
        }
    }
    __syncthreads();
    const int t = threadIdx.x / kRouteRows, j = threadIdx.x % kRouteRows;
    if (t < p.n_tokens && row0 + j < n_rows) {
        float s = 0.f;
        for (int w = 0; w < kRouteWarps; ++w) s += part[w][t][j];
        p.logits[int64_t(t) * (E + 1) + (score_block ? E : row0 + j)] = s * fp8_row_scale(m, rows[j]);
        __threadfence(); // the last block reads these
    }
    clear_choices(p, tok_mask); // every block: free work beside the counter's round trip
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(p.counter, 1u) == unsigned(p.route_blocks - 1);
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    route_tokens(p, chosen, tok_mask, p.logits, E + 1);
    __syncthreads();
    plan_work(p, chosen, tok_mask);
}

} // namespace ninfer::kernels::detail
