// ninfer::kernels - MoE decode, first launch: router + shared score rows, then (last block only)
// softmax, top-k, renormalisation and the expert work list the next two launches read.
#pragma once

#include "moe_decode_dot.cuh"
#include "ninfer/kernels/moe_decode.h"

namespace ninfer::kernels::detail {

// Work list: work[0] = number of entries; entry i at work + 1 + i * kMoeEntryInts holds
// {expert (-1: the shared expert), n_tok, pair[0..n_tok)}, pair = t * (top_k + 1) + j (token t's
// j-th choice; j = top_k for the shared expert). Routed entries come in ascending expert id, each
// listing its tokens in ascending order, then the shared entry with every token.
constexpr int kMoeEntryInts = 2 + 8;
constexpr int kMoeMaxExperts = 1024, kMoeMaxTopK = 32;
constexpr int kRouteWarps = 8, kRouteRows = 4; // per block: 4 rows, k split over 8 warps

struct RouteParams {
    MoeRows router, score; // [E, H], [1, H]
    int n_experts, top_k, n_tokens;
    const float* x;
    int64_t x_stride;
    float* logits; // [t][E + 1]
    int32_t* ids;
    float* weights;
    int32_t* work;
    uint32_t* counter;
};

// The last block: warp t routes token t (core/cpu order: softmax with a reciprocal multiply,
// top-k on the probabilities with ties to the lower id, weights renormalised by their sum).
__device__ void route_tokens(const RouteParams& p, int32_t (*chosen)[kMoeMaxTopK]) {
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
        float sum = 0.f;
        for (int j = 0; j < K; ++j) sum += chosen_p[t][j];
        for (int j = 0; j < K; ++j) {
            p.ids[t * K + j] = chosen[t][j];
            p.weights[t * (K + 1) + j] = chosen_p[t][j] / sum;
        }
        const float score = __ldcg(l + E);
        p.weights[t * (K + 1) + K] = 1.f / (1.f + expf(-score));
    }
}

// The last block, all threads: entries for the experts any token chose, in ascending id (a block
// scan over per-thread runs of experts), then the shared expert's entry.
__device__ void plan_work(const RouteParams& p, const int32_t (*chosen)[kMoeMaxTopK]) {
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
        int32_t* en = p.work + 1 + total * kMoeEntryInts;
        en[0] = -1;
        en[1] = nt;
        for (int t = 0; t < nt; ++t) en[2 + t] = t * (K + 1) + K;
        p.work[0] = total + 1;
        *p.counter = 0; // ready for the next launch
    }
}

template <WeightFormat F>
__device__ __forceinline__ void route_rows(const MoeRows& m, const int64_t (&rows)[kRouteRows], const float* const (&xs)[8],
                                           int nt, float (&acc)[8][kRouteRows]) {
    const int c0 = threadIdx.x; // warp w, lane l: chunk 32w + l, then every 256th
    rows_dot<F, kRouteRows, kMoeDecodeMaxTokens>(m, rows, xs, nt, c0, kRouteWarps * 32, acc);
}

// grid ceil(E / 4) + 1, 256 threads: block b < last computes router rows 4b..4b+3 for every token,
// the last block the score row; the 8 warps of a block take interleaved chunks of k. The last
// block to finish routes.
__global__ void __launch_bounds__(kRouteWarps * 32) moe_route_kernel(RouteParams p) {
    __shared__ float part[kRouteWarps][kMoeDecodeMaxTokens][kRouteRows];
    __shared__ int32_t chosen[kMoeDecodeMaxTokens][kMoeMaxTopK];
    __shared__ bool is_last;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, E = p.n_experts;
    const bool score_block = blockIdx.x == gridDim.x - 1;
    const MoeRows& m = score_block ? p.score : p.router;
    const int n_rows = score_block ? 1 : E, row0 = score_block ? 0 : blockIdx.x * kRouteRows;
    int64_t rows[kRouteRows];
#pragma unroll
    for (int j = 0; j < kRouteRows; ++j) rows[j] = min(row0 + j, n_rows - 1);
    const float* xs[kMoeDecodeMaxTokens];
#pragma unroll
    for (int t = 0; t < kMoeDecodeMaxTokens; ++t) xs[t] = p.x + int64_t(min(t, p.n_tokens - 1)) * p.x_stride;
    float acc[kMoeDecodeMaxTokens][kRouteRows] = {};
    switch (m.format) {
    case WeightFormat::Bf16: route_rows<WeightFormat::Bf16>(m, rows, xs, p.n_tokens, acc); break;
    case WeightFormat::Fp8E4m3RowBf16: route_rows<WeightFormat::Fp8E4m3RowBf16>(m, rows, xs, p.n_tokens, acc); break;
    default: route_rows<WeightFormat::Q4G64Fp16>(m, rows, xs, p.n_tokens, acc); break;
    }
#pragma unroll
    for (int t = 0; t < kMoeDecodeMaxTokens; ++t) {
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
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(p.counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    route_tokens(p, chosen);
    __syncthreads();
    plan_work(p, chosen);
}

} // namespace ninfer::kernels::detail
