// ninfer::kernels - decode attention over the paged KV pool on tensor cores (split context + combine).
#include "attention_decode_mma.cuh"

#include <cstdlib>

namespace ninfer::kernels {

namespace detail {

// grid (n_chunks, n_kv_heads, n_tokens), 128 threads: one chunk of a lane's context for one GQA
// group. Warp w takes the chunk's 16-token slices w, w + 4, ... with its own online softmax; the four
// warps merge in shared memory at the end. Loads run one step ahead: the next slice's K is in
// flight during this slice's softmax and P V, its V during its scores (one memory round trip per
// slice instead of two dependent ones).
// Scores, S[head][token] = Q (A: 16 rows, heads 0..group-1, rest zero) x K^T (B: 8 tokens per tile)
// over the 256 dims, 16 per mma. Dims are consumed in an order of our choosing (the sum does not
// care): thread (gid = lane / 4, tig = lane % 4) loads 16 contiguous bytes of K row gid at dims
// 8 tig + 32 s and uses them as its B words of k-steps 2s and 2s + 1; its Q words come from the same
// dims of head gid, so A and B pair the same dims. Each thread then holds the scores of head gid
// for tokens 2 tig, 2 tig + 1 of each 8-token tile: exactly the B operand (P^T, n = heads) of
// O^T[dim][head] = V^T (A: 16 dims x 16 tokens) x P^T. V^T rows are built from 8-dim pieces of
// four V rows (tokens 2 tig, 2 tig + 1, 2 tig + 8, 2 tig + 9) with byte permutes; thread gid owns
// dims 64 c + 8 gid + [0, 8) of heads 2 tig, 2 tig + 1 (acc[c][e2]: dims 2 e2 and 2 e2 + 1).
// P enters the mma as a bf16 high part plus a bf16 low part (~16 bits, as the f32 P of the CPU
// reference to ~1e-5). fp8 / int8 codes widen exactly to bf16 (|code| < 2^8); their scales multiply
// the scores (K) and fold into P (V), so no product is rounded before the f32 accumulators.
template <KvDtype D>
__global__ void __launch_bounds__(kWarps * 32, 2) attn_mma_partial_kernel(AttnDecodeArgs a, int n_chunks) {
    __shared__ float o_sh[kWarps][kGroupMax][kDim];
    __shared__ float m_sh[kWarps][kGroupMax], l_sh[kWarps][kGroupMax];
    __shared__ __align__(16) uint32_t q_sh[kGroupMax][kQWords];
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: q and the new KV row come from the previous kernel
    const AttnGeometry& geo = a.geo;
    const int chunk = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
    const auto [len, c0, c1] = chunk_span(a, n_chunks, chunk, t);
    if (c0 >= len) return;
    const int group = geo.n_heads / geo.n_kv_heads, lane_id = a.lanes[t];
    const int tb0 = c0 + warp * kSlice;
    Slice<D> cur{};
    KRegs<D> k;
    VRegs<D> v;
    if (tb0 < c1) { // first loads before the Q staging below
        cur = slice_at<D>(a, lane_id, kvh, tb0, c1);
        load_k(k, cur, gid, tig);
        load_v(v, cur, gid, tig);
    }
    stage_q<D>(q_sh, a, t, kvh, group, tid);
    __syncthreads();
    float acc[4][4][4] = {};
    float m_run = -INFINITY, l_run = 0.f; // head gid; l_run sums this thread's tokens only
    for (int tb = tb0; tb < c1; tb += kWarps * kSlice) {
        const int tn = tb + kWarps * kSlice;
        const bool more = tn < c1; // warp-uniform
        Slice<D> nxt{};
        if (more) nxt = slice_at<D>(a, lane_id, kvh, tn, c1);
        float sc[2][2];
        slice_scores<D>(sc, k, q_sh[gid], tig);
        if (more) load_k(k, nxt, gid, tig);
        float p[4];
        online_softmax(p, m_run, l_run, acc, sc, cur.n, tig);
        slice_pv<D>(acc, v, p);
        if (more) load_v(v, nxt, gid, tig);
        cur = nxt;
    }
    // ---- merge the four warps: o = sum_w exp(m_w - M) o_w (warps without a slice have m = -inf).
    publish_warp(o_sh[warp], m_sh[warp], l_sh[warp], acc, m_run, l_run, gid, tig, group);
    __syncthreads();
    for (int i = tid; i < group * kDim; i += kWarps * 32) {
        const int h = i / kDim, d = i % kDim;
        float m = m_sh[0][h];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) m = fmaxf(m, m_sh[w][h]);
        float o = 0.f, l = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            const float f = expf(m_sh[w][h] - m); // 0 for an idle warp; m is finite (warp 0 had a slice)
            o = fmaf(f, o_sh[w][h][d], o);
            l = fmaf(f, l_sh[w][h], l);
        }
        float* part = partial_at(a, t, kvh, group, h, chunk, n_chunks);
        part[d] = o;
        if (d == 0) {
            part[kDim] = m;
            part[kDim + 1] = l;
        }
    }
}


