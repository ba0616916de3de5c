// ninfer::kernels - staged decode attention (AttnDecodePath::Staged): the split
// kernels' arithmetic with the KV loads issued before the PDL wait and a second slice per warp in flight.
#include "attention_decode_mma.cuh"
#include "prefill_async.cuh"

namespace ninfer::kernels::detail {

namespace {

using BfSlice = Slice<KvDtype::Bf16>;

// A warp's shared-memory stage holds one 16-token slice: K words [j][q] (KRegs) then V words [i][c]
// (VRegs), each stored [word][lane], so that a warp's 16-byte accesses are conflict-free and every
// lane reads back only the words it copied itself. After the loop the warp's o rows reuse it.
constexpr int kStageWords = 32;
constexpr int kStageBytes = kStageWords * 32 * 16;
constexpr int kPartialSmem = kWarps * kStageBytes;
static_assert(kGroupMax * kDim * int(sizeof(float)) <= kStageBytes, "a warp's o rows fit its stage");

__device__ __forceinline__ int k_row(int j, int gid) { return 8 * j + gid; }
__device__ __forceinline__ int v_row(int i, int tig) { return 2 * tig + (i & 1) + 8 * (i >> 1); }
__device__ __forceinline__ const __nv_bfloat16* k_word(const BfSlice& s, int j, int q, int gid, int tig) {
    return s.k.rows + int64_t(s.r0 + k_row(j, gid)) * kDim + 8 * tig + 32 * q;
}
__device__ __forceinline__ const __nv_bfloat16* v_word(const BfSlice& s, int i, int c, int gid, int tig) {
    return s.v.rows + int64_t(s.r0 + v_row(i, tig)) * kDim + 64 * c + 8 * gid;
}

// cp.async of slice s's K (V) words into the stage; rows >= lim are zero-filled and not read.
__device__ __forceinline__ void stage_k(uint4* st, const BfSlice& s, int lim, int lane, int gid, int tig) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int q = 0; q < 8; ++q) cp_async16_or_zero(st + (8 * j + q) * 32 + lane, k_word(s, j, q, gid, tig), k_row(j, gid) < lim);
}
__device__ __forceinline__ void stage_v(uint4* st, const BfSlice& s, int lim, int lane, int gid, int tig) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c)
            cp_async16_or_zero(st + (16 + 4 * i + c) * 32 + lane, v_word(s, i, c, gid, tig), v_row(i, tig) < lim);
}
__device__ __forceinline__ void unstage_k(KRegs<KvDtype::Bf16>& k, const uint4* st, int lane) {
#pragma unroll
    for (int w = 0; w < 16; ++w) k.w[w / 8][w % 8] = st[w * 32 + lane];
}
__device__ __forceinline__ void unstage_v(VRegs<KvDtype::Bf16>& v, const uint4* st, int lane) {
#pragma unroll
    for (int w = 0; w < 16; ++w) v.w[w / 4][w % 4] = st[(16 + w) * 32 + lane];
}

// After the PDL wait: rows [from, s.n) of a slice that was read before it (the rows the previous
// kernel may have written) are loaded again; the other words are kept.
__device__ __forceinline__ void reload_k(KRegs<KvDtype::Bf16>& k, const BfSlice& s, int from, int gid, int tig) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
        if (k_row(j, gid) >= from && k_row(j, gid) < s.n)
#pragma unroll
            for (int q = 0; q < 8; ++q) k.w[j][q] = load_stream16(k_word(s, j, q, gid, tig));
}
__device__ __forceinline__ void reload_v(VRegs<KvDtype::Bf16>& v, const BfSlice& s, int from, int gid, int tig) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
        if (v_row(i, tig) >= from && v_row(i, tig) < s.n)
#pragma unroll
            for (int c = 0; c < 4; ++c) v.w[i][c] = load_stream16(v_word(s, i, c, gid, tig));
}

