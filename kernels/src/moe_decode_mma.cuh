// ninfer::kernels - MoE decode: the routed experts' q4 gate/up rows on tensor cores (mma.sync
// m16n8k16, bf16 in, f32 accumulate), stored layout, for the second launch.
//
// Exactness: x is split into three bf16 parts, x = hi + mid + lo exactly (each part holds the next 8
// significant bits), so every product code x part is exact and the sums are f32 as on the FMA
// path; the mma's B column p is part p of one token (columns 3..7 are zero), so a token's mma
// sequence never depends on the other tokens. Why: the FMA path spends ~4 instructions per weight
// per token and reads a 4-byte x per code from L1; here ~1.7 per weight (nibble pairs to bf16 by
// lop3, hsub2) and one 32-byte x fragment per 16 x 64 weights.
//
// Fragments (PTX m16n8k16): lane (r = lane / 4, q = lane % 4) holds A rows r and r + 8 at k slots
// 2q, 2q+1 (a0, a1) and 2q+8, 2q+9 (a2, a3); B column r at the same k slots (b0, b1). The k slots
// are a permutation of a 64-code group (one q4 scale): lane q loads bytes 8q..8q+7 of the group
// (codes 16q..16q+15, two words); mma i of the group (word w = i / 2, j = 2 (i % 2)) takes nibbles
// j and j + 4 of word w as slots (2q, 2q+1), nibbles j + 1 and j + 5 as slots (2q+8, 2q+9), i.e.
// codes e, e + 4 and e + 1, e + 5 with e = 16q + 8w + j. x_parts holds B in that order.
#pragma once

#include "moe_decode_route.cuh"

namespace ninfer::kernels::detail {

// x parts of token t, group g, quarter q, part p: 8 words at ((((t * G + g) * 4 + q) * 3 + p) * 8,
// word 2i = (x[e], x[e + 4]) and 2i + 1 = (x[e + 1], x[e + 5]) of mma i (bf16 pairs, low half
// first); x past H is 0 (q4 rows are padded to 128 codes).
constexpr int kXPartWords = 4 * 3 * 8; // per (token, group)

__device__ __forceinline__ void split3(float v, __nv_bfloat16 (&part)[3]) {
    part[0] = __float2bfloat16_rn(v);
    const float r1 = v - __bfloat162float(part[0]); // exact
    part[1] = __float2bfloat16_rn(r1);
    part[2] = __float2bfloat16_rn(r1 - __bfloat162float(part[1])); // exact: <= 8 bits remain
}

__device__ __forceinline__ uint32_t pack_bf16(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return uint32_t(__bfloat16_as_ushort(lo)) | uint32_t(__bfloat16_as_ushort(hi)) << 16;
}

// Item (group g, quarter q, mma i) of one token's x parts: elements e, e + 1, e + 4, e + 5 of x from
// e = x_part_first(g, q, i), their three bf16 parts packed into out = the token's parts + ((g * 4 + q)
// * 3) * 8 + 2 i (pack_x_part).
__device__ __forceinline__ int64_t x_part_first(int g, int q, int i) { return int64_t(g) * 64 + 16 * q + 8 * (i >> 1) + 2 * (i & 1); }
__device__ __forceinline__ void pack_x_part(const float (&x)[4], uint32_t* out) {
    __nv_bfloat16 v[4][3];
#pragma unroll
    for (int c = 0; c < 4; ++c) split3(x[c], v[c]);
#pragma unroll
    for (int pp = 0; pp < 3; ++pp) {
        out[pp * 8] = pack_bf16(v[0][pp], v[2][pp]);
        out[pp * 8 + 1] = pack_bf16(v[1][pp], v[3][pp]);
    }
}
// The item's four elements of token row xt (0 past hidden).
__device__ __forceinline__ void load_x_part(const float* xt, int64_t hidden, int g, int q, int i, float (&x)[4]) {
    const int64_t e = x_part_first(g, q, i), at[4] = {e, e + 1, e + 4, e + 5};
#pragma unroll
    for (int c = 0; c < 4; ++c) x[c] = at[c] < hidden ? xt[at[c]] : 0.f;
}
__device__ __forceinline__ void write_x_part_item(const float* xt, int64_t hidden, int g, int q, int i, uint32_t* out) {
    float x[4];
    load_x_part(xt, hidden, g, q, i, x);
    pack_x_part(x, out);
}

// Item `it` of the scratch's x parts (it = ((t G + g) 4 + q) 4 + i, G = the gate/up rows' groups),
// loaded and stored apart so that a caller may put other loads between (moe_route_shared_kernel at
// one token); it < 0 or past the last item: nothing.
struct XPartItem {
    int it;
    float v[4];
};
__device__ __forceinline__ XPartItem load_x_part_item(const MoeParams& p, int it) {
    XPartItem x{it, {0.f, 0.f, 0.f, 0.f}};
    const int G = int(p.gate_up.groups);
    if (it < 0 || it >= p.n_tokens * G * 16) {
        x.it = -1;
        return x;
    }
    load_x_part(p.x + int64_t((it >> 4) / G) * p.x_stride, p.hidden, (it >> 4) % G, (it >> 2) & 3, it & 3, x.v);
    return x;
}
__device__ __forceinline__ void store_x_part_item(const MoeParams& p, const XPartItem& x) {
    if (x.it >= 0) pack_x_part(x.v, p.x_parts + int64_t(x.it >> 4) * kXPartWords + ((x.it >> 2) & 3) * 24 + 2 * (x.it & 3));
}

// First launch, router blocks after the wait: every (token, group, quarter, mma) item once.
__device__ void write_x_parts(const MoeParams& p) {
    const int total = p.n_tokens * int(p.gate_up.groups) * 16;
    for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < total; it += p.route_blocks * blockDim.x)
        store_x_part_item(p, load_x_part_item(p, it));
}

