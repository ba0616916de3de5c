// ninfer::kernels - decode attention with the chunk merge, and optionally the prep, folded into the
// partial kernel (attention_decode.h 3.): one launch per layer instead of three.
#include "attention_decode_mma.cuh"
#include "attention_prep.cuh"

#include <cstdlib>
#include <cstring>

namespace ninfer::kernels {

namespace detail {

constexpr int kThreads = kWarps * 32;
constexpr int kMergeGroups = 5; // 32-chunk groups of the merge: kMaxChunks <= 160
static_assert(kMaxChunks <= kMergeGroups * 32);

// The current token's K and V rows as the pages store them (bf16 row, or codes then scales).
struct NewRows {
    __align__(16) uint8_t k[2 * kDim];
    __align__(16) uint8_t v[2 * kDim];
    uint16_t k_scales[4], v_scales[4];
};

// The block whose chunk holds the current token takes that token's K / V words from NewRows instead
// of the page it is writing in the same launch: no ordering between its stores and the (non-coherent,
// possibly earlier) page loads is needed. Applied right before a slice's words are used, when the
// loads have landed anyway. Slice row rr = pos - tb; see KRegs / VRegs for who holds which row.
template <KvDtype D> struct RowPatch {
    const NewRows* rows; // null: this block does not hold the current token
    int pos;
    __device__ __forceinline__ KvWord<D> word(const uint8_t* row, int col) const {
        if constexpr (D == KvDtype::Bf16) return *reinterpret_cast<const uint4*>(row + 2 * col);
        else return *reinterpret_cast<const uint2*>(row + col);
    }
    __device__ __forceinline__ float scale(const uint16_t* s, int g) const {
        return D == KvDtype::Fp8 ? bf16_bits_to_float(s[0]) : f16_bits_to_float(s[g]);
    }
    __device__ __forceinline__ void fix_k(KRegs<D>& k, int tb, int gid, int tig) const {
        const int rr = pos - tb;
        if (!rows || rr < 0 || rr >= kSlice) return;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            if (8 * j + gid == rr)
#pragma unroll
                for (int q = 0; q < 8; ++q) k.w[j][q] = word(rows->k, 8 * tig + 32 * q);
            if constexpr (D != KvDtype::Bf16)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    if (8 * j + 2 * tig + e == rr)
#pragma unroll
                        for (int g = 0; g < groups_of(D); ++g) k.scale[j][e][g] = scale(rows->k_scales, g);
        }
    }
    __device__ __forceinline__ void fix_v(VRegs<D>& v, int tb, int gid, int tig) const {
        const int rr = pos - tb;
        if (!rows || rr < 0 || rr >= kSlice) return;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if (2 * tig + (i & 1) + 8 * (i >> 1) != rr) continue;
#pragma unroll
            for (int c = 0; c < 4; ++c) v.w[i][c] = word(rows->v, 64 * c + 8 * gid);
            if constexpr (D != KvDtype::Bf16)
#pragma unroll
                for (int g = 0; g < groups_of(D); ++g) v.scale[i][g] = scale(rows->v_scales, g);
        }
    }
};

// Where stage_q puts dim d of a Q row, as bf16 index: fp8 reorders each 8-dim piece (0, 2), (1, 3),
// (4, 6), (5, 7) like its K words.
template <KvDtype D> __device__ __forceinline__ int q_slot(int d) {
    if constexpr (D != KvDtype::Fp8) return d;
    const int e = d & 7;
    return (d & ~7) | (e & 4) | ((e & 1) << 1) | ((e >> 1) & 1);
}

