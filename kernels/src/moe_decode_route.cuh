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
// One token: the first launch writes the logits kLogitCopies times (the scratch's rows for tokens
// 0..7), and gate/up block b routes from copy b % kLogitCopies, so the launch's 256 blocks do not
// all read the same nine L2 lines at the same moment.
constexpr int kLogitCopies = 8;
static_assert(kLogitCopies <= kMoeDecodeMaxTokens, "the copies take the scratch's token rows");
constexpr int kDownMaxTile = 16; // down_tile = 128 / lanes per row <= 16, or the 16-row mma tile

struct MoeParams {
    MoeRows router, score, gate_up, shared_gate_up, down, shared_down;
    int n_experts, top_k, n_tokens;
    int64_t inter, shared_inter, hidden;
    int route_blocks; // first launch: blocks [0, route_blocks) router/score rows, then shared gate/up
    int shared_row_blocks, shared_tokens; // first launch: shared gate/up row blocks a token group, its tokens
    int down_tile;    // output rows per block of the down launch (16 on tensor cores, else 128 / lanes per routed down row)
    int down_tokens;  // tokens per block of the down launch (blockIdx.y: a group of them)
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
    // Down rows on tensor cores (routed and shared down q4, I and Is multiples of 128): the gate/up
    // launches also write each act row as three bf16 parts (act_groups 64-element groups a pair).
    bool down_mma;
    bool shared_mma; // the shared expert's gate/up (q4) on tensor cores in the first launch
    // One token: each x-parts item has a router-block thread of its own, which loads it before the
    // block's dots and stores it after them (moe_route_shared_kernel).
    bool x_parts_early;
    uint32_t* act_parts; // after x_parts
    int64_t act_groups;
    float* out;
    int64_t out_stride;
};

// The last block, before routing: no expert chosen yet (tok_mask[e] bit t: token t chose e).
__device__ __forceinline__ void clear_choices(const MoeParams& p, uint32_t* tok_mask) {
    for (int e = threadIdx.x; e < p.n_experts; e += blockDim.x) tok_mask[e] = 0;
}

// One warp's routing of token t (moe_route_warp.cuh, core/cpu order): lane j < K returns the choice
// it selected j-th, with its rank among the K choices by id (the order core/cpu adds the experts'
// outputs in: the combine's j order), its renormalised weight and the shared expert's gate.
struct TokenChoice {
    int id, rank;
    float weight, shared_weight;
};
__device__ __forceinline__ TokenChoice choose_experts(const MoeParams& p, int t) {
    const int E = p.n_experts, K = p.top_k;
    const float* l = p.logits + int64_t(t) * (E + 1);
    const float score = __ldcg(l + E); // issued before the routing so its latency hides there
    int id, rank;
    float pr, sum;
    route_token_warp_any(l, E, K, id, pr, sum, rank);
    return {id, rank, pr / sum, 1.f / (1.f + expf(-score))};
}

// The last block: warp t routes token t, then lists its choices in ascending id, lane j writing the
// choice of rank j. Needs a __syncthreads() after clear_choices() and before plan_work().
__device__ void route_tokens(const MoeParams& p, int32_t (*chosen)[kMoeMaxTopK], uint32_t* tok_mask) {
    const int t = threadIdx.x >> 5, lane = threadIdx.x & 31, K = p.top_k;
    if (t >= p.n_tokens) return;
    const TokenChoice c = choose_experts(p, t);
    if (lane < K) {
        chosen[t][c.rank] = c.id;
        p.ids[t * K + c.rank] = c.id;
        p.weights[t * (K + 1) + c.rank] = c.weight;
        atomicOr(tok_mask + c.id, 1u << t);
    }
    if (lane == 0) p.weights[t * (K + 1) + K] = c.shared_weight;
}

// One token (the gate/up launch at batch 1, every block): warp 0 routes it from the logits into
// chosen[rank] (shared memory), so entry j is expert chosen[j] with pair j, as plan_work would list
// them. publish: also the scratch's ids, weights and work list (one block of the launch).
// Needs a __syncthreads() before chosen is read.
__device__ __forceinline__ void route_one_token(const MoeParams& p, int32_t* chosen, bool publish) {
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x, K = p.top_k;
    // Copy (b % kLogitCopies) of the logits (rows 1.. of the scratch are free at one token).
    const TokenChoice c = choose_experts(p, int(blockIdx.x + blockIdx.y * gridDim.x) % kLogitCopies);
    if (lane < K) {
        chosen[c.rank] = c.id;
        if (publish) {
            p.ids[c.rank] = c.id;
            p.weights[c.rank] = c.weight;
            int32_t* en = p.work + 1 + c.rank * kMoeEntryInts;
            en[0] = c.id;
            en[1] = 1;
            en[2] = c.rank;
        }
    }
    if (publish && lane == 0) {
        p.weights[K] = c.shared_weight;
        p.work[0] = K;
    }
}

// The last block, all threads: entries for the experts any token chose, in ascending id (a block
// scan over per-thread runs of experts), each listing its tokens in ascending order.
__device__ void plan_work(const MoeParams& p, const int32_t (*chosen)[kMoeMaxTopK], const uint32_t* tok_mask) {
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

} // namespace ninfer::kernels::detail