// grid (n_chunks, n_kv_heads, n_tokens), 128 threads, kPartialSmem bytes of dynamic shared memory:
// attn_mma_partial_kernel's chunk, slices, scores, softmax, P V and merge, in the same order (the
// same bits), with the loads scheduled differently:
// - Before the PDL wait (attention_decode.h, Staged): the position, lane and page table, then the
//   warp's first slice into registers and its second into its shared stage, rows below `settled` =
//   len - n_tokens only (rows a lane's tokens of this call write are at or above it). A block of up
//   to 8 slices (2 pages, the 27B at depth 8192) has every byte in flight before its predecessor ends.
// - After the wait: Q, and rows >= settled of those two slices loaded again (one block per lane and
//   KV head has any).
// - The loop: computing slice i, slice i + 1 waits in the stage (read into registers right after
//   slice i's scores and P V) and slice i + 2 is copied in behind it: two slices ahead (Split: one).
// - The merge takes the warps' weights exp(m_w - M) from shared memory instead of computing them
//   for every output (the same expf of the same operands).
__global__ void __launch_bounds__(kWarps * 32, 2) attn_staged_partial_kernel(AttnDecodeArgs a, int n_chunks) {
    extern __shared__ __align__(16) uint4 stage_all[];
    __shared__ float m_sh[kWarps][kGroupMax], l_sh[kWarps][kGroupMax], f_sh[kWarps][kGroupMax];
    __shared__ __align__(16) uint32_t q_sh[kGroupMax][kQWords];
    ninfer_grid_launch_dependents();
    const int chunk = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
    const auto [len, c0, c1] = chunk_span(a, n_chunks, chunk, t);
    if (c0 >= len) return;
    const int group = a.geo.n_heads / a.geo.n_kv_heads, lane_id = a.lanes[t];
    const int settled = len - a.n_tokens;
    uint4* st = stage_all + warp * kStageWords * 32;
    const int tb0 = c0 + warp * kSlice, tb1 = tb0 + kWarps * kSlice;
    BfSlice cur{}, nxt{};
    KRegs<KvDtype::Bf16> k;
    VRegs<KvDtype::Bf16> v;
    if (tb0 < c1) {
        cur = slice_at<KvDtype::Bf16>(a, lane_id, kvh, tb0, c1);
        BfSlice early = cur;
        early.n = max(0, min(cur.n, settled - tb0));
        load_k(k, early, gid, tig);
        load_v(v, early, gid, tig);
    }
    const bool two = tb1 < c1; // warp-uniform
    if (two) nxt = slice_at<KvDtype::Bf16>(a, lane_id, kvh, tb1, c1);
    const int lim1 = min(nxt.n, settled - tb1);
    if (two) stage_k(st, nxt, lim1, lane, gid, tig);
    cp_async_commit();
    if (two) stage_v(st, nxt, lim1, lane, gid, tig);
    cp_async_commit();
    ninfer_grid_wait(); // PDL: q, the new KV rows and the scratch's readers come from earlier kernels
    stage_q<KvDtype::Bf16>(q_sh, a, t, kvh, group, tid);
    if (tb0 < c1 && tb0 + cur.n > settled) {
        reload_k(k, cur, settled - tb0, gid, tig);
        reload_v(v, cur, settled - tb0, gid, tig);
    }
    __syncthreads();
    float acc[4][4][4] = {};
    float m_run = -INFINITY, l_run = 0.f; // head gid; l_run sums this thread's tokens only
    for (int tb = tb0; tb < c1; tb += kWarps * kSlice) {
        const int tn = tb + kWarps * kSlice, tf = tn + kWarps * kSlice;
        const bool more = tn < c1, far = tf < c1, patch = tb == tb0 && tn + nxt.n > settled; // warp-uniform
        BfSlice fs{};
        if (far) fs = slice_at<KvDtype::Bf16>(a, lane_id, kvh, tf, c1);
        float sc[2][2];
        slice_scores<KvDtype::Bf16>(sc, k, q_sh[gid], tig);
        if (more) {
            cp_async_wait<1>(); // slice i + 1's K (its V may still be in flight)
            unstage_k(k, st, lane);
            if (patch) reload_k(k, nxt, settled - tn, gid, tig);
        }
        __syncwarp(); // the stage's K words are read before the copy below overwrites them
        if (far) stage_k(st, fs, fs.n, lane, gid, tig);
        cp_async_commit();
        float p[4];
        online_softmax(p, m_run, l_run, acc, sc, cur.n, tig);
        slice_pv<KvDtype::Bf16>(acc, v, p);
        if (more) {
            cp_async_wait<1>(); // slice i + 1's V (slice i + 2's K may still be in flight)
            unstage_v(v, st, lane);
            if (patch) reload_v(v, nxt, settled - tn, gid, tig);
        }
        __syncwarp();
        if (far) stage_v(st, fs, fs.n, lane, gid, tig);
        cp_async_commit();
        cur = nxt;
        nxt = fs;
    }
    // ---- merge the four warps as the split kernel does: o = sum_w exp(m_w - M) o_w, in w order.
    cp_async_wait<0>();
    __syncwarp();
    publish_warp(reinterpret_cast<float(*)[kDim]>(st), m_sh[warp], l_sh[warp], acc, m_run, l_run, gid, tig, group);
    __syncthreads();
    if (tid < kWarps * kGroupMax && tid % kGroupMax < group) {
        const int w = tid / kGroupMax, h = tid % kGroupMax;
        float m = m_sh[0][h];
#pragma unroll
        for (int u = 1; u < kWarps; ++u) m = fmaxf(m, m_sh[u][h]);
        f_sh[w][h] = expf(m_sh[w][h] - m); // 0 for an idle warp; m is finite (warp 0 had a slice)
    }
    __syncthreads();
    const float* o_all = reinterpret_cast<const float*>(stage_all);
    for (int i = tid; i < group * kDim; i += kWarps * 32) {
        const int h = i / kDim, d = i % kDim;
        float o = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) o = fmaf(f_sh[w][h], o_all[w * (kStageBytes / 4) + h * kDim + d], o);
        float* part = partial_at(a, t, kvh, group, h, chunk, n_chunks);
        part[d] = o;
        if (d == 0) {
            float m = m_sh[0][h], l = 0.f;
#pragma unroll
            for (int w = 1; w < kWarps; ++w) m = fmaxf(m, m_sh[w][h]);
#pragma unroll
            for (int w = 0; w < kWarps; ++w) l = fmaf(f_sh[w][h], l_sh[w][h], l);
            part[kDim] = m;
            part[kDim + 1] = l;
        }
    }
}