// v[i] for a runtime i < N without a local-memory copy of v.
template <int N> __device__ __forceinline__ int32_t pick(const int32_t (&v)[N], int i) {
    int32_t r = v[0];
#pragma unroll
    for (int c = 1; c < N; ++c)
        if (c == i) r = v[c];
    return r;
}

// Where the SwiGLU value act[pair][i] is made: its three bf16 parts into act_parts in x_parts'
// fragment order, for the down launch's tensor cores. Element o of a group sits in quarter o / 16,
// mma i = 2 ((o % 16) / 8) + ((o % 8) / 2) % 2, word 2i + o % 2, half (o % 8) / 4 (write_x_parts'
// e, e + 1, e + 4, e + 5).
// The word of part 0 that holds act[pair][i] (its half: (i % 8) / 4; parts 1, 2 are 8 and 16 words on).
__device__ __forceinline__ uint32_t* act_part_word(const MoeParams& p, int pair, int64_t i) {
    const int o = int(i % 64), rem = o % 16, r2 = rem % 8;
    const int word = 2 * (2 * (rem / 8) + ((r2 >> 1) & 1)) + (r2 & 1);
    return p.act_parts + (int64_t(pair) * p.act_groups + i / 64) * kXPartWords + (o / 16) * 24 + word;
}
__device__ __forceinline__ void store_act_parts(const MoeParams& p, int pair, int64_t i, float v) {
    if (!p.down_mma) return;
    __nv_bfloat16 part[3];
    split3(v, part);
    __nv_bfloat16* at = reinterpret_cast<__nv_bfloat16*>(act_part_word(p, pair, i)) + (int(i % 64) % 8 >> 2);
#pragma unroll
    for (int pp = 0; pp < 3; ++pp) at[pp * 16] = part[pp];
}

// Nibbles j and j + 4 of the xor-ed word (t = word ^ 0x88888888 is implied by the lop3 constant)
// to a bf16 pair of signed codes: (128 + (u ^ 8)) - 136.
__device__ __forceinline__ uint32_t q4_pair(uint32_t word, int j) {
    const uint32_t v = ((word >> (4 * j)) & 0x000F000Fu) ^ 0x43084308u;
    return bf16x2_sub(v, 0x43084308u);
}

