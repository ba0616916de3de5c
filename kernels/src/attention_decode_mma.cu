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
    split_partial<D>(a, n_chunks, o_sh, m_sh, l_sh, q_sh);
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

AttnDecodePath attn_decode_default_path() {
    static const AttnDecodePath path = [] {
        const char* v = std::getenv("NINFER_ATTN_DECODE");
        if (!v || !v[0] || v[1]) return AttnDecodePath::Auto;
        return v[0] == '0' || v[0] == '1' ? AttnDecodePath::Split : v[0] == '2' ? AttnDecodePath::Staged : AttnDecodePath::Auto;
    }();
    return path;
}

int attn_decode_staged_tokens(AttnDecodePath path, int n_tokens) {
    if (path == AttnDecodePath::Split) return 0;
    if (path == AttnDecodePath::Staged) return 1 << 30;
    // Auto (kernels/PERF_NOTES.md "Session 6"): the staged schedule gains by the loads it issues before
    // the PDL wait, which only the first wave of blocks can use, and its loop is slower than the split
    // loop once a warp has more than two slices. Batch 1 (one wave of <= 264 blocks): up to two
    // slices a warp; larger batches: one.
    return (n_tokens == 1 ? 2 : 1) * detail::kWarps * detail::kSlice;
}

cudaError_t attn_decode(const AttnDecodeArgs& a, cudaStream_t stream) {
    return attn_decode_with(a, attn_decode_default_path(), stream);
}

cudaError_t attn_decode_with(const AttnDecodeArgs& a, AttnDecodePath path, cudaStream_t stream) {
    const bool pools = a.kv.dtype == KvDtype::Bf16 ? a.kv.k && a.kv.v : a.kv.k_q && a.kv.v_q;
    if (!detail::decode_geometry_ok(a.geo) || !a.q || !a.qg || !a.lanes || !a.positions || !pools ||
        !a.kv.page_table || !a.out || a.n_tokens < 1 || a.n_tokens > 65535 || a.max_context < 1 ||
        a.max_context > a.kv.max_pages * kKvPageTokens || !a.scratch ||
        a.scratch_floats < attn_decode_scratch_floats(a.n_tokens, a.geo.n_heads, a.max_context))
        return cudaErrorInvalidValue;
    const int n_chunks = detail::n_chunks_for(a.geo.n_kv_heads, a.max_context);
    const int staged_tokens = attn_decode_staged_tokens(path, a.n_tokens);
    if (staged_tokens > 0 && a.kv.dtype == KvDtype::Bf16) return detail::attn_decode_staged(a, n_chunks, staged_tokens, stream);
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
