// ninfer::kernels - the vision tower's element-wise ops, LayerNorm, position resample and segment attention.
#include "activation.cuh"
#include "common.cuh"
#include "ninfer/kernels/vision.h"

#include <algorithm>

namespace ninfer::kernels {

namespace detail {

constexpr int kVisionThreads = 256;

unsigned grid_for(int64_t n) { return unsigned(std::min<int64_t>((n + kVisionThreads - 1) / kVisionThreads, 65535)); }

__global__ void to_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* y) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] = __float2bfloat16(x[i]);
}

// The GELU forms are activation.cuh's, shared with the GEMM epilogue (gemm.h: bit-equal fusion).
__device__ __forceinline__ float apply_act(float v, VisionAct act) {
    if (act == VisionAct::GeluTanh) return gelu_tanh(v);
    if (act == VisionAct::GeluErf) return gelu_erf(v);
    return v;
}

__global__ void bias_act_kernel(float* y, int64_t ld, const float* bias, int rows, int cols, VisionAct act,
                                __nv_bfloat16* out, int64_t ld_out) {
    const int64_t n = int64_t(rows) * cols;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        const float v = apply_act(y[r * ld + c] + (bias ? bias[c] : 0.f), act);
        y[r * ld + c] = v;
        if (out) out[r * ld_out + c] = __float2bfloat16(v);
    }
}

__global__ void residual_kernel(float* x, int64_t ld, const float* y, int64_t ld_y, const float* bias, int rows,
                                int cols) {
    const int64_t n = int64_t(rows) * cols;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        x[r * ld + c] += y[r * ld_y + c] + (bias ? bias[c] : 0.f);
    }
}

__global__ void layer_norm_kernel(const float* x, int64_t ld, const float* w, const float* b, int cols, float eps,
                                  __nv_bfloat16* out, int64_t ld_out) {
    __shared__ float red[32];
    const float* row = x + int64_t(blockIdx.x) * ld;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    const float mean = block_sum(s, red) / float(cols);
    float q = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) q += (row[c] - mean) * (row[c] - mean);
    const float r = rsqrtf(block_sum(q, red) / float(cols) + eps);
    __nv_bfloat16* o = out + int64_t(blockIdx.x) * ld_out;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = __float2bfloat16((row[c] - mean) * r * w[c] + b[c]);
}

__global__ void position_add_kernel(float* x, int64_t ld, const float* table, const int32_t* taps,
                                    const float* weights, int rows, int cols) {
    const int64_t n = int64_t(rows) * cols;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        float add = 0.f;
#pragma unroll
        for (int k = 0; k < 4; ++k) add += table[int64_t(taps[4 * r + k]) * cols + c] * weights[4 * r + k];
        x[r * ld + c] += add;
    }
}

// Rotate-half of element d of a head row x (f32) with the row's cos/sin tables.
__device__ __forceinline__ float rotated(const float* x, int d, int half, const float* cs, const float* sn) {
    const int i = d < half ? d : d - half;
    return d < half ? x[d] * cs[i] - x[d + half] * sn[i] : x[d] * cs[i] + x[d - half] * sn[i];
}

constexpr int kAttnQueries = 8; // queries per block: each K row read once serves all of them

// grid (segments * tiles per segment, heads), 256 threads (warp w reduces query w); dynamic
// shared memory: kAttnQueries x segment floats of scores.
__global__ void attention_kernel(const float* qkv, int64_t ld, const float* cos, const float* sin, int segment,
                                 int heads, int hd, __nv_bfloat16* out, int64_t ld_out) {
    extern __shared__ float scores[]; // [kAttnQueries][segment]
    __shared__ float qs[kAttnQueries][128];
    const int tiles = (segment + kAttnQueries - 1) / kAttnQueries;
    const int seg = blockIdx.x / tiles, q0 = (blockIdx.x % tiles) * kAttnQueries;
    const int h = blockIdx.y, half = hd / 2, width = heads * hd;
    const int nq = min(kAttnQueries, segment - q0);
    const int64_t seg0 = int64_t(seg) * segment;
    const float scale = rsqrtf(float(hd));
    for (int i = threadIdx.x; i < kAttnQueries * hd; i += blockDim.x) {
        const int q = i / hd, d = i % hd;
        const int64_t r = seg0 + q0 + min(q, nq - 1);
        qs[q][d] = rotated(qkv + r * ld + h * hd, d, half, cos + r * half, sin + r * half);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < segment; j += blockDim.x) {
        const int64_t kr = seg0 + j;
        const float* k = qkv + kr * ld + width + h * hd;
        const float *cs = cos + kr * half, *sn = sin + kr * half;
        float acc[kAttnQueries] = {};
        for (int d = 0; d < hd; ++d) {
            const float kd = rotated(k, d, half, cs, sn);
#pragma unroll
            for (int q = 0; q < kAttnQueries; ++q) acc[q] += qs[q][d] * kd;
        }
#pragma unroll
        for (int q = 0; q < kAttnQueries; ++q) scores[q * segment + j] = acc[q] * scale;
    }
    __syncthreads();
    // Softmax per query, one warp each (the sums stay in that warp's lanes, written back as p / sum).
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp < nq) {
        float* row = scores + warp * segment;
        float m = -INFINITY;
        for (int j = lane; j < segment; j += 32) m = fmaxf(m, row[j]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        float s = 0.f;
        for (int j = lane; j < segment; j += 32) {
            const float p = expf(row[j] - m);
            row[j] = p;
            s += p;
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        const float inv = 1.f / s;
        for (int j = lane; j < segment; j += 32) row[j] *= inv;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nq * hd; i += blockDim.x) {
        const int q = i / hd, d = i % hd;
        const float* v = qkv + seg0 * ld + 2 * width + h * hd + d;
        const float* p = scores + q * segment;
        float o = 0.f;
        for (int j = 0; j < segment; ++j) o += p[j] * v[int64_t(j) * ld];
        out[(seg0 + q0 + q) * ld_out + h * hd + d] = __float2bfloat16(o);
    }
}

__global__ void rotate_qkv_kernel(const float* qkv, int64_t ld, const float* cos, const float* sin, int rows,
                                  int heads, int hd, __nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v,
                                  int64_t ld_qkv) {
    const int width = heads * hd, half = hd / 2;
    const int64_t n = int64_t(rows) * width;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / width;
        const int c = int(i % width), h = c / hd, d = c % hd;
        const float *row = qkv + r * ld, *cs = cos + r * half, *sn = sin + r * half;
        q[r * ld_qkv + c] = __float2bfloat16(rotated(row + h * hd, d, half, cs, sn));
        k[r * ld_qkv + c] = __float2bfloat16(rotated(row + width + h * hd, d, half, cs, sn));
        v[r * ld_qkv + c] = __float2bfloat16(row[2 * width + c]);
    }
}

} // namespace detail