// attn_prep_kernel's work for this block, with its exact operations (so the bits match): offset
// RMSNorm + RoPE of the group's query heads into q_sh (times 2^-4, as stage_q), and in the block that
// holds the current token (writer) also of its K row, stored with its V row in rows (quantised as
// kv_store_quantized does). Thread tid owns dims tid and tid + 128 of every row.
template <KvDtype D>
__device__ __forceinline__ void prep_in_block(const AttnPrepArgs& p, uint32_t (&q_sh)[kGroupMax][kQWords],
                                              float (&xs)[kGroupMax + 1][kDim], float (&red)[kGroupMax + 1][kWarps],
                                              NewRows& rows, const float (&wq)[2], const float (&wk)[2],
                                              const float (&inv_freq)[2], int t, int kvh, int group, int pos, bool writer) {
    const AttnGeometry& geo = p.geo;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, half = geo.rotary_dim / 2;
    const int n_rows = group + (writer ? 1 : 0); // rows: query heads 0..group-1, then K
    float x[kGroupMax + 1][2];
#pragma unroll
    for (int r = 0; r <= kGroupMax; ++r) {
        if (r >= n_rows) continue;
        const __nv_bfloat16* src = r < group ? p.qg + int64_t(t) * p.qg_stride + int64_t(kvh * group + r) * 2 * kDim
                                             : p.k + int64_t(t) * p.k_stride + int64_t(kvh) * kDim;
        x[r][0] = __bfloat162float(src[tid]);
        x[r][1] = __bfloat162float(src[tid + 128]);
        const float s = warp_sum(sum_sq2(x[r][0], x[r][1])); // block_sum's steps, all rows at once
        if (lane == 0) red[r][warp] = s;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r <= kGroupMax; ++r) {
        if (r >= n_rows) continue;
        float total = 0.f;
        for (int i = 0; i < kWarps; ++i) total += red[r][i];
        const float inv = rsqrtf(total / float(kDim) + geo.eps);
        const float y0 = x[r][0] * inv * (r < group ? wq[0] : wk[0]), y1 = x[r][1] * inv * (r < group ? wq[1] : wk[1]);
        xs[r][tid] = geo.exact ? y0 : bf16_round(y0);
        xs[r][tid + 128] = geo.exact ? y1 : bf16_round(y1);
    }
    __syncthreads();
    uint16_t* q16 = reinterpret_cast<uint16_t*>(&q_sh[0][0]);
    float kout[2] = {0.f, 0.f};
    RopeCs cs[2]; // the same for every row: once per dim, not per row
#pragma unroll
    for (int e = 0; e < 2; ++e) cs[e] = rope_cos_sin(float(pos) * inv_freq[e], geo.exact);
#pragma unroll
    for (int r = 0; r <= kGroupMax; ++r) {
        if (r >= n_rows) continue;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int d = tid + 128 * e;
            float out = xs[r][d];
            if (d < geo.rotary_dim) {
                const float rot = d < half ? -xs[r][d + half] : xs[r][d - half];
                out = rope_apply(xs[r][d], rot, cs[e], geo.exact);
            }
            if (r < group) { // stage_q's bf16x2 multiply by 2^-4 on the stored bf16
                const uint32_t b = __bfloat16_as_ushort(__float2bfloat16(out));
                q16[r * 2 * kQWords + q_slot<D>(d)] = uint16_t(bf16x2_mul(b, 0x3D803D80u));
            } else {
                kout[e] = out;
            }
        }
    }
    for (int i = group * kDim + tid; i < kGroupMax * kDim; i += kThreads) // rows past the group are zero
        q16[(i / kDim) * 2 * kQWords + i % kDim] = 0;
    if (!writer) return; // block-uniform
    const __nv_bfloat16* vsrc = p.v + int64_t(t) * p.v_stride + int64_t(kvh) * kDim;
    if constexpr (D == KvDtype::Bf16) {
        uint16_t* k16 = reinterpret_cast<uint16_t*>(rows.k);
        uint16_t* v16 = reinterpret_cast<uint16_t*>(rows.v);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            k16[tid + 128 * e] = __bfloat16_as_ushort(__float2bfloat16(kout[e]));
            v16[tid + 128 * e] = __bfloat16_as_ushort(vsrc[tid + 128 * e]);
        }
    } else {
        float* qred = &red[0][0]; // the norm's sums are consumed: reuse for the amax reductions
        kv_store_quantized(D, kout[0], kout[1], KvQuantRow{rows.k, rows.k_scales}, qred);
        kv_store_quantized(D, __bfloat162float(vsrc[tid]), __bfloat162float(vsrc[tid + 128]),
                           KvQuantRow{rows.v, rows.v_scales}, qred);
    }
}

