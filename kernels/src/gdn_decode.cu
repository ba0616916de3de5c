// ninfer::kernels - Gated DeltaNet decode: conv+SiLU kernel, the fp32 delta-rule step (Split2, the tests' reference) and the path choice.
#include "common.cuh"
#include "gdn_decode_v4.cuh"
#include "ninfer/kernels/gdn_decode.h"

#include <cooperative_groups.h>
#include <cstdlib>

namespace cg = cooperative_groups;

namespace ninfer::kernels {

namespace detail {

// One conv channel of token row `in` on the lane's conv state st: returns silu(conv) and shifts the
// state. Each channel must have exactly one caller per step (the shift is in place).
__device__ __forceinline__ float conv_channel(const GdnConvArgs& c, float4 w, __nv_bfloat16* st, const __nv_bfloat16* in,
                                              int ch) {
    const __nv_bfloat16 x[4] = {st[ch], st[c.conv_dim + ch], st[2 * c.conv_dim + ch], in[ch]};
    const float acc = conv_sum(w, x);
    st[ch] = x[1];
    st[c.conv_dim + ch] = x[2];
    st[2 * c.conv_dim + ch] = x[3];
    return silu(c.exact ? acc : bf16_round(acc));
}

__global__ void gdn_conv_decode_kernel(GdnConvArgs a) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const int t = blockIdx.y;
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= a.conv_dim) return;
    __nv_bfloat16* st = a.conv_state + int64_t(a.slots[t]) * 3 * a.conv_dim;
    a.out[int64_t(t) * a.out_stride + ch] =
        __float2bfloat16(conv_channel(a, conv_taps(a, ch), st, a.qkv + int64_t(t) * a.qkv_stride, ch));
}

// grid (n_v_heads * kGdnSplit, n_tokens), 256 threads, in thread-block clusters. A head's state
// columns are independent apart from the gated norm, so block sr of head h owns columns
// [64 sr, 64 sr + 64): 32 KB of state read and written per block (one block per head kept 48 of
// 132 SMs busy, each bound by its own load rate). Thread (v = tid % 64, kq = tid / 64) keeps rows
// [32 kq, 32 kq + 32) of column 64 sr + v in registers; a warp reads 128 contiguous bytes per row.
// The norm's sum of squares crosses the head's two blocks through distributed shared memory and is
// added in rank order, the same in both.
constexpr int kGdnSplit = 2;
constexpr int kGdnCols = kGdnHeadDim / kGdnSplit;
constexpr int kGdnThreads = 256;

__global__ void __launch_bounds__(kGdnThreads) gdn_recurrent_decode_kernel(GdnRecurrentArgs a) {
    constexpr int D = kGdnHeadDim;
    __shared__ float qs[D], ks[D], red[4][kGdnCols], nred[8], scal[2], norm_part;
    ninfer_grid_launch_dependents();
    cg::cluster_group cluster = cg::this_cluster();
    const int crank = int(cluster.block_rank());
    const int h = blockIdx.x / kGdnSplit, sr = blockIdx.x % kGdnSplit, t = blockIdx.y, tid = threadIdx.x;
    const int v = tid % kGdnCols, kq = tid / kGdnCols, lane = tid & 31, warp = tid >> 5;
    const int col = sr * kGdnCols + v;
    const int r = h / (a.n_v_heads / a.n_k_heads);
    const int key_dim = a.n_k_heads * D;
    // Weights before the wait (constant).
    const float a_log = a.a_log[h], dt_bias = a.dt_bias[h], norm_w = __bfloat162float(a.norm_w[col]);
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const int slot = a.slots[t];
    // The state's loads go first: they are most of the bytes and need only the slot.
    float* S = a.state + (int64_t(slot) * a.n_v_heads + h) * D * D + col;
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = S[(kq * 32 + i) * D];
    const float z = kq == 0 ? __bfloat162float(a.z[int64_t(t) * a.z_stride + h * D + col]) : 0.f; // output gate

    // u: q (tid < 128) or k (tid >= 128) of QK head r, dim tid % 128, after conv and SiLU.
    const __nv_bfloat16* row = a.conv_out + int64_t(t) * a.conv_stride;
    const float u = __bfloat162float(row[(tid < D ? 0 : key_dim) + r * D + tid % D]);
    const float vv = __bfloat162float(row[2 * key_dim + h * D + col]);
    const float ss = warp_sum(u * u);
    if (lane == 0) nred[warp] = ss; // warps 0-3: q, 4-7: k
    if (tid == 0) {
        const float bb = a.b_f32 ? a.b_f32[int64_t(t) * a.b_stride + h] : __bfloat162float(a.b[int64_t(t) * a.b_stride + h]);
        const float sig = 1.f / (1.f + expf(-bb));
        const float x = (a.a_f32 ? a.a_f32[int64_t(t) * a.a_stride + h] : __bfloat162float(a.a[int64_t(t) * a.a_stride + h])) +
                        dt_bias;
        const float softplus = x > 20.f ? x : log1pf(expf(x));
        scal[0] = a.exact ? sig : bf16_round(sig);
        scal[1] = expf(-expf(a_log) * softplus);
    }
    __syncthreads();
    if (tid < D) qs[tid] = u * rsqrtf(nred[0] + nred[1] + nred[2] + nred[3] + 1e-6f) * rsqrtf(float(D));
    else ks[tid - D] = u * rsqrtf(nred[4] + nred[5] + nred[6] + nred[7] + 1e-6f);
    __syncthreads();
    const float beta = scal[0], decay = scal[1];

#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] *= decay;
    float part = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) part = fmaf(s[i], ks[kq * 32 + i], part);
    red[kq][v] = part;
    __syncthreads();
    const float delta = beta * (vv - (red[0][v] + red[1][v] + red[2][v] + red[3][v]));
    __syncthreads();
    part = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        s[i] = fmaf(ks[kq * 32 + i], delta, s[i]);
        S[(kq * 32 + i) * D] = s[i];
        part = fmaf(s[i], qs[kq * 32 + i], part);
    }
    red[kq][v] = part;
    __syncthreads();
    // Gated RMSNorm over the head's 128 outputs: this block's 64 (warps 0, 1), then both halves.
    float o = red[0][v] + red[1][v] + red[2][v] + red[3][v];
    if (!a.exact) o = bf16_round(o);
    const float osq = warp_sum(o * o);
    if (lane == 0 && warp < 2) nred[warp] = osq;
    __syncthreads();
    if (tid == 0) norm_part = nred[0] + nred[1];
    cluster.sync(); // every rank's norm_part is written
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kGdnSplit; ++i) sum += *cluster.map_shared_rank(&norm_part, crank - sr + i);
    if (kq == 0) {
        const float var = sum / float(D);
        const float nrm = a.exact ? o * rsqrtf(var + a.eps) : bf16_round(o * rsqrtf(var + a.eps));
        const float wn = a.exact ? norm_w * nrm : bf16_round(norm_w * nrm);
        a.y[int64_t(t) * a.y_stride + h * D + col] = __float2bfloat16(wn * silu(z));
    }
    cluster.sync(); // no block leaves while a peer may still read its shared memory
}

