// ninfer::kernels - the Wide4 GDN conv and recurrence (gdn_decode_v4.cu), launched by gdn_decode.cu's
// gdn_conv_decode_with / gdn_recurrent_decode_with (the recurrence: grid (n_v_heads * kGdnV4Split,
// n_tokens), kGdnV4Threads threads, thread-block clusters of kGdnV4Split blocks = one V head), the
// conv arithmetic both paths share, and the pieces of a Wide4 token that the verify-window kernels
// (gdn_window.cu) share with it, so that their tokens have its bits. Same arguments and bits as
// Split2; the contracts are kernels/include/ninfer/kernels/gdn_decode.h's and gdn_window.h's.
#pragma once

#include "common.cuh"
#include "ninfer/kernels/gdn_decode.h"
#include "ninfer/kernels/gdn_window.h"

namespace ninfer::kernels::detail {

// Pieces of the conv that both paths' kernels use.
// A conv channel's 4 taps (weights: constant, so they may be read before the PDL wait).
__device__ __forceinline__ float4 conv_taps(const GdnConvArgs& c, int ch) {
    const __nv_bfloat16* w = c.conv_w + int64_t(ch) * 4;
    return make_float4(__bfloat162float(w[0]), __bfloat162float(w[1]), __bfloat162float(w[2]), __bfloat162float(w[3]));
}
// The pre-activation sum_j w_j x_j over the inputs oldest first, in the order of docs/MODEL.md §6's
// reference.
__device__ __forceinline__ float conv_sum(float4 w, const __nv_bfloat16 (&x)[4]) {
    float acc = fmaf(w.x, __bfloat162float(x[0]), 0.f);
    acc = fmaf(w.y, __bfloat162float(x[1]), acc);
    acc = fmaf(w.z, __bfloat162float(x[2]), acc);
    acc = fmaf(w.w, __bfloat162float(x[3]), acc);
    return acc;
}

// The conv output of a pre-activation (bf16-rounded first unless exact); the caller stores it as bf16.
__device__ __forceinline__ float conv_activation(float acc, bool exact) { return silu(exact ? acc : bf16_round(acc)); }

constexpr int kGdnV4Split = 4;                            // blocks (cluster ranks) per V head
constexpr int kGdnV4Cols = kGdnHeadDim / kGdnV4Split;     // 32 state columns per block: one per lane
constexpr int kGdnV4Threads = 4 * kGdnV4Cols;             // warp kq owns rows [32 kq, 32 kq + 32)
constexpr int kGdnV4Rows = kGdnHeadDim / 4;               // rows per warp

// Cluster barrier halves and distributed shared memory stores (PTX ISA 8.0, sm_90).
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// v into the word at local shared address `local` of cluster rank `rank`.
__device__ __forceinline__ void store_to_rank(const void* local, uint32_t rank, float v) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(uint32_t(__cvta_generic_to_shared(local))), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

// The Wide4 recurrence of one token, in pieces that the one-token kernel and the window kernel
// (gdn_window.cu) share, so both do the same arithmetic in the same order. Thread (v = lane, kq =
// warp) of block sr of V head h (QK head r) owns rows [32 kq, 32 kq + 32) of column col = 32 sr + v.
// Its inputs of token row t: q and k dim tid of QK head r (after conv and SiLU), the column's v and
// output gate, and (threads 0 and 32) beta's and the decay's inputs.
struct V4Token {
    float b_in, a_in, z, uq, uk, vv;
};
__device__ __forceinline__ V4Token v4_load_token(const GdnRecurrentArgs& a, int t, int h, int r, int col, int tid, int kq) {
    constexpr int D = kGdnHeadDim;
    V4Token x;
    // beta's and the decay's inputs with the row's loads, not after the norms' shuffles (one round trip).
    x.b_in = 0.f, x.a_in = 0.f;
    if (tid == 0) x.b_in = a.b_f32 ? a.b_f32[int64_t(t) * a.b_stride + h] : __bfloat162float(a.b[int64_t(t) * a.b_stride + h]);
    else if (tid == 32) x.a_in = a.a_f32 ? a.a_f32[int64_t(t) * a.a_stride + h] : __bfloat162float(a.a[int64_t(t) * a.a_stride + h]);
    x.z = kq == 0 ? __bfloat162float(a.z[int64_t(t) * a.z_stride + h * D + col]) : 0.f; // output gate
    const int key_dim = a.n_k_heads * D;
    const __nv_bfloat16* row = a.conv_out + int64_t(t) * a.conv_stride;
    x.uq = __bfloat162float(row[r * D + tid]);
    x.uk = __bfloat162float(row[key_dim + r * D + tid]);
    x.vv = __bfloat162float(row[2 * key_dim + h * D + col]);
    return x;
}
// beta and the decay of V head h's token from its inputs (b, and a + dt_bias through softplus).
__device__ __forceinline__ float v4_beta(float b_in, bool exact) {
    const float sig = 1.f / (1.f + expf(-b_in));
    return exact ? sig : bf16_round(sig);
}
__device__ __forceinline__ float v4_decay(float a_in, float dt_bias, float a_log) {
    const float xa = a_in + dt_bias;
    const float softplus = xa > 20.f ? xa : log1pf(expf(xa));
    return expf(-expf(a_log) * softplus);
}
// A q or k value normed by its head's 4 warp sums of squares (q: scaled by 1 / sqrt(128) too).
__device__ __forceinline__ float v4_q(float u, const float* q_sums) {
    return u * rsqrtf(q_sums[0] + q_sums[1] + q_sums[2] + q_sums[3] + 1e-6f) * rsqrtf(float(kGdnHeadDim));
}
__device__ __forceinline__ float v4_k(float u, const float* k_sums) {
    return u * rsqrtf(k_sums[0] + k_sums[1] + k_sums[2] + k_sums[3] + 1e-6f);
}
// The normed q and k rows into qs / ks (each warp its own 32 rows: only the norms' warp sums and
// beta / decay cross warps, one __syncthreads); returns (beta, decay).
__device__ __forceinline__ float2 v4_prepare(const GdnRecurrentArgs& a, const V4Token& x, float a_log, float dt_bias,
                                             int tid, int kq, float (&qs)[kGdnHeadDim], float (&ks)[kGdnHeadDim],
                                             float (&nred)[8], float (&scal)[2]) {
    const float ssq = warp_sum(x.uq * x.uq), ssk = warp_sum(x.uk * x.uk);
    if ((tid & 31) == 0) {
        nred[kq] = ssq; // Split2's warps 0-3 (q) ...
        nred[4 + kq] = ssk; // ... and 4-7 (k)
    }
    if (tid == 0) scal[0] = v4_beta(x.b_in, a.exact);
    else if (tid == 32) scal[1] = v4_decay(x.a_in, dt_bias, a_log);
    __syncthreads();
    qs[tid] = v4_q(x.uq, nred);
    ks[tid] = v4_k(x.uk, nred + 4);
    __syncwarp(); // warp kq reads only rows [32 kq, 32 kq + 32): its own lanes' qs / ks
    return make_float2(scal[0], scal[1]);
}
// The delta rule in three steps: the decay of the thread's rows s and their k.S partial; the
// column's delta from the 4 row quarters' partials (kq order); the update, each new value stored
// at S (the column's state, row stride 128) as it goes, and the rows' q.S partial.
__device__ __forceinline__ float v4_decay_ks(float (&s)[kGdnV4Rows], const float (&ks)[kGdnHeadDim], int kq, float decay) {
    constexpr int R = kGdnV4Rows;
#pragma unroll
    for (int i = 0; i < R; ++i) s[i] *= decay;
    float part = 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) part = fmaf(s[i], ks[kq * R + i], part);
    return part;
}
__device__ __forceinline__ float v4_delta(float beta, float vv, const float (&red_k)[4][kGdnV4Cols], int v) {
    return beta * (vv - (red_k[0][v] + red_k[1][v] + red_k[2][v] + red_k[3][v]));
}
__device__ __forceinline__ float v4_update(float (&s)[kGdnV4Rows], float* S, const float (&ks)[kGdnHeadDim],
                                           const float (&qs)[kGdnHeadDim], int kq, float delta) {
    constexpr int D = kGdnHeadDim, R = kGdnV4Rows;
    float part = 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
        s[i] = fmaf(ks[kq * R + i], delta, s[i]);
        S[(kq * R + i) * D] = s[i];
        part = fmaf(s[i], qs[kq * R + i], part);
    }
    return part;
}
// The column's output o from the 4 row quarters' q.S partials (kq order), bf16-rounded unless exact.
__device__ __forceinline__ float v4_output(const float (&red_q)[4][kGdnV4Cols], int v, bool exact) {
    const float o = red_q[0][v] + red_q[1][v] + red_q[2][v] + red_q[3][v];
    return exact ? o : bf16_round(o);
}
// One token's delta rule (the steps above, the partials crossing warps through red_k / red_q);
// returns the column's output o in warp 0, 0 in the others.
__device__ __forceinline__ float v4_delta_rule(const GdnRecurrentArgs& a, float (&s)[kGdnV4Rows], float* S,
                                               const float (&qs)[kGdnHeadDim], const float (&ks)[kGdnHeadDim],
                                               float beta, float decay, float vv, int kq, int v,
                                               float (&red_k)[4][kGdnV4Cols], float (&red_q)[4][kGdnV4Cols]) {
    red_k[kq][v] = v4_decay_ks(s, ks, kq, decay);
    __syncthreads();
    red_q[kq][v] = v4_update(s, S, ks, qs, kq, v4_delta(beta, vv, red_k, v));
    __syncthreads();
    // Gated RMSNorm over the head's 128 outputs: warp 0 holds this block's 32.
    return kq == 0 ? v4_output(red_q, v, a.exact) : 0.f;
}
// Warp 0's y of token row t from its o and the head's 4 sums of squares (Split2's order:
// (0 + (g0 + g1)) + (g2 + g3)).
__device__ __forceinline__ void v4_store_y(const GdnRecurrentArgs& a, int t, int h, int col, float o, const float* parts,
                                           float norm_w, float z) {
    float sum = 0.f;
    sum += parts[0] + parts[1];
    sum += parts[2] + parts[3];
    const float var = sum / float(kGdnHeadDim);
    const float nrm = a.exact ? o * rsqrtf(var + a.eps) : bf16_round(o * rsqrtf(var + a.eps));
    const float wn = a.exact ? norm_w * nrm : bf16_round(norm_w * nrm);
    a.y[int64_t(t) * a.y_stride + h * kGdnHeadDim + col] = __float2bfloat16(wn * silu(z));
}

