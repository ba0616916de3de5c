// ninfer::kernels - one warp routes one token: softmax over the router logits, top-k, the chosen
// probabilities' sum. Shared by moe_route (runner_ops.cu) and the MoE decode's routing block.
//
// Contract (core/cpu/forward.cpp ModelRunner::ffn, ops.cpp softmax): m = max logit; p[e] =
// expf(l[e] - m) * (1 / sum), the sum of the lane's exps (e = lane, lane + 32, ...) then a warp
// butterfly; choices are the K largest p, ties to the lower id, in selection order (largest first);
// `sum` = the chosen p added in that order (every lane gets it). Lane j < K returns choice j (id,
// p); lanes j >= K return id = E. E <= 32 * PL, 1 <= K <= min(E, 32); the whole warp calls it.
// Lane j < K also returns `rank`: how many of the K chosen ids are below its own (the order core/cpu
// adds the experts' outputs in).
// Logits are read with ld.global.cg (they may come from other blocks of the same launch).
// Why registers and warp reductions: each of the K rounds costs two redux instructions (max of the
// probability bits, then min of the ids holding it), instead of a pass over shared memory and a
// ten-shuffle (value, id) butterfly. At PL = 8 (E <= 256) each lane first sorts its 8 (key, id)
// pairs, so a round's winner only shifts its list: fewer cycles a routing than a local argmax after
// every win (same choices, sums and bits, ties included; kernels/PERF_NOTES.md "Session 12"). The ranks come from one ballot a round, not K
// shuffles after the loop.
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

// Compare-exchange of a lane's pairs a < b: afterwards a holds the larger key (ties: the lower id).
template <int PL> __device__ __forceinline__ void order_pair(int (&key)[PL], int (&id)[PL], int a, int b) {
    const bool swap = key[b] > key[a] || (key[b] == key[a] && id[b] < id[a]);
    const int ka = key[a], ia = id[a];
    key[a] = swap ? key[b] : ka;
    id[a] = swap ? id[b] : ia;
    key[b] = swap ? ka : key[b];
    id[b] = swap ? ia : id[b];
}

template <int PL>
__device__ __forceinline__ void route_token_warp(const float* logits, int E, int K, int& my_id, float& my_p,
                                                 float& sum, int& my_rank) {
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
    int key[PL], id[PL];
#pragma unroll
    for (int i = 0; i < PL; ++i) {
        key[i] = lane + 32 * i < E ? __float_as_int(v[i] * inv) : -2;
        id[i] = lane + 32 * i;
    }
    if constexpr (PL == 8) { // the 19 comparators of the optimal 8-input sorting network: id[0] heads
        order_pair(key, id, 0, 1), order_pair(key, id, 2, 3), order_pair(key, id, 4, 5), order_pair(key, id, 6, 7);
        order_pair(key, id, 0, 2), order_pair(key, id, 1, 3), order_pair(key, id, 4, 6), order_pair(key, id, 5, 7);
        order_pair(key, id, 1, 2), order_pair(key, id, 5, 6), order_pair(key, id, 0, 4), order_pair(key, id, 3, 7);
        order_pair(key, id, 1, 5), order_pair(key, id, 2, 6);
        order_pair(key, id, 1, 4), order_pair(key, id, 3, 6);
        order_pair(key, id, 2, 4), order_pair(key, id, 3, 5);
        order_pair(key, id, 3, 4);
    }
    // The lane's best pair (PL == 8: its head; else a local argmax, the lowest i winning a tie).
    int best = key[0], at = 0;
    auto local_best = [&] {
        best = key[0];
        at = 0;
#pragma unroll
        for (int i = 1; i < PL; ++i)
            if (key[i] > best) {
                best = key[i];
                at = i;
            }
    };
    if constexpr (PL != 8) local_best();
    my_id = E;
    my_p = 0.f;
    my_rank = 0;
    sum = 0.f;
    for (int j = 0; j < K; ++j) {
        const int top = __reduce_max_sync(0xffffffffu, best);
        const int win = int(__reduce_min_sync(0xffffffffu, best == top ? unsigned(PL == 8 ? id[0] : lane + 32 * at)
                                                                        : unsigned(INT_MAX)));
        const float p = __int_as_float(top);
        sum += p;
        // Lanes < j hold the earlier wins: the new one counts below those ids it is below, and its
        // own rank starts at the number of earlier wins below it.
        const int below = __popc(__ballot_sync(0xffffffffu, lane < j && my_id < win));
        if (lane < j) my_rank += win < my_id;
        if (lane == j) {
            my_id = win;
            my_p = p;
            my_rank = below;
        }
        if constexpr (PL == 8) {
            if (id[0] == win) {
#pragma unroll
                for (int i = 0; i < PL - 1; ++i) {
                    key[i] = key[i + 1];
                    id[i] = id[i + 1];
                }
                key[PL - 1] = -1;
            }
            best = key[0];
        } else if ((win & 31) == lane) {
#pragma unroll
            for (int i = 0; i < PL; ++i)
                if (i == (win >> 5)) key[i] = -1;
            local_best();
        }
    }
}

// route_token_warp for any E <= 1024 (8 registers per lane up to 256 experts, else 32).
__device__ __forceinline__ void route_token_warp_any(const float* logits, int E, int K, int& my_id, float& my_p,
                                                     float& sum, int& my_rank) {
    if (E <= 256) route_token_warp<8>(logits, E, K, my_id, my_p, sum, my_rank);
    else route_token_warp<32>(logits, E, K, my_id, my_p, sum, my_rank);
}

} // namespace ninfer::kernels::detail