// launch_pdl with thread-block clusters of the `split` blocks of one head (gdn_decode_v4.cuh).
cudaError_t launch_recurrence(GdnRecurrentKernel kernel, int split, int threads, cudaStream_t stream,
                              const GdnRecurrentArgs& a) {
    return launch_head_clusters(kernel, dim3(unsigned(a.n_v_heads * split), unsigned(a.n_tokens)), split, threads, stream, a);
}

bool recurrent_buffers_ok(const GdnRecurrentArgs& a) {
    return a.conv_out && a.z && (a.a || a.a_f32) && (a.b || a.b_f32) && a.a_log && a.dt_bias && a.norm_w && a.state &&
           a.y && a.n_k_heads >= 1 && a.n_v_heads >= a.n_k_heads && a.n_v_heads % a.n_k_heads == 0;
}
bool conv_buffers_ok(const GdnConvArgs& a) { return a.qkv && a.conv_w && a.conv_state && a.out && a.conv_dim >= 1; }
bool recurrent_args_ok(const GdnRecurrentArgs& a) {
    return recurrent_buffers_ok(a) && a.slots && a.n_tokens >= 1 && a.n_tokens <= 65535;
}
bool conv_args_ok(const GdnConvArgs& a) { return conv_buffers_ok(a) && a.slots && a.n_tokens >= 1 && a.n_tokens <= 65535; }

} // namespace detail

cudaError_t gdn_conv_decode_with(const GdnConvArgs& a, GdnDecodePath path, cudaStream_t stream) {
    if (!detail::conv_args_ok(a)) return cudaErrorInvalidValue;
    const dim3 grid(unsigned((a.conv_dim + 255) / 256), unsigned(a.n_tokens));
    return launch_pdl(path == GdnDecodePath::Wide4 ? detail::gdn_conv_v4_kernel(a.state_settled) : detail::gdn_conv_decode_kernel,
                      grid, dim3(256), 0, stream, a);
}

cudaError_t gdn_conv_decode(const GdnConvArgs& a, cudaStream_t stream) {
    return gdn_conv_decode_with(a, GdnDecodePath::Wide4, stream);
}

cudaError_t gdn_recurrent_decode_with(const GdnRecurrentArgs& a, GdnDecodePath path, cudaStream_t stream) {
    if (!detail::recurrent_args_ok(a)) return cudaErrorInvalidValue;
    if (path == GdnDecodePath::Wide4)
        return detail::launch_recurrence(detail::gdn_recurrent_v4_kernel(a.state_settled), detail::kGdnV4Split,
                                         detail::kGdnV4Threads, stream, a);
    return detail::launch_recurrence(detail::gdn_recurrent_decode_kernel, detail::kGdnSplit, detail::kGdnThreads, stream, a);
}

cudaError_t gdn_recurrent_decode(const GdnRecurrentArgs& a, cudaStream_t stream) {
    return gdn_recurrent_decode_with(a, GdnDecodePath::Wide4, stream);
}

} // namespace ninfer::kernels