cudaError_t vision_to_bf16(const float* x, int64_t n, __nv_bfloat16* y, cudaStream_t stream) {
    if (!x || !y || n < 1) return cudaErrorInvalidValue;
    detail::to_bf16_kernel<<<detail::grid_for(n), detail::kVisionThreads, 0, stream>>>(x, n, y);
    return cudaGetLastError();
}

cudaError_t vision_bias_act(float* y, int64_t ld, const float* bias, int rows, int cols, VisionAct act,
                            __nv_bfloat16* out, int64_t ld_out, cudaStream_t stream) {
    if (!y || rows < 1 || cols < 1 || ld < cols || (out && ld_out < cols)) return cudaErrorInvalidValue;
    detail::bias_act_kernel<<<detail::grid_for(int64_t(rows) * cols), detail::kVisionThreads, 0, stream>>>(
        y, ld, bias, rows, cols, act, out, ld_out);
    return cudaGetLastError();
}

cudaError_t vision_residual(float* x, int64_t ld, const float* y, int64_t ld_y, const float* bias, int rows, int cols,
                            cudaStream_t stream) {
    if (!x || !y || rows < 1 || cols < 1 || ld < cols || ld_y < cols) return cudaErrorInvalidValue;
    detail::residual_kernel<<<detail::grid_for(int64_t(rows) * cols), detail::kVisionThreads, 0, stream>>>(
        x, ld, y, ld_y, bias, rows, cols);
    return cudaGetLastError();
}

cudaError_t vision_layer_norm(const float* x, int64_t ld, const float* w, const float* b, int rows, int cols, float eps,
                              __nv_bfloat16* out, int64_t ld_out, cudaStream_t stream) {
    if (!x || !w || !b || !out || rows < 1 || cols < 1 || ld < cols || ld_out < cols) return cudaErrorInvalidValue;
    detail::layer_norm_kernel<<<unsigned(rows), detail::kVisionThreads, 0, stream>>>(x, ld, w, b, cols, eps, out,
                                                                                    ld_out);
    return cudaGetLastError();
}

cudaError_t vision_position_add(float* x, int64_t ld, const float* table, const int32_t* taps, const float* weights,
                                int rows, int cols, cudaStream_t stream) {
    if (!x || !table || !taps || !weights || rows < 1 || cols < 1 || ld < cols) return cudaErrorInvalidValue;
    detail::position_add_kernel<<<detail::grid_for(int64_t(rows) * cols), detail::kVisionThreads, 0, stream>>>(
        x, ld, table, taps, weights, rows, cols);
    return cudaGetLastError();
}

cudaError_t vision_attention(const float* qkv, int64_t ld, const float* cos, const float* sin, int rows, int segment,
                             int heads, int head_dim, __nv_bfloat16* out, int64_t ld_out, cudaStream_t stream) {
    if (!qkv || !cos || !sin || !out || rows < 1 || segment < 1 || segment > kVisionMaxSegment || rows % segment ||
        heads < 1 || head_dim < 2 || head_dim % 2 || head_dim > 128 || ld < 3 * int64_t(heads) * head_dim ||
        ld_out < int64_t(heads) * head_dim || heads > 65535)
        return cudaErrorInvalidValue;
    const size_t smem = size_t(detail::kAttnQueries) * segment * sizeof(float);
    cudaError_t err = cudaFuncSetAttribute(detail::attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(smem));
    if (err != cudaSuccess) return err;
    const int64_t blocks = int64_t(rows / segment) * ((segment + detail::kAttnQueries - 1) / detail::kAttnQueries);
    detail::attention_kernel<<<dim3(unsigned(blocks), unsigned(heads)), 32 * detail::kAttnQueries, smem, stream>>>(
        qkv, ld, cos, sin, segment, heads, head_dim, out, ld_out);
    return cudaGetLastError();
}

cudaError_t vision_rotate_qkv(const float* qkv, int64_t ld, const float* cos, const float* sin, int rows, int heads,
                              int head_dim, __nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v, int64_t ld_qkv,
                              cudaStream_t stream) {
    const int64_t width = int64_t(heads) * head_dim;
    if (!qkv || !cos || !sin || !q || !k || !v || rows < 1 || heads < 1 || head_dim < 2 || head_dim % 2 ||
        ld < 3 * width || ld_qkv < width)
        return cudaErrorInvalidValue;
    detail::rotate_qkv_kernel<<<detail::grid_for(rows * width), detail::kVisionThreads, 0, stream>>>(
        qkv, ld, cos, sin, rows, heads, head_dim, q, k, v, ld_qkv);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