// Copies the new rows (complete after a barrier) into the pool at the current token's position.
template <KvDtype D> __device__ __forceinline__ void store_new_rows(const KvPages& kv, int n_kv, int lane_id, int kvh, int pos, const NewRows& rows) {
    const int tid = threadIdx.x;
    const int64_t page = kv.page_table[int64_t(lane_id) * kv.max_pages + pos / kKvPageTokens];
    const int r = pos % kKvPageTokens;
    constexpr int kRowBytes = D == KvDtype::Bf16 ? 2 * kDim : kDim, kWords = kRowBytes / 16;
    constexpr int kScales = kv_scales_per_row(D, kDim);
    const void* kpool = D == KvDtype::Bf16 ? static_cast<const void*>(kv.k) : kv.k_q;
    const void* vpool = D == KvDtype::Bf16 ? static_cast<const void*>(kv.v) : kv.v_q;
    for (int i = tid; i < 2 * kWords; i += kThreads) {
        const bool is_v = i >= kWords;
        const PageRef<D> ref = page_ref<D>(is_v ? vpool : kpool, kv, n_kv, kvh, page);
        uint8_t* dst = D == KvDtype::Bf16 ? reinterpret_cast<uint8_t*>(const_cast<__nv_bfloat16*>(ref.rows)) + int64_t(r) * kRowBytes
                                          : const_cast<uint8_t*>(ref.codes) + int64_t(r) * kRowBytes;
        const int w = i % kWords;
        reinterpret_cast<uint4*>(dst)[w] = reinterpret_cast<const uint4*>(is_v ? rows.v : rows.k)[w];
    }
    if constexpr (kScales > 0)
        if (tid < 2 * kScales) {
            const bool is_v = tid >= kScales;
            const PageRef<D> ref = page_ref<D>(is_v ? vpool : kpool, kv, n_kv, kvh, page);
            const_cast<uint16_t*>(ref.scales)[r * kScales + tid % kScales] = (is_v ? rows.v_scales : rows.k_scales)[tid % kScales];
        }
}

// The last block of (t, kvh) merges the group's used chunks exactly as attn_mma_combine_kernel does:
// m the max, w_c = exp(m_c - m), den = the block_sum of w_c l_c (warp butterflies over 32-chunk
// groups, then the groups in order from 0), num[d] four chains over chunks c = q mod 4 in increasing
// c, then ((q0 + q1) + q2) + q3. Partials are read through L2 (other SMs wrote them), so the merge is
// a chain of L2 round trips: warp w takes the weights of heads w and w + 4 in one, and each thread
// dims 2 tid, 2 tid + 1 of every head, kBatch chunks of all heads per round (one 8-byte load each).
constexpr int kHeadsPerWarp = kGroupMax / kWarps;
__device__ __forceinline__ void fold_merge(const AttnDecodeArgs& a, float (&w_sh)[kGroupMax][kMergeGroups * 32],
                                           float (&den_sh)[kGroupMax], int t, int kvh, int group, int used, int n_chunks) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float* base = a.scratch + (int64_t(t) * a.geo.n_heads + kvh * group) * n_chunks * kPartLen;
    const int64_t head_stride = int64_t(n_chunks) * kPartLen;
    float mc[kHeadsPerWarp][kMergeGroups], lc[kHeadsPerWarp][kMergeGroups];