// A fragment of mma i of one 64-code group (the k-slot order above): lo, hi = the 8 code bytes of
// this lane's rows r and r + 8 (bytes 8q .. 8q + 7 of the group).
__device__ __forceinline__ void q4_a_fragment(uint2 lo, uint2 hi, int i, uint32_t (&a)[4]) {
    const uint32_t wl = i < 2 ? lo.x : lo.y, wh = i < 2 ? hi.x : hi.y;
    const int j = 2 * (i & 1);
    a[0] = q4_pair(wl, j);
    a[1] = q4_pair(wh, j);
    a[2] = q4_pair(wl, j + 1);
    a[3] = q4_pair(wh, j + 1);
}

#ifndef NINFER_MOE_L2_FETCH
#define NINFER_MOE_L2_FETCH 1
#endif
// A lane's 8 code bytes of a q4 row slice, streamed (as load_stream8), with an L2 fetch-size hint
// (NINFER_MOE_L2_FETCH at compile time: 0 none, 1 128 bytes, 2 256 bytes). A warp's load covers 8
// rows x 32 bytes; the other 96 bytes of each row's line come with the next 3 groups' loads, which
// with the 128-byte hint find the line on its way instead of each missing on its own sector.
// 128 bytes won at every batch and depth of the 35B-A3B (kernels/PERF_NOTES.md session 13). Compile
// time because the same choice as a kernel parameter, a runtime branch among the loads, cost 11%.
__device__ __forceinline__ uint2 load_codes8(const void* ptr) {
    uint2 v;
    if constexpr (NINFER_MOE_L2_FETCH == 2)
        asm("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(ptr));
    else if constexpr (NINFER_MOE_L2_FETCH == 1)
        asm("ld.global.nc.L1::no_allocate.L2::128B.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(ptr));
    else
        v = load_stream8(ptr);
    return v;
}

// Codes and multipliers of groups [gb, gb + U) (none at or past g1) of the four rows this lane holds
// for a gate/up tile pair (gate r, r + 8, up r, r + 8): bytes 8q .. 8q + 7 of each group's row slice.
template <int U>
__device__ __forceinline__ void load_gate_up_groups(const MoeRows& m, const int64_t (&rows)[4], int gb, int g1, int q,
                                                    uint2 (&w)[U][4], float (&s)[U][4]) {
    const __half* scales = reinterpret_cast<const __half*>(m.scales);
    const int G = int(m.groups);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const bool in = gb + u < g1;
            w[u][j] = in ? load_codes8(m.data + rows[j] * m.row_bytes + (gb + u) * 32 + 8 * q) : make_uint2(0, 0);
            s[u][j] = in ? __half2float(scales[rows[j] * G + gb + u]) : 0.f;
        }
}

// acc += d * the group multipliers of the lane's rows (r: elements 0, 1; r + 8: elements 2, 3).
__device__ __forceinline__ void add_scaled(float (&acc)[4], const float (&d)[4], float s_r, float s_r8) {
    acc[0] = fmaf(d[0], s_r, acc[0]);
    acc[1] = fmaf(d[1], s_r, acc[1]);
    acc[2] = fmaf(d[2], s_r8, acc[2]);
    acc[3] = fmaf(d[3], s_r8, acc[3]);
}

// The end of a 16-row gate/up block (after a __syncthreads): thread (row = tid % 16, t = tid / 16)
// adds the warps' gate and up sums of its row in warp order, act[pair_of(t)][i0 + row] = silu(gate)
// * up, and its parts.
// With the down on tensor cores only the parts are stored (the down reads nothing else), and rows r
// and r + 4 of each 8 share their parts' words (half 0 and 1): the half-0 thread stores the three
// words whole, the partner's halves taken by a shuffle (3 four-byte stores a row pair instead of 6
// two-byte ones; the same bytes). i0 is a multiple of 16. Every thread of the block calls it.
template <int T, class PairOf>
__device__ __forceinline__ void store_swiglu_rows(const MoeParams& p, const float (&part)[kExpertWarps][2][16][T], int nt,
                                                  int64_t i0, PairOf pair_of) {
    const int row = threadIdx.x & 15, t = threadIdx.x >> 4;
    const bool paired = p.down_mma;
    const unsigned live = __ballot_sync(0xffffffffu, t < nt); // a row's partner (lane ^ 4) has its t
    if (t < nt) {
        float g = 0.f, u = 0.f;
        for (int w = 0; w < kExpertWarps; ++w) {
            g += part[w][0][row][t];
            u += part[w][1][row][t];
        }
        const float v = silu(g) * u;
        const int pair = pair_of(t);
        if (!paired) {
            p.act[int64_t(pair) * p.act_stride + i0 + row] = v;
            store_act_parts(p, pair, i0 + row, v);
            return;
        }
        __nv_bfloat16 pt[3];
        split3(v, pt);
        uint32_t other[3];
#pragma unroll
        for (int pp = 0; pp < 3; ++pp) other[pp] = __shfl_xor_sync(live, uint32_t(__bfloat16_as_ushort(pt[pp])), 4);
        if (row % 8 < 4) { // half 0 of the word
            uint32_t* at = act_part_word(p, pair, i0 + row);
#pragma unroll
            for (int pp = 0; pp < 3; ++pp) at[pp * 8] = uint32_t(__bfloat16_as_ushort(pt[pp])) | other[pp] << 16;
        }
    }
}

// Second launch, q4 experts: block (b, entry), 8 warps: gate rows i0 .. i0 + 15 (tile 0) and up
// rows (tile 1) of the entry's expert for its tokens, k split over the warps by whole groups, the
// warps' sums added in warp order in shared memory. Tokens in chunks of TC (registers).
template <int NT>
__device__ void gate_up_mma(const MoeParams& p, int expert, const int32_t (&pair)[NT], int nt, int64_t i0) {
    constexpr int TC = NT == 1 ? 1 : 2, U = NT == 1 ? 4 : 2; // tokens per pass, groups per load round
    __shared__ float part[kExpertWarps][2][16][NT];
    const MoeRows& m = p.gate_up;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 2, q = lane & 3;
    const int G = int(m.groups), g0 = warp * G / kExpertWarps, g1 = (warp + 1) * G / kExpertWarps;
    const int64_t gate = int64_t(expert) * 2 * p.inter + i0, rows[4] = {gate + r, gate + r + 8, gate + p.inter + r,
                                                                        gate + p.inter + r + 8};
    for (int t0 = 0; t0 < nt; t0 += TC) {
        const uint32_t* xp[TC];
#pragma unroll
        for (int c = 0; c < TC; ++c)
            xp[c] = p.x_parts + int64_t(pick(pair, min(t0 + c, nt - 1)) / (p.top_k + 1)) * G * kXPartWords + q * 24 + r * 8;
        float acc[TC][2][4] = {};
        for (int gb = g0; gb < g1; gb += U) {
            uint2 w[U][4];
            float s[U][4];
            load_gate_up_groups<U>(m, rows, gb, g1, q, w, s);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (gb + u >= g1) break;
                uint32_t a[2][4][4]; // [tile][mma][a0..a3]
#pragma unroll
                for (int tile = 0; tile < 2; ++tile)
#pragma unroll
                    for (int i = 0; i < 4; ++i) q4_a_fragment(w[u][2 * tile], w[u][2 * tile + 1], i, a[tile][i]);
#pragma unroll
                for (int c = 0; c < TC; ++c) {
                    if (t0 + c >= nt) break;
                    uint4 b0 = make_uint4(0, 0, 0, 0), b1 = b0;
                    if (r < 3) {
                        const uint4* src = reinterpret_cast<const uint4*>(xp[c] + int64_t(gb + u) * kXPartWords);
                        b0 = __ldg(src);
                        b1 = __ldg(src + 1);
                    }
                    const uint32_t b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                    for (int tile = 0; tile < 2; ++tile) {
                        float d[4] = {};
#pragma unroll
                        for (int i = 0; i < 4; ++i)
                            mma_bf16_16816(d, a[tile][i][0], a[tile][i][1], a[tile][i][2], a[tile][i][3], b[2 * i],
                                           b[2 * i + 1]);
                        add_scaled(acc[c][tile], d, s[u][2 * tile], s[u][2 * tile + 1]);
                    }
                }
            }
        }
        // Columns 0, 1 (hi, mid) sit in lane q = 0, column 2 (lo) in lane q = 1: (hi + mid) + lo.
#pragma unroll
        for (int c = 0; c < TC; ++c)
#pragma unroll
            for (int tile = 0; tile < 2; ++tile) {
                const float lo_r = __shfl_down_sync(0xffffffffu, acc[c][tile][0], 1);
                const float lo_r8 = __shfl_down_sync(0xffffffffu, acc[c][tile][2], 1);
                if (q == 0 && t0 + c < nt) {
                    part[warp][tile][r][t0 + c] = (acc[c][tile][0] + acc[c][tile][1]) + lo_r;
                    part[warp][tile][r + 8][t0 + c] = (acc[c][tile][2] + acc[c][tile][3]) + lo_r8;
                }
            }
    }
    __syncthreads();
    store_swiglu_rows(p, part, nt, i0, [&](int t) { return pick(pair, t); });
    // One token: the expert's down rows towards L2, slice blockIdx.x of gridDim.x, once this block's
    // own codes have landed and been used. The down launch then reads them from L2, and the pull does
    // not compete with this launch's own burst of expert codes after routing (issued at this
    // launch's start it slowed the step; here it is faster: kernels/PERF_NOTES.md sessions 10, 11).
    // Not above one token: there it was slower.
    if (NT == 1 && threadIdx.x == 0) prefetch_rows_l2(p.down, int64_t(expert) * p.hidden, p.hidden, blockIdx.x, gridDim.x);
}

