// ninfer::kernels - pieces of the tensor-core decode attention shared by the split kernels
// (attention_decode_mma.cu) and the staged ones (attention_decode_v4.cu): chunking of a lane's
// context, page addressing, a warp's 16-token slice in registers, scores and P V on mma.sync, the
// Q staging, the online softmax step and the warp's partial in shared memory. Contract:
// attention_decode.h; every function here is the same arithmetic for both paths, so their bits agree.
#pragma once

#include "common.cuh"
#include "kv_quant.cuh"
#include "ninfer/kernels/attention_decode.h"

#include <algorithm>
#include <type_traits>

namespace ninfer::kernels::detail {

constexpr int kDim = 256;          // head_dim
constexpr int kGroupMax = 8;       // query heads per KV head: the n = 8 columns of one mma
constexpr int kSlice = 16;         // tokens per warp step (two 8-token score tiles, one P V k-step)
constexpr int kWarps = 4;
constexpr int kPartLen = kDim + 2; // partial of one head and chunk: o[256], m, l
// Chunks per (token, KV head): about two blocks per SM of an H200 (132) at batch 1, so that any depth
// streams the pool with the whole GPU; capped so the combine reads at most 132 partials per head.
constexpr int kMaxChunks = 132;
constexpr int kBlocksPerToken = 264;

inline int n_chunks_for(int n_kv_heads, int max_context) {
    const int pages = (max_context + kKvPageTokens - 1) / kKvPageTokens;
    return std::max(1, std::min({pages, kMaxChunks, kBlocksPerToken / n_kv_heads}));
}

// The chunks a lane of length len uses: chunk c holds pages [c * per, (c + 1) * per). Depends on the
// lane's own length only, so a lane's reduction order does not change with the batch.
struct ChunkSplit {
    int per, used;
};
__device__ __forceinline__ ChunkSplit chunk_split(int len, int n_chunks) {
    const int pages = (len + kKvPageTokens - 1) / kKvPageTokens;
    const int per = (pages + n_chunks - 1) / n_chunks;
    return {per, (pages + per - 1) / per};
}

// Token t's context [0, len) and this block's chunk of it, [c0, c1) (empty when c0 >= len).
struct ChunkSpan {
    int len, c0, c1;
};
__device__ __forceinline__ ChunkSpan chunk_span(const AttnDecodeArgs& a, int n_chunks, int chunk, int t) {
    const int len = a.positions[t] + 1;
    const ChunkSplit split = chunk_split(len, n_chunks);
    const int c0 = chunk * split.per * kKvPageTokens;
    return {len, c0, min(len, c0 + split.per * kKvPageTokens)};
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) { return __byte_perm(a, b, sel); }
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}
// Bytes i and j of w as signed int8, widened exactly to a bf16 pair (lo = byte i).
__device__ __forceinline__ uint32_t s8_pair_to_bf16(uint32_t w, int i, uint32_t w2, int j) {
    return pack_bf16(float(int8_t(w >> (8 * i))), float(int8_t(w2 >> (8 * j))));
}

// Where one 64-token page of one KV head lives: bf16 rows, or code rows plus 16-bit scales.
template <KvDtype D> struct PageRef {
    const __nv_bfloat16* rows = nullptr;
    const uint8_t* codes = nullptr;
    const uint16_t* scales = nullptr;
};
template <KvDtype D>
__device__ __forceinline__ PageRef<D> page_ref(const void* pool, const KvPages& kv, int n_kv, int kvh, int64_t page) {
    PageRef<D> r;
    if constexpr (D == KvDtype::Bf16) {
        r.rows = static_cast<const __nv_bfloat16*>(pool) + (page * n_kv + kvh) * kKvPageTokens * kDim;
    } else {
        const uint8_t* base = static_cast<const uint8_t*>(pool) + page * int64_t(kv_page_bytes(D, n_kv, kDim));
        r.codes = base + int64_t(kvh) * kKvPageTokens * kDim;
        r.scales = reinterpret_cast<const uint16_t*>(base + int64_t(n_kv) * kKvPageTokens * kDim) +
                   kvh * kKvPageTokens * kv_scales_per_row(D, kDim);
    }
    return r;
}
// Scale of row r's 64-value group g (fp8: the row's only scale); 0 for rows past the context, whose
// bytes were never written.
template <KvDtype D> __device__ __forceinline__ float row_scale(const PageRef<D>& p, int r, int g, bool valid) {
    if (!valid) return 0.f;
    constexpr int kScales = kv_scales_per_row(D, kDim);
    return D == KvDtype::Fp8 ? bf16_bits_to_float(__ldg(p.scales + r * kScales))
                             : f16_bits_to_float(__ldg(p.scales + r * kScales + g));
}

