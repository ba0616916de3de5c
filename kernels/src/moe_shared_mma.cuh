// ninfer::kernels - MoE decode: the shared expert's q4 gate/up rows on tensor cores, in the first
// launch (beside the router blocks).
//
// Why: at one token the first launch's critical path was its shared-expert blocks (FMA dots, a row
// pair a warp over the whole k: leaving them out shortened the launch, kernels/PERF_NOTES.md session
// 10), while the router blocks beside them finish in about half that. Here a block takes 16 gate rows and their
// 16 up rows, k split over the 8 warps by whole 64-code groups; each warp's codes are loaded before
// the PDL wait (the weights are constant), so after it a warp waits only for its slice of x.
//
// Arithmetic: gate_up_mma's (moe_decode_mma.cuh): x as three exact bf16 parts (split3), every
// product code x part exact, a group's four mma into d, then acc = fmaf(d, group multiplier, acc),
// (hi + mid) + lo, the warps' sums added in warp order, then silu(gate) * up. The x parts are made
// here from the f32 rows (the router blocks write x_parts in this same launch, so they cannot be
// read yet): lane (r, q) makes part r % 3 of token 2c + r / 3 (r < 6; columns 6, 7 are zero), so one
// mma serves two tokens (columns 0-2 and 3-5). A column's result does not depend on the other
// columns, so every token gets the same bits at any batch size and in either column triple.
#pragma once

#include "moe_decode_mma.cuh"