// Down launch, q4 rows [base, base + 16) of m (k = the act width) dotted with pair's act parts on
// tensor cores, the whole k in one warp: gate_up_mma's arithmetic for one tile (a group's four mma
// into d, then acc += d * the row's group multiplier; (hi + mid) + lo). Lane q == 0 of row group r
// returns rows r (v_r) and r + 8 (v_r8).
__device__ __forceinline__ void down_mma_tile(const MoeParams& p, const MoeRows& m, int64_t base, int pair, float& v_r,
                                              float& v_r8) {
    constexpr int U = 4; // groups per load round
    const int lane = threadIdx.x & 31, r = lane >> 2, q = lane & 3, G = int(m.groups);
    const int64_t rows[2] = {base + r, base + r + 8};
    const __half* scales = reinterpret_cast<const __half*>(m.scales);
    const uint32_t* xp = p.act_parts + int64_t(pair) * p.act_groups * kXPartWords + q * 24 + r * 8;
    float acc[4] = {};
    for (int gb = 0; gb < G; gb += U) {
        uint2 w[U][2];
        float s[U][2];
        uint4 b0[U], b1[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const bool in = gb + u < G;
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                w[u][j] = in ? load_codes8(m.data + rows[j] * m.row_bytes + (gb + u) * 32 + 8 * q) : make_uint2(0, 0);
                s[u][j] = in ? __half2float(scales[rows[j] * G + gb + u]) : 0.f;
            }
            b0[u] = b1[u] = make_uint4(0, 0, 0, 0);
            if (r < 3 && in) {
                const uint4* src = reinterpret_cast<const uint4*>(xp + int64_t(gb + u) * kXPartWords);
                b0[u] = __ldg(src);
                b1[u] = __ldg(src + 1);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (gb + u >= G) break;
            const uint32_t b[8] = {b0[u].x, b0[u].y, b0[u].z, b0[u].w, b1[u].x, b1[u].y, b1[u].z, b1[u].w};
            float d[4] = {};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint32_t a[4];
                q4_a_fragment(w[u][0], w[u][1], i, a);
                mma_bf16_16816(d, a[0], a[1], a[2], a[3], b[2 * i], b[2 * i + 1]);
            }
            add_scaled(acc, d, s[u][0], s[u][1]);
        }
    }
    const float lo_r = __shfl_down_sync(0xffffffffu, acc[0], 1), lo_r8 = __shfl_down_sync(0xffffffffu, acc[2], 1);
    v_r = (acc[0] + acc[1]) + lo_r;
    v_r8 = (acc[2] + acc[3]) + lo_r8;
}

} // namespace ninfer::kernels::detail