#pragma unroll
    for (int i = 0; i < kHeadsPerWarp; ++i) {
        const int h = warp + kWarps * i;
#pragma unroll
        for (int g = 0; g < kMergeGroups; ++g) {
            const int c = 32 * g + lane;
            const bool ok = h < group && c < used;
            mc[i][g] = ok ? __ldcg(base + h * head_stride + c * kPartLen + kDim) : -INFINITY;
            lc[i][g] = ok ? __ldcg(base + h * head_stride + c * kPartLen + kDim + 1) : 0.f;
        }
    }
#pragma unroll
    for (int i = 0; i < kHeadsPerWarp; ++i) {
        const int h = warp + kWarps * i;
        if (h >= group) continue; // warp-uniform
        float m = -INFINITY;
#pragma unroll
        for (int g = 0; g < kMergeGroups; ++g) m = fmaxf(m, mc[i][g]);
        m = warp_max(m);
        float den = 0.f;
#pragma unroll
        for (int g = 0; g < kMergeGroups; ++g) {
            const int c = 32 * g + lane;
            const float w = c < used ? expf(mc[i][g] - m) : 0.f;
            w_sh[h][c] = w;
            den += warp_sum(w * lc[i][g]);
        }
        if (lane == 0) den_sh[h] = den;
    }
    __syncthreads();
    constexpr int kBatch = 4; // chunks per round, one per chain
    float2 n[kGroupMax][kBatch] = {};
    for (int c0 = 0; c0 < used; c0 += kBatch) {
        float2 v[kGroupMax][kBatch];
#pragma unroll
        for (int h = 0; h < kGroupMax; ++h)
#pragma unroll
            for (int i = 0; i < kBatch; ++i) {
                const int c = c0 + i;
                v[h][i] = h < group && c < used
                              ? __ldcg(reinterpret_cast<const float2*>(base + h * head_stride + c * kPartLen + 2 * tid))
                              : make_float2(0.f, 0.f);
            }
#pragma unroll
        for (int h = 0; h < kGroupMax; ++h)
#pragma unroll
            for (int i = 0; i < kBatch; ++i)
                if (h < group && c0 + i < used) {
                    const float w = w_sh[h][c0 + i];
                    n[h][i].x = fmaf(w, v[h][i].x, n[h][i].x);
                    n[h][i].y = fmaf(w, v[h][i].y, n[h][i].y);
                }
    }
#pragma unroll
    for (int h = 0; h < kGroupMax; ++h) {
        if (h >= group) continue;
        store_gated(a, t, kvh * group + h, 2 * tid, ((n[h][0].x + n[h][1].x) + n[h][2].x) + n[h][3].x, den_sh[h]);
        store_gated(a, t, kvh * group + h, 2 * tid + 1, ((n[h][0].y + n[h][1].y) + n[h][2].y) + n[h][3].y, den_sh[h]);
    }
}