// One warp's 16-token slice: its page's K and V and how many of its rows are in the chunk (1..16).
template <KvDtype D> struct Slice {
    PageRef<D> k, v;
    int r0, n; // first row in the page, rows inside the context
};
template <KvDtype D>
__device__ __forceinline__ Slice<D> slice_at(const AttnDecodeArgs& a, int lane_id, int kvh, int tb, int c1) {
    const int64_t page = a.kv.page_table[int64_t(lane_id) * a.kv.max_pages + tb / kKvPageTokens];
    const void* kpool = D == KvDtype::Bf16 ? static_cast<const void*>(a.kv.k) : a.kv.k_q;
    const void* vpool = D == KvDtype::Bf16 ? static_cast<const void*>(a.kv.v) : a.kv.v_q;
    return {page_ref<D>(kpool, a.kv, a.geo.n_kv_heads, kvh, page), page_ref<D>(vpool, a.kv, a.geo.n_kv_heads, kvh, page),
            tb % kKvPageTokens, min(kSlice, c1 - tb)};
}
template <KvDtype D> using KvWord = std::conditional_t<D == KvDtype::Bf16, uint4, uint2>; // 8 values
constexpr int groups_of(KvDtype d) { return d == KvDtype::Int8 ? 4 : 1; }

// Values [col, col + 8) of a page's row (bf16: 16 bytes, codes: 8); zero for rows past the context.
template <KvDtype D> __device__ __forceinline__ KvWord<D> load_word(const PageRef<D>& p, int row, int col, bool ok) {
    if constexpr (D == KvDtype::Bf16)
        return ok ? load_stream16(p.rows + int64_t(row) * kDim + col) : make_uint4(0, 0, 0, 0);
    else
        return ok ? load_stream8(p.codes + int64_t(row) * kDim + col) : make_uint2(0, 0);
}

// A slice's K in registers: rows 8 j + gid at dims 8 tig + 32 s, and (codes) the scales of the rows
// of this thread's score columns 8 j + 2 tig + e. Rows past the context read as zero (never written).
template <KvDtype D> struct KRegs {
    KvWord<D> w[2][8];
    float scale[2][2][groups_of(D)];
};
template <KvDtype D> __device__ __forceinline__ void load_k(KRegs<D>& k, const Slice<D>& s, int gid, int tig) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const int rr = 8 * j + gid;
        const bool ok = rr < s.n;
#pragma unroll
        for (int q = 0; q < 8; ++q) k.w[j][q] = load_word<D>(s.k, s.r0 + rr, 8 * tig + 32 * q, ok);
        if constexpr (D != KvDtype::Bf16)
#pragma unroll
            for (int e = 0; e < 2; ++e)
#pragma unroll
                for (int g = 0; g < groups_of(D); ++g) {
                    const int rc = 8 * j + 2 * tig + e;
                    k.scale[j][e][g] = row_scale<D>(s.k, s.r0 + rc, g, rc < s.n);
                }
    }
}
// A slice's V in registers: rows (tokens) 2 tig + (i & 1) + 8 (i >> 1) at dims 64 c + 8 gid, and
// (codes) their scales for the 64-dim group c.
template <KvDtype D> struct VRegs {
    KvWord<D> w[4][4]; // [row i][c]
    float scale[4][groups_of(D)];
};
template <KvDtype D> __device__ __forceinline__ void load_v(VRegs<D>& v, const Slice<D>& s, int gid, int tig) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int rr = 2 * tig + (i & 1) + 8 * (i >> 1);
        const bool ok = rr < s.n;
#pragma unroll
        for (int c = 0; c < 4; ++c) v.w[i][c] = load_word<D>(s.v, s.r0 + rr, 64 * c + 8 * gid, ok);
        if constexpr (D != KvDtype::Bf16)
