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

// The 6 words of x parts item (token t, group g, quarter q, mma i): words 2i, 2i + 1 of parts 0..2.
__device__ __forceinline__ void x_item_words(const MoeParams& p, int t, int g, int q, int i, uint32_t (&out)[3][2]) {
    const int64_t e = int64_t(g) * 64 + 16 * q + 8 * (i >> 1) + 2 * (i & 1);
    const float* xt = p.x + int64_t(t) * p.x_stride;
    __nv_bfloat16 v[4][3]; // elements e, e + 1, e + 4, e + 5
    const int64_t at[4] = {e, e + 1, e + 4, e + 5};
#pragma unroll
    for (int c = 0; c < 4; ++c) split3(at[c] < p.hidden ? xt[at[c]] : 0.f, v[c]);
#pragma unroll
    for (int pp = 0; pp < 3; ++pp) {
        out[pp][0] = pack_bf16(v[0][pp], v[2][pp]);
        out[pp][1] = pack_bf16(v[1][pp], v[3][pp]);
    }
}

// First launch, router blocks after the wait: every (token, group, quarter, mma) item once.
__device__ inline void write_x_parts(const MoeParams& p) {
    const int G = int(p.gate_up.groups);
    const int total = p.n_tokens * G * 16;
    for (int it = blockIdx.x * blockDim.x + threadIdx.x; it < total; it += p.route_blocks * blockDim.x) {
        const int i = it & 3, q = (it >> 2) & 3, g = (it >> 4) % G, t = (it >> 4) / G;
        uint32_t w[3][2];
        x_item_words(p, t, g, q, i, w);
        uint32_t* out = p.x_parts + (int64_t(t) * G + g) * kXPartWords + q * 24 + 2 * i;
#pragma unroll
        for (int pp = 0; pp < 3; ++pp) {
            out[pp * 8] = w[pp][0];
            out[pp * 8 + 1] = w[pp][1];
        }
    }
}

// v4: act row `pair`, element i = v as three bf16 parts at the place x_item_words gives x element i
// (pair's rows of act_groups groups): the down launch reads them as B fragments.
__device__ __forceinline__ void write_act_parts(const MoeParams& p, int pair, int64_t i, float v) {
    __nv_bfloat16 part[3];
    split3(v, part);
    const int g = int(i >> 6), c = int(i & 63), o = c & 7, mi = 2 * ((c >> 3) & 1) + ((o & 3) >> 1);
    uint16_t* at = reinterpret_cast<uint16_t*>(p.act_parts + ((int64_t(pair) * p.act_groups + g) * 4 + (c >> 4)) * 24) +
                   2 * (2 * mi + (o & 1)) + (o >> 2);
#pragma unroll
    for (int pp = 0; pp < 3; ++pp) at[pp * 16] = __bfloat16_as_ushort(part[pp]);
}

// 16 bytes of shared memory (a generic pointer into this block's shared memory).
__device__ __forceinline__ uint4 lds16(const void* p) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(uint32_t(__cvta_generic_to_shared(p))));
    return v;
}

// v[i] for a runtime i < N without a local-memory copy of v.
template <int N> __device__ __forceinline__ int32_t pick(const int32_t (&v)[N], int i) {
    int32_t r = v[0];
#pragma unroll
    for (int c = 1; c < N; ++c)
        if (c == i) r = v[c];
    return r;
}

// Nibbles j and j + 4 of the xor-ed word (t = word ^ 0x88888888 is implied by the lop3 constant)
// to a bf16 pair of signed codes: (128 + (u ^ 8)) - 136.
__device__ __forceinline__ uint32_t q4_pair(uint32_t word, int j) {
    const uint32_t v = ((word >> (4 * j)) & 0x000F000Fu) ^ 0x43084308u;
    return bf16x2_sub(v, 0x43084308u);
}

// A fragments of one 16-row tile and one 64-code group (mma i = 0..3): w_r / w_r8 are the 8 bytes
// lane q holds of rows r and r + 8 (see the layout above).
__device__ __forceinline__ void q4_tile_a(const uint2& w_r, const uint2& w_r8, uint32_t (&a)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t wl = i < 2 ? w_r.x : w_r.y, wh = i < 2 ? w_r8.x : w_r8.y;
        const int j = 2 * (i & 1);
        a[i][0] = q4_pair(wl, j);
        a[i][1] = q4_pair(wh, j);
        a[i][2] = q4_pair(wl, j + 1);
        a[i][3] = q4_pair(wh, j + 1);
    }
}