// grid (n_chunks, n_kv_heads, n_tokens), 128 threads: attn_mma_partial_kernel (kPrep: with the prep
// done in the block, see prep_in_block), then the counter of (t, kvh) picks the block that merges.
// early (AttnFold::AllEarly): the step's inputs, the page table and the rows before the current
// token are settled, so the first slice's K / V loads go out before the PDL wait and overlap the
// previous kernel (the current token's row, written by this launch, is patched in anyway).
template <KvDtype D, bool kPrep>
__global__ void __launch_bounds__(kThreads, 2) attn_fold_kernel(AttnDecodeArgs a, AttnPrepArgs p, int n_chunks, bool early, int merge_max) {
    __shared__ float o_sh[kWarps][kGroupMax][kDim]; // also the prep's rows and the merge's weights
    __shared__ float m_sh[kWarps][kGroupMax], l_sh[kWarps][kGroupMax];
    __shared__ __align__(16) uint32_t q_sh[kGroupMax][kQWords];
    __shared__ float red[kGroupMax + 1][kWarps];
    __shared__ float den_sh[kGroupMax];
    __shared__ NewRows rows;
    __shared__ int last_sh;
    static_assert(sizeof(o_sh) >= sizeof(float[kGroupMax + 1][kDim]) && sizeof(o_sh) >= sizeof(float[kGroupMax][kMergeGroups * 32]));
    ninfer_grid_launch_dependents();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
    float wq[2] = {}, wk[2] = {}, inv_freq[2] = {};
    if constexpr (kPrep) { // constant data before the PDL wait, as attn_prep_kernel
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            wq[e] = 1.f + __bfloat162float(p.q_norm[tid + 128 * e]);
            wk[e] = 1.f + __bfloat162float(p.k_norm[tid + 128 * e]);
            inv_freq[e] = rope_inv_freq(p.geo, tid + 128 * e);
        }
    }
    if (!early) ninfer_grid_wait(); // PDL: q (or its projections) and the step's positions come from earlier kernels
    const int chunk = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
    const int pos = a.positions[t], len = pos + 1;
    const ChunkSplit split = chunk_split(len, n_chunks);
    const int c0 = chunk * split.per * kKvPageTokens;
    if (c0 >= len) return;
    const int c1 = min(len, c0 + split.per * kKvPageTokens);
    const int group = a.geo.n_heads / a.geo.n_kv_heads, lane_id = a.lanes[t];
    const bool writer = kPrep && c1 == len; // this chunk holds the current token
    const int tb0 = c0 + warp * kSlice;
    Slice<D> cur{};
    KRegs<D> k;
    VRegs<D> v;
    first_slice<D>(cur, k, v, a, lane_id, kvh, tb0, c1, gid, tig); // before the Q work below
    if (early) ninfer_grid_wait();
    if constexpr (kPrep)
        prep_in_block<D>(p, q_sh, reinterpret_cast<float(&)[kGroupMax + 1][kDim]>(o_sh), red, rows, wq, wk, inv_freq, t,
                         kvh, group, pos, writer);
    else
        stage_q<D>(q_sh, a, t, kvh, group, tid);
    __syncthreads();
    if (writer) store_new_rows<D>(a.kv, a.geo.n_kv_heads, lane_id, kvh, pos, rows);
    float acc[4][4][4] = {};
    float m_run = -INFINITY, l_run = 0.f; // head gid
    if constexpr (kPrep)
        chunk_slices<D>(acc, m_run, l_run, cur, k, v, a, lane_id, kvh, tb0, c1, q_sh[gid], gid, tig,
                        RowPatch<D>{writer ? &rows : nullptr, pos});
    else
        chunk_slices<D>(acc, m_run, l_run, cur, k, v, a, lane_id, kvh, tb0, c1, q_sh[gid], gid, tig, NoPatch{});
    merge_store_partial(a, o_sh, m_sh, l_sh, acc, m_run, l_run, group, t, kvh, chunk, n_chunks);
    const int used = split.used;
    if (used > merge_max) return; // the combine kernel merges this token
    // Publish the partial, then count it; the block that completes the count merges and re-arms.
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        uint32_t* counter = reinterpret_cast<uint32_t*>(a.scratch + a.scratch_floats) - 1 - (t * a.geo.n_kv_heads + kvh);
        const bool last = atomicAdd(counter, 1u) == uint32_t(used - 1);
        if (last) atomicExch(counter, 0u);
        last_sh = last;
    }
    __syncthreads();
    if (!last_sh) return;
    __threadfence(); // the other blocks' partials, published before their counts, are visible now
    fold_merge(a, reinterpret_cast<float(&)[kGroupMax][kMergeGroups * 32]>(o_sh), den_sh, t, kvh, group, used, n_chunks);
}