#pragma unroll
            for (int g = 0; g < groups_of(D); ++g) v.scale[i][g] = row_scale<D>(s.v, s.r0 + rr, g, ok);
    }
}

// Scores of head gid for this thread's tokens 8 j + 2 tig + e: sc[j][e]. q_row: head gid's Q words
// in shared memory, in the order the K words widen to (see the kernel comment).
template <KvDtype D> __device__ __forceinline__ void slice_scores(float (&sc)[2][2], const KRegs<D>& k, const uint32_t* q_row, int tig) {
    float acc[2][4] = {};
#pragma unroll
    for (int g = 0; g < groups_of(D); ++g) {
        float part[2][4] = {};
#pragma unroll
        for (int q = 8 / groups_of(D) * g; q < 8 / groups_of(D) * (g + 1); ++q) {
            const uint4 qv = *reinterpret_cast<const uint4*>(q_row + 4 * tig + 16 * q);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                uint32_t b0, b1, b2, b3;
                if constexpr (D == KvDtype::Bf16) {
                    b0 = k.w[j][q].x, b1 = k.w[j][q].y, b2 = k.w[j][q].z, b3 = k.w[j][q].w;
                } else if constexpr (D == KvDtype::Fp8) { // dims (0, 2), (1, 3), (4, 6), (5, 7)
                    b0 = fp8_pair_to_bf16(k.w[j][q].x), b1 = fp8_pair_to_bf16(k.w[j][q].x >> 8);
                    b2 = fp8_pair_to_bf16(k.w[j][q].y), b3 = fp8_pair_to_bf16(k.w[j][q].y >> 8);
                } else {
                    const uint2 w = k.w[j][q];
                    b0 = s8_pair_to_bf16(w.x, 0, w.x, 1), b1 = s8_pair_to_bf16(w.x, 2, w.x, 3);
                    b2 = s8_pair_to_bf16(w.y, 0, w.y, 1), b3 = s8_pair_to_bf16(w.y, 2, w.y, 3);
                }
                mma_bf16_16816(part[j], qv.x, 0u, qv.y, 0u, b0, b1);
                mma_bf16_16816(part[j], qv.z, 0u, qv.w, 0u, b2, b3);
            }
        }
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                acc[j][e] = D == KvDtype::Int8 ? fmaf(k.scale[j][e][g], part[j][e], acc[j][e]) : acc[j][e] + part[j][e];
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) sc[j][e] = D == KvDtype::Fp8 ? acc[j][e] * k.scale[j][e][0] : acc[j][e];
}

// acc[c][e2] += V^T P^T for this thread's dims 64 c + 8 gid + 2 e2 (+1) and heads 2 tig (+1); p[i]
// is the probability of V row i (tokens as in VRegs), times the row's scale for codes.
template <KvDtype D> __device__ __forceinline__ void slice_pv(float (&acc)[4][4][4], const VRegs<D>& v, const float (&p)[4]) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        float pv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) pv[i] = D == KvDtype::Bf16 ? p[i] : p[i] * v.scale[i][D == KvDtype::Int8 ? c : 0];
        const uint32_t bh0 = pack_bf16(pv[0], pv[1]), bh1 = pack_bf16(pv[2], pv[3]);
        const uint32_t bl0 = pack_bf16(pv[0] - __uint_as_float(bh0 << 16), pv[1] - __uint_as_float(bh0 & 0xffff0000u));
        const uint32_t bl1 = pack_bf16(pv[2] - __uint_as_float(bh1 << 16), pv[3] - __uint_as_float(bh1 & 0xffff0000u));
