// ninfer::kernels - decode attention over the paged KV pool on tensor cores (split context + combine).
#include "attention_decode_mma.cuh"

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
    const int len = a.positions[t] + 1;
    const ChunkSplit split = chunk_split(len, n_chunks);
    const int c0 = chunk * split.per * kKvPageTokens;
    if (c0 >= len) return;
    const int c1 = min(len, c0 + split.per * kKvPageTokens);
    const int group = geo.n_heads / geo.n_kv_heads, lane_id = a.lanes[t];
    const int tb0 = c0 + warp * kSlice;
    Slice<D> cur{};
    KRegs<D> k;
    VRegs<D> v;
    first_slice<D>(cur, k, v, a, lane_id, kvh, tb0, c1, gid, tig); // before the Q work below
    stage_q<D>(q_sh, a, t, kvh, group, tid);
    __syncthreads();
    float acc[4][4][4] = {};
    float m_run = -INFINITY, l_run = 0.f; // head gid
    chunk_slices<D>(acc, m_run, l_run, cur, k, v, a, lane_id, kvh, tb0, c1, q_sh[gid], gid, tig, NoPatch{});
    merge_store_partial(a, o_sh, m_sh, l_sh, acc, m_run, l_run, group, t, kvh, chunk, n_chunks);
}

// grid (n_heads, n_tokens), 1024 threads: merge the used chunks, apply the output gate. Thread
// c < used reads chunk c's (m, l); then thread (d = tid % 256, q = tid / 256) sums w_c o_c[d] over
// chunks c = q mod 4 with 16 loads in flight (the partials sit in L2: the sum is latency-bound), and
// the four quarter sums are added in q order.
constexpr int kCombineSplit = 4;
__global__ void __launch_bounds__(kDim * kCombineSplit) attn_mma_combine_kernel(AttnDecodeArgs a, int n_chunks, int skip_used_le) {
    constexpr int kBatch = 16;
    __shared__ float w_sh[kMaxChunks + kCombineSplit * kBatch];
    __shared__ float num_sh[kCombineSplit][kDim];
    __shared__ float red[32];
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: the partials come from the previous kernel
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, d = tid % kDim, q = tid / kDim;
    const int used = chunk_split(a.positions[t] + 1, n_chunks).used;
    if (used <= skip_used_le) return; // merged by the folded kernel (0 for the split path: never)
    const float* part = a.scratch + (int64_t(t) * a.geo.n_heads + h) * n_chunks * kPartLen;
    const float mc = tid < used ? part[tid * kPartLen + kDim] : -INFINITY;
    const float lc = tid < used ? part[tid * kPartLen + kDim + 1] : 0.f;
    float m = warp_max(mc);
    if ((tid & 31) == 0) red[tid >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int i = 1; i < kDim * kCombineSplit / 32; ++i) m = fmaxf(m, red[i]);
    const float w = tid < used ? expf(mc - m) : 0.f;
    if (tid < kMaxChunks + kCombineSplit * kBatch) w_sh[tid] = w;
    const float den = block_sum(w * lc, red); // its first barrier also publishes w_sh
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
    store_gated(a, t, h, d, num, den);
}

bool decode_geometry_ok(const AttnGeometry& g) {
    return g.head_dim == kDim && g.n_kv_heads >= 1 && g.n_heads >= g.n_kv_heads && g.n_heads % g.n_kv_heads == 0 &&
           g.n_heads / g.n_kv_heads <= kGroupMax;
}

bool decode_args_ok(const AttnDecodeArgs& a, bool need_q) {
    const bool pools = a.kv.dtype == KvDtype::Bf16 ? a.kv.k && a.kv.v : a.kv.k_q && a.kv.v_q;
    return decode_geometry_ok(a.geo) && (a.q || !need_q) && a.qg && a.lanes && a.positions && pools && a.kv.page_table &&
           a.out && a.n_tokens >= 1 && a.n_tokens <= 65535 && a.max_context >= 1 &&
           a.max_context <= a.kv.max_pages * kKvPageTokens && a.scratch &&
           a.scratch_floats >= attn_decode_scratch_floats(a.n_tokens, a.geo.n_heads, a.max_context);
}

cudaError_t launch_combine(const AttnDecodeArgs& a, int n_chunks, int skip_used_le, cudaStream_t stream) {
    return launch_pdl(attn_mma_combine_kernel, dim3(unsigned(a.geo.n_heads), unsigned(a.n_tokens)),
                      dim3(kDim * kCombineSplit), 0, stream, a, n_chunks, skip_used_le);
}

} // namespace detail

size_t attn_decode_scratch_floats(int n_tokens, int n_heads, int max_context) {
    const int pages = (max_context + kKvPageTokens - 1) / kKvPageTokens;
    // Partials, then (the tail) one counter word per (token, head) for the folded paths.
    return size_t(n_tokens) * size_t(n_heads) * (size_t(std::min(pages, detail::kMaxChunks)) * detail::kPartLen + 1);
}

cudaError_t attn_decode(const AttnDecodeArgs& a, cudaStream_t stream) {
    if (!detail::decode_args_ok(a, true))
        return cudaErrorInvalidValue;
    const int n_chunks = detail::n_chunks_for(a.geo.n_kv_heads, a.max_context);
    const dim3 grid(unsigned(n_chunks), unsigned(a.geo.n_kv_heads), unsigned(a.n_tokens)), block(detail::kWarps * 32);
    const cudaError_t err =
        a.kv.dtype == KvDtype::Fp8    ? launch_pdl(detail::attn_mma_partial_kernel<KvDtype::Fp8>, grid, block, 0, stream, a, n_chunks)
        : a.kv.dtype == KvDtype::Int8 ? launch_pdl(detail::attn_mma_partial_kernel<KvDtype::Int8>, grid, block, 0, stream, a, n_chunks)
                                      : launch_pdl(detail::attn_mma_partial_kernel<KvDtype::Bf16>, grid, block, 0, stream, a, n_chunks);
    if (err != cudaSuccess) return err;
    return detail::launch_combine(a, n_chunks, 0, stream);
}

} // namespace ninfer::kernels
