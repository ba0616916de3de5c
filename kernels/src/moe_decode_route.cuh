// ninfer::kernels - MoE decode: the parameters of the three launches, and the routing that the
// last router block of the first launch does (softmax, top-k, renormalisation, expert work list).
#pragma once

#include "moe_decode_dot.cuh"
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
    float* out;
    int64_t out_stride;
};

// The last block: warp t routes token t (core/cpu order: softmax with a reciprocal multiply,
// top-k on the probabilities with ties to the lower id, weights renormalised by their sum).
__device__ void route_tokens(const MoeParams& p, int32_t (*chosen)[kMoeMaxTopK]) {
    __shared__ float prob[kMoeDecodeMaxTokens][kMoeMaxExperts];
    __shared__ float chosen_p[kMoeDecodeMaxTokens][kMoeMaxTopK];
    const int t = threadIdx.x >> 5, lane = threadIdx.x & 31, E = p.n_experts, K = p.top_k;
    if (t >= p.n_tokens) return;
    const float* l = p.logits + int64_t(t) * (E + 1);
    float* pr = prob[t];
    float m = -INFINITY;
    for (int e = lane; e < E; e += 32) {
        pr[e] = __ldcg(l + e); // written by other blocks of this launch: read from L2
        m = fmaxf(m, pr[e]);
    }
    m = warp_max(m);
    float s = 0.f;
    for (int e = lane; e < E; e += 32) {
        pr[e] = expf(pr[e] - m);
        s += pr[e];
    }
    const float inv = 1.f / warp_sum(s);
    for (int e = lane; e < E; e += 32) pr[e] *= inv;
    __syncwarp();
    for (int j = 0; j < K; ++j) {
        float best = -1.f;
        int best_id = E;
        for (int e = lane; e < E; e += 32)
            if (pr[e] > best || (pr[e] == best && e < best_id)) {
                best = pr[e];
                best_id = e;
            }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const int oi = __shfl_xor_sync(0xffffffffu, best_id, o);
            if (ob > best || (ob == best && oi < best_id)) {
                best = ob;
                best_id = oi;
            }
        }
        if (lane == 0) {
            chosen[t][j] = best_id;
            chosen_p[t][j] = best;
            pr[best_id] = -2.f; // taken
        }
        __syncwarp();
    }
    if (lane == 0) {
        float sum = 0.f; // in rank order, as core/cpu sums it
        for (int j = 0; j < K; ++j) sum += chosen_p[t][j];
        // Ascending expert id: the order core/cpu adds the experts' outputs in (the combine's j order).
        for (int j = 1; j < K; ++j)
            for (int i = j; i > 0 && chosen[t][i - 1] > chosen[t][i]; --i) {
                const int32_t id = chosen[t][i];
                const float pv = chosen_p[t][i];
                chosen[t][i] = chosen[t][i - 1];
                chosen_p[t][i] = chosen_p[t][i - 1];
                chosen[t][i - 1] = id;
                chosen_p[t][i - 1] = pv;
            }
        for (int j = 0; j < K; ++j) {
            p.ids[t * K + j] = chosen[t][j];
            p.weights[t * (K + 1) + j] = chosen_p[t][j] / sum;
        }
        const float score = __ldcg(l + E);
        p.weights[t * (K + 1) + K] = 1.f / (1.f + expf(-score));
    }
}

// The last block, all threads: entries for the experts any token chose, in ascending id (a block
// scan over per-thread runs of experts).
__device__ void plan_work(const MoeParams& p, const int32_t (*chosen)[kMoeMaxTopK]) {
    __shared__ int warp_total[kRouteWarps];
    const int E = p.n_experts, K = p.top_k, nt = p.n_tokens, tid = threadIdx.x;
    const int per = (E + blockDim.x - 1) / blockDim.x, e0 = tid * per, e1 = min(E, e0 + per);
    auto n_tok_of = [&](int e) {
        int n = 0;
        for (int t = 0; t < nt; ++t)
            for (int j = 0; j < K; ++j) n += chosen[t][j] == e;
        return n;
    };
    int mine = 0;
    for (int e = e0; e < e1; ++e) mine += n_tok_of(e) > 0;
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
        if (n_tok_of(e) == 0) continue;
        int32_t* en = p.work + 1 + at * kMoeEntryInts;
        int n = 0;
        for (int t = 0; t < nt; ++t)
            for (int j = 0; j < K; ++j)
                if (chosen[t][j] == e) en[2 + n++] = t * (K + 1) + j;
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