// d = the tile's group sums (no scale) for the B columns b (8 words: mma i takes b[2i], b[2i + 1]).
__device__ __forceinline__ void q4_tile_mma(const uint32_t (&a)[4][4], const uint32_t (&b)[8], float (&d)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) mma_bf16_16816(d, a[i][0], a[i][1], a[i][2], a[i][3], b[2 * i], b[2 * i + 1]);
}

// q4 gate/up on tensor cores, 8 warps: gate rows gate .. gate + 15 of m (tile 0) and up rows
// gate + inter .. (tile 1) for the tokens of pair[0..nt), k split over the warps by whole groups,
// the warps' sums added in warp order in shared memory. Tokens in chunks of TC (registers). x parts
// of token T at xparts + (T - token_base) * G * kXPartWords, in shared memory when SmemX. Writes
// act[pair][i0 + row] (f32), or its parts (write_act_parts) when ActParts.
// Second launch: a routed expert's rows; v4's first launch: the shared expert's.
template <int NT, bool SmemX = false, bool ActParts = false>
__device__ void gate_up_mma(const MoeParams& p, const MoeRows& m, int64_t gate, int64_t inter, const uint32_t* xparts,
                            int token_base, const int32_t (&pair)[NT], int nt, int64_t i0) {
    constexpr int TC = NT == 1 ? 1 : 2, U = NT == 1 ? 4 : 2; // tokens per pass, groups per load round
    __shared__ float part[kExpertWarps][2][16][NT];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 2, q = lane & 3;
    const int G = int(m.groups), g0 = warp * G / kExpertWarps, g1 = (warp + 1) * G / kExpertWarps;
    const int64_t rows[4] = {gate + r, gate + r + 8, gate + inter + r, gate + inter + r + 8};
    const __half* scales = reinterpret_cast<const __half*>(m.scales);
    for (int t0 = 0; t0 < nt; t0 += TC) {
        const uint32_t* xp[TC];
#pragma unroll
        for (int c = 0; c < TC; ++c)
            xp[c] = xparts + int64_t(pick(pair, min(t0 + c, nt - 1)) / (p.top_k + 1) - token_base) * G * kXPartWords +
                    q * 24 + r * 8;
        float acc[TC][2][4] = {};
        for (int gb = g0; gb < g1; gb += U) {
            uint2 w[U][4];
            float s[U][4];
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const bool in = gb + u < g1;
                    w[u][j] = in ? load_stream8(m.data + rows[j] * m.row_bytes + (gb + u) * 32 + 8 * q) : make_uint2(0, 0);
                    s[u][j] = in ? __half2float(scales[rows[j] * G + gb + u]) : 0.f;
                }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (gb + u >= g1) break;
                uint32_t a[2][4][4]; // [tile][mma][a0..a3]
#pragma unroll
                for (int tile = 0; tile < 2; ++tile) q4_tile_a(w[u][2 * tile], w[u][2 * tile + 1], a[tile]);
#pragma unroll
                for (int c = 0; c < TC; ++c) {
                    if (t0 + c >= nt) break;
                    uint4 b0 = make_uint4(0, 0, 0, 0), b1 = b0;
                    if (r < 3) {
                        const uint4* src = reinterpret_cast<const uint4*>(xp[c] + int64_t(gb + u) * kXPartWords);
                        b0 = SmemX ? lds16(src) : __ldg(src);
                        b1 = SmemX ? lds16(src + 1) : __ldg(src + 1);
                    }
                    const uint32_t b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                    for (int tile = 0; tile < 2; ++tile) {
                        float d[4] = {};
                        q4_tile_mma(a[tile], b, d);
                        const float sr = s[u][2 * tile], sr8 = s[u][2 * tile + 1];
                        acc[c][tile][0] = fmaf(d[0], sr, acc[c][tile][0]);
                        acc[c][tile][1] = fmaf(d[1], sr, acc[c][tile][1]);
                        acc[c][tile][2] = fmaf(d[2], sr8, acc[c][tile][2]);
                        acc[c][tile][3] = fmaf(d[3], sr8, acc[c][tile][3]);
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
    const int row = threadIdx.x & 15, t = threadIdx.x >> 4;
    if (t < nt) {
        float g = 0.f, u = 0.f;
        for (int w = 0; w < kExpertWarps; ++w) {
            g += part[w][0][row][t];
            u += part[w][1][row][t];
        }
        if constexpr (ActParts) write_act_parts(p, pick(pair, t), i0 + row, silu(g) * u);
        else p.act[int64_t(pick(pair, t)) * p.act_stride + i0 + row] = silu(g) * u;
    }
}

} // namespace ninfer::kernels::detail