#pragma unroll
        for (int e2 = 0; e2 < 4; ++e2) {
            uint32_t a0, a1, a2, a3;
            if constexpr (D == KvDtype::Bf16) { // rows a, b then c, d: dim 2 e2 in the low halves, 2 e2 + 1 high
                const uint32_t wa = (&v.w[0][c].x)[e2], wb = (&v.w[1][c].x)[e2];
                const uint32_t wc = (&v.w[2][c].x)[e2], wd = (&v.w[3][c].x)[e2];
                a0 = prmt(wa, wb, 0x5410), a1 = prmt(wa, wb, 0x7632), a2 = prmt(wc, wd, 0x5410), a3 = prmt(wc, wd, 0x7632);
            } else { // dims 2 e2, 2 e2 + 1: bytes (e2 & 1) * 2 + {0, 1} of word e2 / 2
                const int hw = e2 >> 1, b0 = (e2 & 1) * 2;
                const uint32_t wa = hw ? v.w[0][c].y : v.w[0][c].x, wb = hw ? v.w[1][c].y : v.w[1][c].x;
                const uint32_t wc = hw ? v.w[2][c].y : v.w[2][c].x, wd = hw ? v.w[3][c].y : v.w[3][c].x;
                if constexpr (D == KvDtype::Fp8) {
                    const uint32_t sel = b0 ? 0x7632 : 0x5410;
                    const uint32_t xab = prmt(wa, wb, sel), xcd = prmt(wc, wd, sel);
                    a0 = fp8_pair_to_bf16(xab), a1 = fp8_pair_to_bf16(xab >> 8);
                    a2 = fp8_pair_to_bf16(xcd), a3 = fp8_pair_to_bf16(xcd >> 8);
                } else {
                    a0 = s8_pair_to_bf16(wa, b0, wb, b0), a1 = s8_pair_to_bf16(wa, b0 + 1, wb, b0 + 1);
                    a2 = s8_pair_to_bf16(wc, b0, wd, b0), a3 = s8_pair_to_bf16(wc, b0 + 1, wd, b0 + 1);
                }
            }
            mma_bf16_16816(acc[c][e2], a0, a1, a2, a3, bh0, bh1);
            mma_bf16_16816(acc[c][e2], a0, a1, a2, a3, bl0, bl1);
        }
    }
}

// Q of the group's heads (zero rows past the group) times head_dim^-0.5 = 2^-4 (exact), as bf16
// pairs; for fp8 each 8-dim piece is reordered (0, 2), (1, 3), (4, 6), (5, 7) like K. Rows gid,
// gid + 1 (one 16-byte load phase) sit on disjoint banks.
constexpr int kQWords = kDim / 2 + 16;
template <KvDtype D>
__device__ __forceinline__ void stage_q(uint32_t (*q_sh)[kQWords], const AttnDecodeArgs& a, int t, int kvh, int group, int tid) {
    for (int i = tid; i < kGroupMax * kDim / 8; i += kWarps * 32) {
        const int h = i / (kDim / 8), d8 = i % (kDim / 8);
        uint4 w = h < group ? load_cached16(a.q + int64_t(t) * a.q_stride + int64_t(kvh * group + h) * kDim + 8 * d8)
                            : make_uint4(0, 0, 0, 0);
        w = make_uint4(bf16x2_mul(w.x, 0x3D803D80u), bf16x2_mul(w.y, 0x3D803D80u), bf16x2_mul(w.z, 0x3D803D80u),
                       bf16x2_mul(w.w, 0x3D803D80u));
        if constexpr (D == KvDtype::Fp8)
            w = make_uint4(prmt(w.x, w.y, 0x5410), prmt(w.x, w.y, 0x7632), prmt(w.z, w.w, 0x5410), prmt(w.z, w.w, 0x7632));
        *reinterpret_cast<uint4*>(&q_sh[h][4 * d8]) = w;
    }
}

// Online softmax of head gid over a slice of n tokens (the four tig threads of a row agree): p gets
// this thread's probabilities (tokens as in VRegs), m_run / l_run move on and acc is rescaled.
__device__ __forceinline__ void online_softmax(float (&p)[4], float& m_run, float& l_run, float (&acc)[4][4][4],
                                               const float (&sc)[2][2], int n, int tig) {
    float s4[4];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) s4[2 * j + e] = 8 * j + 2 * tig + e < n ? sc[j][e] : -INFINITY;
    float smax = fmaxf(fmaxf(s4[0], s4[1]), fmaxf(s4[2], s4[3]));
    smax = fmaxf(smax, __shfl_xor_sync(0xffffffffu, smax, 1));
    smax = fmaxf(smax, __shfl_xor_sync(0xffffffffu, smax, 2));
    const float m_new = fmaxf(m_run, smax); // finite: the slice's first token is in the context
    const float corr = expf(m_run - m_new);
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = expf(s4[i] - m_new);
    l_run = l_run * corr + ((p[0] + p[1]) + (p[2] + p[3]));
    m_run = m_new;
    const float corr0 = __shfl_sync(0xffffffffu, corr, 8 * tig), corr1 = __shfl_sync(0xffffffffu, corr, 8 * tig + 4);
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int e2 = 0; e2 < 4; ++e2) {
            acc[c][e2][0] *= corr0;
            acc[c][e2][1] *= corr1;
            acc[c][e2][2] *= corr0;
            acc[c][e2][3] *= corr1;
        }
}