// grid (n_heads, n_tokens), 1024 threads: merge the used chunks, apply the output gate. Thread
// c < used reads chunk c's (m, l); then thread (d = tid % 256, q = tid / 256) sums w_c o_c[d] over
// chunks c = q mod 4 with 16 loads in flight (the partials sit in L2: the sum is latency-bound), and
// the four quarter sums are added in q order.
__global__ void __launch_bounds__(kDim * kCombineSplit) attn_mma_combine_kernel(AttnDecodeArgs a, int n_chunks) {
    constexpr int kBatch = 16;
    __shared__ float w_sh[kMaxChunks + kCombineSplit * kBatch];
    __shared__ float num_sh[kCombineSplit][kDim];
    __shared__ float red[32];
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: the partials come from the previous kernel
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, d = tid % kDim, q = tid / kDim;
    const int used = chunk_split(a.positions[t] + 1, n_chunks).used;
    const float* part = a.scratch + (int64_t(t) * a.geo.n_heads + h) * n_chunks * kPartLen;
    const float mc = tid < used ? part[tid * kPartLen + kDim] : -INFINITY;
    const float lc = tid < used ? part[tid * kPartLen + kDim + 1] : 0.f;
    const float den = chunk_weights(w_sh, kMaxChunks + kCombineSplit * kBatch, red, mc, lc, used);
    float num = 0.f;
    for (int c0 = q; c0 < used; c0 += kCombineSplit * kBatch) {
        float v[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
            const int c = c0 + kCombineSplit * i;
            v[i] = c < used ? part[c * kPartLen + d] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < kBatch; ++i) num = fmaf(w_sh[c0 + kCombineSplit * i], v[i], num);
    }
    num_sh[q][d] = num;
    __syncthreads();
    if (q != 0) return;
    num = ((num_sh[0][d] + num_sh[1][d]) + num_sh[2][d]) + num_sh[3][d];
    gated_store(a, t, h, d, num, den, gate_of(a, t, h, d));
}

bool decode_geometry_ok(const AttnGeometry& g) {
    return g.head_dim == kDim && g.n_kv_heads >= 1 && g.n_heads >= g.n_kv_heads && g.n_heads % g.n_kv_heads == 0 &&
           g.n_heads / g.n_kv_heads <= kGroupMax;
}

} // namespace detail

size_t attn_decode_scratch_floats(int n_tokens, int n_heads, int max_context) {
    const int pages = (max_context + kKvPageTokens - 1) / kKvPageTokens;
    return size_t(n_tokens) * size_t(n_heads) * size_t(std::min(pages, detail::kMaxChunks)) * detail::kPartLen;
}

AttnDecodePath attn_decode_schedule(AttnDecodePath path, int n_tokens) {
    if (path != AttnDecodePath::Auto) return path;
    // At batch 1 the staged schedule's early loads overlap the qkv GEMV (a win at every depth); at
    // batch 8 its loop loses once the grid is more than one wave (kernels/PERF_NOTES.md "Session 6").
    return n_tokens == 1 ? AttnDecodePath::Staged : AttnDecodePath::Split;
}

cudaError_t attn_decode(const AttnDecodeArgs& a, cudaStream_t stream) {
    return attn_decode_with(a, AttnDecodePath::Auto, stream);
}

cudaError_t attn_decode_with(const AttnDecodeArgs& a, AttnDecodePath path, cudaStream_t stream) {
    const bool pools = a.kv.dtype == KvDtype::Bf16 ? a.kv.k && a.kv.v : a.kv.k_q && a.kv.v_q;
    if (!detail::decode_geometry_ok(a.geo) || !a.q || !a.qg || !a.lanes || !a.positions || !pools ||
        !a.kv.page_table || !a.out || a.n_tokens < 1 || a.n_tokens > 65535 || a.max_context < 1 ||
        a.max_context > a.kv.max_pages * kKvPageTokens || !a.scratch ||
        a.scratch_floats < attn_decode_scratch_floats(a.n_tokens, a.geo.n_heads, a.max_context))
        return cudaErrorInvalidValue;
    const int n_chunks = detail::n_chunks_for(a.geo.n_kv_heads, a.max_context);
    if (attn_decode_schedule(path, a.n_tokens) == AttnDecodePath::Staged && a.kv.dtype == KvDtype::Bf16)
        return detail::attn_decode_staged(a, n_chunks, stream);
    const dim3 grid(unsigned(n_chunks), unsigned(a.geo.n_kv_heads), unsigned(a.n_tokens)), block(detail::kWarps * 32);
    const cudaError_t err =
        a.kv.dtype == KvDtype::Fp8    ? launch_pdl(detail::attn_mma_partial_kernel<KvDtype::Fp8>, grid, block, 0, stream, a, n_chunks)
        : a.kv.dtype == KvDtype::Int8 ? launch_pdl(detail::attn_mma_partial_kernel<KvDtype::Int8>, grid, block, 0, stream, a, n_chunks)
                                      : launch_pdl(detail::attn_mma_partial_kernel<KvDtype::Bf16>, grid, block, 0, stream, a, n_chunks);
    if (err != cudaSuccess) return err;
    return launch_pdl(detail::attn_mma_combine_kernel, dim3(unsigned(a.geo.n_heads), unsigned(a.n_tokens)),
                      dim3(detail::kDim * detail::kCombineSplit), 0, stream, a, n_chunks);
}

} // namespace ninfer::kernels
