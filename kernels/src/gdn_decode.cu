// ninfer::kernels - Gated DeltaNet decode: conv+SiLU kernel and the fp32 delta-rule step.
#include "common.cuh"
#include "ninfer/kernels/gdn_decode.h"

namespace ninfer::kernels {

namespace detail {

__global__ void gdn_conv_decode_kernel(GdnConvArgs a) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const int t = blockIdx.y;
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= a.conv_dim) return;
    __nv_bfloat16* st = a.conv_state + int64_t(a.slots[t]) * 3 * a.conv_dim;
    const __nv_bfloat16 in[4] = {st[ch], st[a.conv_dim + ch], st[2 * a.conv_dim + ch],
                                 a.qkv[int64_t(t) * a.qkv_stride + ch]};
    const __nv_bfloat16* w = a.conv_w + int64_t(ch) * 4;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) acc = fmaf(__bfloat162float(w[j]), __bfloat162float(in[j]), acc);
    const float conv = a.exact ? acc : bf16_round(acc);
    a.out[int64_t(t) * a.out_stride + ch] = __float2bfloat16(silu(conv));
    st[ch] = in[1];
    st[a.conv_dim + ch] = in[2];
    st[2 * a.conv_dim + ch] = in[3];
}

// grid (n_v_heads, n_tokens), 512 threads: v = tid % 128 is the state column, kq = tid / 128 picks
// 32 of the 128 state rows; each thread keeps its 32 state values in registers.
constexpr int kGdnThreads = 512;

__global__ void __launch_bounds__(kGdnThreads) gdn_recurrent_decode_kernel(GdnRecurrentArgs a) {
    constexpr int D = kGdnHeadDim;
    __shared__ float qs[D], ks[D], red[4][D], scal[4], norm_red[4];
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
    const int v = tid & (D - 1), kq = tid >> 7, lane = tid & 31, warp = tid >> 5;
    const int r = h / (a.n_v_heads / a.n_k_heads);
    const int key_dim = a.n_k_heads * D;
    const __nv_bfloat16* row = a.conv_out + int64_t(t) * a.conv_stride;

    // q (threads 0..127) and k (128..255) with their l2 norms.
    float u = 0.f;
    if (tid < 2 * D) u = __bfloat162float(row[(tid < D ? 0 : key_dim) + r * D + v]);
    float ss = warp_sum(u * u);
    if (lane == 0 && warp < 8) red[0][warp] = ss;
    __syncthreads();
    if (tid < 2 * D) {
        const int base = tid < D ? 0 : 4;
        const float sum = red[0][base] + red[0][base + 1] + red[0][base + 2] + red[0][base + 3];
        const float nrm = u * rsqrtf(sum + 1e-6f);
        if (tid < D) qs[v] = nrm * rsqrtf(float(D));
        else ks[v] = nrm;
    }
    if (tid == 0) {
        const float bb = a.b_f32 ? a.b_f32[int64_t(t) * a.b_stride + h] : __bfloat162float(a.b[int64_t(t) * a.b_stride + h]);
        const float sig = 1.f / (1.f + expf(-bb));
        const float beta = a.exact ? sig : bf16_round(sig);
        const float x = (a.a_f32 ? a.a_f32[int64_t(t) * a.a_stride + h] : __bfloat162float(a.a[int64_t(t) * a.a_stride + h])) +
                        a.dt_bias[h];
        const float softplus = x > 20.f ? x : log1pf(expf(x));
        scal[0] = beta;
        scal[1] = expf(-expf(a.a_log[h]) * softplus);
    }
    __syncthreads();
    const float beta = scal[0], decay = scal[1];
    const float vv = __bfloat162float(row[2 * key_dim + h * D + v]);

    float* S = a.state + (int64_t(a.slots[t]) * a.n_v_heads + h) * D * D;
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = S[(kq * 32 + i) * D + v] * decay;
    float part = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) part = fmaf(s[i], ks[kq * 32 + i], part);
    red[kq][v] = part;
    __syncthreads();
    const float sk = red[0][v] + red[1][v] + red[2][v] + red[3][v];
    const float delta = beta * (vv - sk);
    __syncthreads();
    part = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        s[i] = fmaf(ks[kq * 32 + i], delta, s[i]);
        S[(kq * 32 + i) * D + v] = s[i];
        part = fmaf(s[i], qs[kq * 32 + i], part);
    }
    red[kq][v] = part;
    __syncthreads();
    // Gated RMSNorm over the head's 128 outputs (threads with kq == 0: warps 0..3).
    float o = 0.f;
    if (kq == 0) o = red[0][v] + red[1][v] + red[2][v] + red[3][v];
    if (!a.exact) o = bf16_round(o);
    const float osq = warp_sum(o * o);
    if (lane == 0 && warp < 4) norm_red[warp] = osq;
    __syncthreads();
    if (kq == 0) {
        const float var = (norm_red[0] + norm_red[1] + norm_red[2] + norm_red[3]) / float(D);
        const float nrm = a.exact ? o * rsqrtf(var + a.eps) : bf16_round(o * rsqrtf(var + a.eps));
        const float wn = a.exact ? __bfloat162float(a.norm_w[v]) * nrm : bf16_round(__bfloat162float(a.norm_w[v]) * nrm);
        const float z = __bfloat162float(a.z[int64_t(t) * a.z_stride + h * D + v]);
        a.y[int64_t(t) * a.y_stride + h * D + v] = __float2bfloat16(wn * silu(z));
    }
}

} // namespace detail

cudaError_t gdn_conv_decode(const GdnConvArgs& a, cudaStream_t stream) {
    if (!a.qkv || !a.conv_w || !a.conv_state || !a.slots || !a.out || a.conv_dim < 1 || a.n_tokens < 1 ||
        a.n_tokens > 65535)
        return cudaErrorInvalidValue;
    const dim3 grid(unsigned((a.conv_dim + 255) / 256), unsigned(a.n_tokens));
    return launch_pdl(detail::gdn_conv_decode_kernel, grid, dim3(256), 0, stream, a);
}

cudaError_t gdn_recurrent_decode(const GdnRecurrentArgs& a, cudaStream_t stream) {
    if (!a.conv_out || !a.z || !(a.a || a.a_f32) || !(a.b || a.b_f32) || !a.a_log || !a.dt_bias || !a.norm_w || !a.state || !a.slots ||
        !a.y || a.n_k_heads < 1 || a.n_v_heads < a.n_k_heads || a.n_v_heads % a.n_k_heads != 0 ||
        a.n_tokens < 1 || a.n_tokens > 65535)
        return cudaErrorInvalidValue;
    const dim3 grid(unsigned(a.n_v_heads), unsigned(a.n_tokens));
    return launch_pdl(detail::gdn_recurrent_decode_kernel, grid, dim3(detail::kGdnThreads), 0, stream, a);
}

} // namespace ninfer::kernels