namespace ninfer::kernels::detail {

constexpr int kSharedMmaRows = 16;   // gate rows (and as many up rows) a block
constexpr int kSharedMmaGroups = 4;  // 64-code groups a warp loads a round (the 35B-A3B: its whole slice)
constexpr int kSharedMmaMaxGroups = 64; // one token's x parts in shared memory (24 KB): H <= 4096

// Part pp (0 hi, 1 mid, 2 lo) of v, as split3 makes it.
__device__ __forceinline__ __nv_bfloat16 part_of(float v, int pp) {
    __nv_bfloat16 part[3];
    split3(v, part);
    return pp == 0 ? part[0] : pp == 1 ? part[1] : part[2];
}

// B words of one 64-code group for this lane (x_parts' order: word 2i = (x[e], x[e + 4]), 2i + 1 =
// (x[e + 1], x[e + 5]), e = 8 (i / 2) + 2 (i % 2) within the lane's 16 elements).
__device__ __forceinline__ void shared_b_words(const float4 (&xv)[4], int pp, uint32_t (&b)[8]) {
    const float x[16] = {xv[0].x, xv[0].y, xv[0].z, xv[0].w, xv[1].x, xv[1].y, xv[1].z, xv[1].w,
                         xv[2].x, xv[2].y, xv[2].z, xv[2].w, xv[3].x, xv[3].y, xv[3].z, xv[3].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = 8 * (i >> 1) + 2 * (i & 1);
        b[2 * i] = pack_bf16(part_of(x[e], pp), part_of(x[e + 4], pp));
        b[2 * i + 1] = pack_bf16(part_of(x[e + 1], pp), part_of(x[e + 5], pp));
    }
}

// One round of up to kSharedMmaGroups groups: this lane's codes and multipliers of its four rows
// (gate r, r + 8, up r, r + 8), as gate_up_mma loads them (load_gate_up_groups).
struct SharedMmaRound {
    uint2 w[kSharedMmaGroups][4];
    float s[kSharedMmaGroups][4];
};

// First launch, shared-expert block sb (all 8 warps): shared gate rows 16 rb .. 16 rb + 15 and their
// up rows (rb = sb % shared_row_blocks) for the tokens of group sb / shared_row_blocks (at most 4:
// shared_tokens), act[t * (K + 1) + K] and its parts written. Does the launch's PDL hand-off itself
// (the first round of codes is loaded before the wait). NT: the launch's token bound.
// x's parts: at one token the block first writes them into shared memory (x_parts' order, each
// element split once); above, each lane splits its own 16 elements a group, two tokens a mma, the x
// of both mma column triples loaded at once (one L2 round trip a round).
template <int NT>
__device__ void shared_gate_up_mma(const MoeParams& p, int sb) {
    constexpr int kChunks = NT == 1 ? 1 : 2, kTokens = NT == 1 ? 1 : 2 * kChunks; // tokens a block, bound
    __shared__ float part[kExpertWarps][2][kSharedMmaRows][kTokens];
    __shared__ __align__(16) uint32_t xs[NT == 1 ? kSharedMmaMaxGroups * kXPartWords : 1];
    const MoeRows& m = p.shared_gate_up;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 2, q = lane & 3;
    const int G = int(m.groups), g0 = warp * G / kExpertWarps, g1 = (warp + 1) * G / kExpertWarps;
    const int rb = sb % p.shared_row_blocks, t0 = sb / p.shared_row_blocks * p.shared_tokens;
    const int64_t i0 = int64_t(rb) * kSharedMmaRows, up = p.shared_inter + i0;
    const int64_t rows[4] = {i0 + r, i0 + r + 8, up + r, up + r + 8};
    SharedMmaRound rd;
    load_gate_up_groups<kSharedMmaGroups>(m, rows, g0, g1, q, rd.w, rd.s);
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // x comes from the norm before this launch
    const int nt = min(p.n_tokens - t0, p.shared_tokens), pp = r % 3; // nt <= kTokens (host)
    if constexpr (NT == 1) {
        for (int it = threadIdx.x; it < G * 16; it += blockDim.x)
            write_x_part_item(p.x, p.hidden, it >> 4, (it >> 2) & 3, it & 3, xs + (it >> 2) * 24 + 2 * (it & 3));
        __syncthreads();
    }
    float acc[kChunks][2][4] = {};
    for (int gb = g0; gb < g1; gb += kSharedMmaGroups) {
        if (gb != g0) load_gate_up_groups<kSharedMmaGroups>(m, rows, gb, g1, q, rd.w, rd.s);
        // Above one token: every x load of the round first, both column triples, then the parts.
        float4 xv[NT == 1 ? 1 : kChunks][NT == 1 ? 1 : kSharedMmaGroups][4];
        if constexpr (NT > 1) {
#pragma unroll
            for (int c = 0; c < kChunks; ++c) {
                const int t = 2 * c + (r >= 3 ? 1 : 0);
                const bool has = r < 6 && t < nt;
#pragma unroll
                for (int u = 0; u < kSharedMmaGroups; ++u) {
                    const int64_t e0 = int64_t(gb + u) * 64 + 16 * q;
                    const bool in = has && gb + u < g1 && e0 < p.hidden; // H % 16 == 0: 16 elements in or out
                    const float4* src =
                        reinterpret_cast<const float4*>(p.x + int64_t(in ? t0 + t : 0) * p.x_stride + (in ? e0 : 0));
#pragma unroll
                    for (int v = 0; v < 4; ++v) xv[c][u][v] = in ? __ldg(src + v) : make_float4(0.f, 0.f, 0.f, 0.f);
                }
            }
        }
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            if (2 * c >= nt) break;
#pragma unroll
            for (int u = 0; u < kSharedMmaGroups; ++u) {
                if (gb + u >= g1) break;
                uint32_t b[8];
                if constexpr (NT == 1) {
                    uint4 b0 = make_uint4(0, 0, 0, 0), b1 = b0;
                    if (r < 3) {
                        const uint4* src = reinterpret_cast<const uint4*>(xs + ((gb + u) * 4 + q) * 24 + r * 8);
                        b0 = src[0];
                        b1 = src[1];
                    }
                    const uint32_t w8[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                    for (int k = 0; k < 8; ++k) b[k] = w8[k];
                } else {
                    shared_b_words(xv[c][u], pp, b);
                }
#pragma unroll
                for (int tile = 0; tile < 2; ++tile) {
                    float d[4] = {};
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        uint32_t a[4]; // rebuilt per chunk: a round's fragments of every group would not fit
                        q4_a_fragment(rd.w[u][2 * tile], rd.w[u][2 * tile + 1], i, a);
                        mma_bf16_16816(d, a[0], a[1], a[2], a[3], b[2 * i], b[2 * i + 1]);
                    }
                    add_scaled(acc[c][tile], d, rd.s[u][2 * tile], rd.s[u][2 * tile + 1]);
                }
            }
        }
    }
    // Token 2c: columns 0, 1 in lane q = 0, column 2 in q = 1 (element 0); token 2c + 1: column 3 in
    // q = 1 (element 1), columns 4, 5 in q = 2. Each (hi + mid) + lo.
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
        for (int tile = 0; tile < 2; ++tile)
#pragma unroll
            for (int h = 0; h < 2; ++h) { // h = 0: row r (elements 0, 1); h = 1: row r + 8 (2, 3)
                const float e0 = acc[c][tile][2 * h], e1 = acc[c][tile][2 * h + 1];
                const float n1e0 = __shfl_down_sync(0xffffffffu, e0, 1), n1e1 = __shfl_down_sync(0xffffffffu, e1, 1);
                const float n2e0 = __shfl_down_sync(0xffffffffu, e0, 2), n2e1 = __shfl_down_sync(0xffffffffu, e1, 2);
                if (q == 0) {
                    if (2 * c < nt) part[warp][tile][r + 8 * h][2 * c] = (e0 + e1) + n1e0;
                    if (kTokens > 1 && 2 * c + 1 < nt)
                        part[warp][tile][r + 8 * h][min(2 * c + 1, kTokens - 1)] = (n1e1 + n2e0) + n2e1;
                }
            }
    __syncthreads();
    store_swiglu_rows(p, part, nt, i0, [&](int t) { return (t0 + t) * (p.top_k + 1) + p.top_k; });
}

} // namespace ninfer::kernels::detail