// A warp's result for the block merge: m and l (summed over the row's four threads) of head gid
// into m_w / l_w, and its o rows (heads 2 tig, 2 tig + 1) into o_w[head][dim].
__device__ __forceinline__ void publish_warp(float (*o_w)[kDim], float* m_w, float* l_w, const float (&acc)[4][4][4],
                                             float m_run, float l_run, int gid, int tig, int group) {
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
    if (tig == 0 && gid < group) {
        m_w[gid] = m_run;
        l_w[gid] = l_run;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int e2 = 0; e2 < 4; ++e2) {
            const int d = 64 * c + 8 * gid + 2 * e2;
            if (2 * tig < group) {
                o_w[2 * tig][d] = acc[c][e2][0];
                o_w[2 * tig][d + 1] = acc[c][e2][2];
            }
            if (2 * tig + 1 < group) {
                o_w[2 * tig + 1][d] = acc[c][e2][1];
                o_w[2 * tig + 1][d + 1] = acc[c][e2][3];
            }
        }
}

// Where chunk `chunk`'s partial of head kvh * group + h of token t lives in the scratch.
__device__ __forceinline__ float* partial_at(const AttnDecodeArgs& a, int t, int kvh, int group, int h, int chunk, int n_chunks) {
    return a.scratch + ((int64_t(t) * a.geo.n_heads + kvh * group + h) * n_chunks + chunk) * kPartLen;
}

// The combine's gate: out = bf16(o * sigmoid(gate)) with the reference's rounding points.
__device__ __forceinline__ void gated_store(const AttnDecodeArgs& a, int t, int h, int d, float num, float den, float gate) {
    const float o = a.geo.exact ? num / den : bf16_round(num / den);
    const float sg = a.geo.exact ? 1.f / (1.f + expf(-gate)) : bf16_round(1.f / (1.f + expf(-gate)));
    a.out[int64_t(t) * a.out_stride + int64_t(h) * kDim + d] = __float2bfloat16(o * sg);
}

// The combine: 1024 threads per (head, token), thread (d = tid % 256, q = tid / 256).
constexpr int kCombineSplit = 4;
constexpr int kCombineThreads = kDim * kCombineSplit;

// Chunk weights w_c = exp(m_c - M) (M the max over the used chunks) into w_sh[0, w_n) (zero past
// used; thread tid holds chunk tid's m_c, l_c) and den = sum_c w_c l_c. red: 32 floats.
__device__ __forceinline__ float chunk_weights(float* w_sh, int w_n, float* red, float mc, float lc, int used) {
    const int tid = threadIdx.x;
    float m = warp_max(mc);
    if ((tid & 31) == 0) red[tid >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int i = 1; i < kCombineThreads / 32; ++i) m = fmaxf(m, red[i]);
    const float w = tid < used ? expf(mc - m) : 0.f;
    if (tid < w_n) w_sh[tid] = w;
    return block_sum(w * lc, red); // its first barrier also publishes w_sh
}

// The output gate's input of head h, dim d of token t (the second half of qg's head row).
__device__ __forceinline__ float gate_of(const AttnDecodeArgs& a, int t, int h, int d) {
    return __bfloat162float(a.qg[int64_t(t) * a.qg_stride + int64_t(h) * 2 * kDim + kDim + d]);
}

// The staged path (attention_decode_v4.cu, AttnDecodePath::Staged): same arithmetic, loads issued
// before the PDL wait and one more slice in flight per warp through shared memory.
cudaError_t attn_decode_staged(const AttnDecodeArgs& a, int n_chunks, cudaStream_t stream);

} // namespace ninfer::kernels::detail
