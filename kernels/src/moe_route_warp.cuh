// ninfer::kernels - one warp routes one token: softmax over the router logits, top-k, the chosen
// probabilities' sum. Shared by moe_route (runner_ops.cu) and the MoE decode's routing block.
//
// Contract (core/cpu/forward.cpp ModelRunner::ffn, ops.cpp softmax): m = max logit; p[e] =
// expf(l[e] - m) * (1 / sum), the sum of the lane's exps (e = lane, lane + 32, ...) then a warp
// butterfly; choices are the K largest p, ties to the lower id, in selection order (largest first);
// `sum` = the chosen p added in that order (every lane gets it). Lane j < K returns choice j (id,
// p); lanes j >= K return id = E. E <= 32 * PL, 1 <= K <= min(E, 32); the whole warp calls it.
// Logits are read with ld.global.cg (they may come from other blocks of the same launch).
// Why registers and warp reductions: each of the K rounds costs one local argmax over PL registers
// and two redux instructions (max of the probability bits, then min of the ids holding it),
// instead of a pass over shared memory and a ten-shuffle (value, id) butterfly.
#pragma once

#include "common.cuh"

#include <climits>

namespace ninfer::kernels::detail {

// Max over the warp of a float (exact, any order): ordered-int keys through one redux.
__device__ __forceinline__ float warp_max_redux(float v) {
    const int b = __float_as_int(v), key = b ^ ((b >> 31) & 0x7FFFFFFF);
    const int m = __reduce_max_sync(0xffffffffu, key);
    return __int_as_float(m ^ ((m >> 31) & 0x7FFFFFFF));
}

template <int PL>
__device__ __forceinline__ void route_token_warp(const float* logits, int E, int K, int& my_id, float& my_p,
                                                 float& sum) {
    const int lane = threadIdx.x & 31;
    float v[PL];
#pragma unroll
    for (int i = 0; i < PL; ++i) v[i] = lane + 32 * i < E ? __ldcg(logits + lane + 32 * i) : -INFINITY;
    float m = v[0];
#pragma unroll
    for (int i = 1; i < PL; ++i) m = fmaxf(m, v[i]);
    m = warp_max_redux(m);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < PL; ++i)
        if (lane + 32 * i < E) s += (v[i] = expf(v[i] - m));
    const float inv = 1.f / warp_sum(s);
    // Keys: probability bits (p >= 0, so int order is float order); -1 taken, -2 no expert.
    int key[PL];
#pragma unroll
    for (int i = 0; i < PL; ++i) key[i] = lane + 32 * i < E ? __float_as_int(v[i] * inv) : -2;
    auto local_best = [&](int& best, int& at) { // the lowest i wins a tie: the lowest id
        best = key[0];
        at = 0;
#pragma unroll
        for (int i = 1; i < PL; ++i)
            if (key[i] > best) {
                best = key[i];
                at = i;
            }
    };
    int best, at;
    local_best(best, at);
    my_id = E;
    my_p = 0.f;
    sum = 0.f;
    for (int j = 0; j < K; ++j) {
        const int top = __reduce_max_sync(0xffffffffu, best);
        const int id = int(__reduce_min_sync(0xffffffffu, best == top ? unsigned(lane + 32 * at) : unsigned(INT_MAX)));
        const float p = __int_as_float(top);
        sum += p;
        if (lane == j) {
            my_id = id;
            my_p = p;
        }
        if ((id & 31) == lane) {
#pragma unroll
            for (int i = 0; i < PL; ++i)
                if (i == (id >> 5)) key[i] = -1;
            local_best(best, at);
        }
    }
}

// route_token_warp for any E <= 1024 (8 registers per lane up to 256 experts, else 32).
__device__ __forceinline__ void route_token_warp_any(const float* logits, int E, int K, int& my_id, float& my_p,
                                                     float& sum) {
    if (E <= 256) route_token_warp<8>(logits, E, K, my_id, my_p, sum);
    else route_token_warp<32>(logits, E, K, my_id, my_p, sum);
}

} // namespace ninfer::kernels::detail