// grid (n_heads, n_tokens), 1024 threads: attn_mma_combine_kernel's sums in its order, with the
// position read before the PDL wait and every load after it (m, l, the quarter's up to 33 partial
// values, the gate) issued at once: one L2 round trip instead of three or four.
constexpr int kPerQuarter = (kMaxChunks + kCombineSplit - 1) / kCombineSplit;
constexpr int kSplitBatch = 16; // the split combine's loads per pass: its term count is a multiple of it
__global__ void __launch_bounds__(kCombineThreads) attn_staged_combine_kernel(AttnDecodeArgs a, int n_chunks) {
    __shared__ float w_sh[kMaxChunks];
    __shared__ float num_sh[kCombineSplit][kDim];
    __shared__ float red[32];
    ninfer_grid_launch_dependents();
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, d = tid % kDim, q = tid / kDim;
    const int used = chunk_split(a.positions[t] + 1, n_chunks).used; // host data: before the wait
    ninfer_grid_wait(); // PDL: the partials come from the previous kernel
    const float* part = a.scratch + (int64_t(t) * a.geo.n_heads + h) * n_chunks * kPartLen;
    const float mc = tid < used ? part[tid * kPartLen + kDim] : -INFINITY;
    const float lc = tid < used ? part[tid * kPartLen + kDim + 1] : 0.f;
    float v[kPerQuarter];
#pragma unroll
    for (int i = 0; i < kPerQuarter; ++i) {
        const int c = q + kCombineSplit * i;
        v[i] = c < used ? part[c * kPartLen + d] : 0.f;
    }
    const float gate = q == 0 ? gate_of(a, t, h, d) : 0.f;
    const float den = chunk_weights(w_sh, kMaxChunks, red, mc, lc, used);
    // The split combine adds terms c = q + 4 i for i < 16 * passes (passes of 16 while c < used);
    // terms past `used` are fmaf(0, 0, num): the same count keeps even a -0 sum's sign the same.
    const int passes = used > q ? (used - q + kCombineSplit * kSplitBatch - 1) / (kCombineSplit * kSplitBatch) : 0;
    const int terms = kSplitBatch * passes;
    float num = 0.f;
#pragma unroll
    for (int i = 0; i < kPerQuarter; ++i)
        if (i < terms) num = fmaf(w_sh[q + kCombineSplit * i], v[i], num);
    if (terms > kPerQuarter) num = num + 0.f; // its terms past chunk kMaxChunks - 1
    num_sh[q][d] = num;
    __syncthreads();
    if (q != 0) return;
    num = ((num_sh[0][d] + num_sh[1][d]) + num_sh[2][d]) + num_sh[3][d];
    gated_store(a, t, h, d, num, den, gate);
}

} // namespace

cudaError_t attn_decode_staged(const AttnDecodeArgs& a, int n_chunks, cudaStream_t stream) {
    static const cudaError_t smem_ok =
        cudaFuncSetAttribute(attn_staged_partial_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kPartialSmem);
    if (smem_ok != cudaSuccess) return smem_ok;
    const dim3 grid(unsigned(n_chunks), unsigned(a.geo.n_kv_heads), unsigned(a.n_tokens));
    const cudaError_t err = launch_pdl(attn_staged_partial_kernel, grid, dim3(kWarps * 32), kPartialSmem, stream, a, n_chunks);
    if (err != cudaSuccess) return err;
    return launch_pdl(attn_staged_combine_kernel, dim3(unsigned(a.geo.n_heads), unsigned(a.n_tokens)),
                      dim3(kCombineThreads), 0, stream, a, n_chunks);
}

} // namespace ninfer::kernels::detail