// launch_pdl with thread-block clusters of `split` consecutive blocks along x (a V head's blocks).
template <class... Params, class... Args>
cudaError_t launch_head_clusters(void (*kernel)(Params...), dim3 grid, int split, int threads, cudaStream_t stream,
                                 Args&&... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(unsigned(threads));
    cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = unsigned(split);
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 2;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
// The one-token kernels' argument checks (gdn_decode.cu); the *_buffers_ok halves leave out the
// slots and the token count, which verify windows (gdn_window.cu) carry themselves.
bool conv_buffers_ok(const GdnConvArgs& a);
bool recurrent_buffers_ok(const GdnRecurrentArgs& a);
bool conv_args_ok(const GdnConvArgs& a);
bool recurrent_args_ok(const GdnRecurrentArgs& a);
// What the host can check of verify windows (gdn_window.h; gdn_window.cu): their count, sizes, rows,
// distinct slots, and the snapshots a launch writes (conv_snap, state_snap) present when n_tokens > 1.
bool windows_ok(const GdnWindows& windows, bool conv_snap, bool state_snap);

using GdnRecurrentKernel = void (*)(GdnRecurrentArgs);
// The kernel to launch: with state_settled the slot and the state are read before the PDL wait.
GdnRecurrentKernel gdn_recurrent_v4_kernel(bool state_settled);
// The Wide4 conv: Split2's grid (conv_dim / 256 blocks of 256 threads, n_tokens) and arithmetic; with
// state_settled the taps, the slot and the 3 conv-state inputs are read before the PDL wait.
using GdnConvKernel = void (*)(GdnConvArgs);
GdnConvKernel gdn_conv_v4_kernel(bool state_settled);

} // namespace ninfer::kernels::detail