template <bool kPrep>
cudaError_t launch_fold_kernel(const AttnDecodeArgs& a, const AttnPrepArgs& p, int n_chunks, bool early, int merge_max,
                               cudaStream_t stream) {
    const dim3 grid(unsigned(n_chunks), unsigned(a.geo.n_kv_heads), unsigned(a.n_tokens)), block(kThreads);
    switch (a.kv.dtype) {
    case KvDtype::Fp8: return launch_pdl(attn_fold_kernel<KvDtype::Fp8, kPrep>, grid, block, 0, stream, a, p, n_chunks, early, merge_max);
    case KvDtype::Int8: return launch_pdl(attn_fold_kernel<KvDtype::Int8, kPrep>, grid, block, 0, stream, a, p, n_chunks, early, merge_max);
    default: return launch_pdl(attn_fold_kernel<KvDtype::Bf16, kPrep>, grid, block, 0, stream, a, p, n_chunks, early, merge_max);
    }
}

// The folded kernel, then (only if some lane may use more than merge_max chunks) the combine kernel
// for the tokens whose lanes do.
template <bool kPrep>
cudaError_t launch_fold(const AttnDecodeArgs& a, const AttnPrepArgs& p, bool early, int merge_max, cudaStream_t stream) {
    const int n_chunks = n_chunks_for(a.geo.n_kv_heads, a.max_context);
    const cudaError_t err = launch_fold_kernel<kPrep>(a, p, n_chunks, early, merge_max, stream);
    if (err != cudaSuccess || n_chunks <= merge_max) return err;
    return launch_combine(a, n_chunks, merge_max, stream);
}

} // namespace detail

AttnFold attn_fold_from_env() {
    static const AttnFold fold = [] {
        const char* s = std::getenv("NINFER_ATTN_FOLD");
        if (s && std::strcmp(s, "1") == 0) return AttnFold::Combine;
        if (s && std::strcmp(s, "2") == 0) return AttnFold::All;
        if (s && std::strcmp(s, "3") == 0) return AttnFold::AllEarly;
        if (s && std::strcmp(s, "0") == 0) return AttnFold::Off;
        return kAttnFoldDefault;
    }();
    return fold;
}

int attn_fold_merge_max_from_env() {
    static const int merge_max = [] {
        const char* s = std::getenv("NINFER_ATTN_FOLD_MERGE_MAX");
        const int v = s ? std::atoi(s) : 0;
        return v >= 1 ? v : kAttnFoldMergeAll;
    }();
    return merge_max;
}

cudaError_t attn_decode_folded(const AttnPrepArgs& p, const AttnDecodeArgs& a, AttnFold fold, cudaStream_t stream,
                               int merge_max) {
    if (fold == AttnFold::Off) {
        const cudaError_t err = attn_decode_prep(p, stream);
        return err != cudaSuccess ? err : attn_decode(a, stream);
    }
    const bool same = p.geo.n_heads == a.geo.n_heads && p.geo.n_kv_heads == a.geo.n_kv_heads &&
                      p.geo.head_dim == a.geo.head_dim && p.geo.exact == a.geo.exact && p.lanes == a.lanes &&
                      p.positions == a.positions && p.n_tokens == a.n_tokens && p.qg == a.qg && p.qg_stride == a.qg_stride &&
                      p.kv.dtype == a.kv.dtype && p.kv.page_table == a.kv.page_table && p.kv.max_pages == a.kv.max_pages &&
                      p.kv.k == a.kv.k && p.kv.v == a.kv.v && p.kv.k_q == a.kv.k_q && p.kv.v_q == a.kv.v_q; // All writes attn.kv
    if (!same || merge_max < 1 || !detail::decode_args_ok(a, fold == AttnFold::Combine)) return cudaErrorInvalidValue;
    if (fold == AttnFold::Combine) {
        const cudaError_t err = attn_decode_prep(p, stream);
        return err != cudaSuccess ? err : detail::launch_fold<false>(a, p, false, merge_max, stream);
    }
    if (!detail::prep_args_ok(p, false)) return cudaErrorInvalidValue;
    return detail::launch_fold<true>(a, p, fold == AttnFold::AllEarly, merge_max, stream);
}

} // namespace ninfer::kernels
