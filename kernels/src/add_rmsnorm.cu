// ninfer::kernels - the CUDA runner's f32 residual stream: residual add + offset RMSNorm (runner_ops.h).
#include "common.cuh"
#include "int8_x.cuh"
#include "ninfer/kernels/runner_ops.h"

namespace ninfer::kernels {

namespace detail {

// One block per row, strided over dim (the fallback for dims the register path does not take).
// y8.q given: the block also keeps its row's y and y_lo in shared memory (row_copy: dim + dim bf16,
// the launch's dynamic shared memory) and quantises them into y8 once the row is complete.
extern __shared__ __align__(16) __nv_bfloat16 row_copy[];
__device__ __forceinline__ void norm_rows_int8(bool with_lo, int dim, const Int8X& y8) {
    if (!y8.q) return;
    __syncthreads();
    const int t = blockIdx.x, units = int(int8_x_units(dim));
    quantise_rows_to<false>(row_copy, with_lo ? row_copy + dim : nullptr, 0, 1, t, dim, 0, units, y8, threadIdx.x,
                            blockDim.x);
    if (t == 0) zero_int8_slots(y8.d, gridDim.x, units, threadIdx.x, blockDim.x);
}

__global__ void add_rmsnorm_kernel(float* x, int64_t x_stride, const float* add, int64_t add_stride,
                                   const float* w, __nv_bfloat16* y, int64_t y_stride, float* y32,
                                   __nv_bfloat16* y_lo, int dim, float eps, Int8X y8) {
    __shared__ float red[32];
    ninfer_grid_launch_dependents(); // the next GEMV may start streaming its weights
    ninfer_grid_wait();
    const int t = blockIdx.x;
    float* xr = x + t * x_stride;
    float ss = 0.f;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
        float v = xr[c];
        if (add) {
            v += add[t * add_stride + c];
            xr[c] = v;
        }
        ss += v * v;
    }
    const float inv = rsqrtf(block_sum(ss, red) / float(dim) + eps);
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
        const float v = xr[c] * inv * (1.f + w[c]);
        const __nv_bfloat16 hi = __float2bfloat16(v);
        y[t * y_stride + c] = hi;
        if (y32) y32[t * y_stride + c] = v;
        const __nv_bfloat16 lo = __float2bfloat16(v - __bfloat162float(hi));
        if (y_lo) y_lo[t * y_stride + c] = lo;
        if (y8.q) row_copy[c] = hi, row_copy[dim + c] = lo;
    }
    norm_rows_int8(y_lo != nullptr, dim, y8);
}

// One block per row, the row in registers (kNormVecs float4 per thread): one read of x (and add),
// so a 5120-wide row costs one load round trip instead of a 20-step strided loop.
constexpr int kNormVecs = 4, kNormMaxThreads = 1024;
__global__ void __launch_bounds__(kNormMaxThreads) add_rmsnorm_vec_kernel(
    float* x, int64_t x_stride, const float* add, int64_t add_stride, const float* w, __nv_bfloat16* y,
    int64_t y_stride, float* y32, __nv_bfloat16* y_lo, int dim, float eps, Int8X y8) {
    __shared__ float red[32];
    ninfer_grid_launch_dependents(); // the next GEMV may start streaming its weights
    const int t = blockIdx.x, nv = dim / 4;
    // The norm weights are constant: read before the wait, so their HBM round trip overlaps the
    // previous kernel instead of following the sum of squares.
    float4 wv[kNormVecs];
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c < nv) wv[i] = reinterpret_cast<const float4*>(w)[c];
    }
    ninfer_grid_wait();
    float4* xr = reinterpret_cast<float4*>(x + t * x_stride);
    const float4* ar = add ? reinterpret_cast<const float4*>(add + t * add_stride) : nullptr;
    // Every load before the first store: the compiler cannot move a load of x or add above a store
    // to x (they might alias), so a load-add-store loop took one round trip per vector.
    float4 v[kNormVecs], b[kNormVecs];
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c < nv) {
            v[i] = xr[c];
            if (ar) b[i] = ar[c];
        }
    }
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c >= nv) break;
        if (ar) {
            v[i] = make_float4(v[i].x + b[i].x, v[i].y + b[i].y, v[i].z + b[i].z, v[i].w + b[i].w);
            xr[c] = v[i];
        }
        ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
    }
    const float inv = rsqrtf(block_sum(ss, red) / float(dim) + eps);
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c >= nv) break;
        const float o[4] = {v[i].x * inv * (1.f + wv[i].x), v[i].y * inv * (1.f + wv[i].y), v[i].z * inv * (1.f + wv[i].z),
                            v[i].w * inv * (1.f + wv[i].w)};
        const int64_t at = t * y_stride + 4 * c;
        __nv_bfloat16 hi[4], lo[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            hi[e] = __float2bfloat16(o[e]);
            lo[e] = __float2bfloat16(o[e] - __bfloat162float(hi[e]));
        }
        *reinterpret_cast<uint2*>(y + at) = *reinterpret_cast<const uint2*>(hi);
        if (y32) *reinterpret_cast<float4*>(y32 + at) = make_float4(o[0], o[1], o[2], o[3]);
        if (y_lo) *reinterpret_cast<uint2*>(y_lo + at) = *reinterpret_cast<const uint2*>(lo);
        if (y8.q) {
            *reinterpret_cast<uint2*>(row_copy + 4 * c) = *reinterpret_cast<const uint2*>(hi);
            *reinterpret_cast<uint2*>(row_copy + dim + 4 * c) = *reinterpret_cast<const uint2*>(lo);
        }
    }
    norm_rows_int8(y_lo != nullptr, dim, y8);
}

} // namespace detail

cudaError_t add_rmsnorm(float* x, int64_t x_stride, const float* add, int64_t add_stride, const float* w,
                        __nv_bfloat16* y, int64_t y_stride, float* y32, int n_tokens, int dim, float eps,
                        cudaStream_t stream, __nv_bfloat16* y_lo, const Int8X& y8) {
    if (!x || !w || !y || n_tokens < 1 || n_tokens > 65535 || dim < 1) return cudaErrorInvalidValue;
    if (y8.q && (n_tokens > kGemvMaxTokens || dim % 16 != 0 || dim > kAddRmsnormInt8MaxDim || y_stride % 8 != 0 || (reinterpret_cast<uintptr_t>(y) & 15u) ||
                 (reinterpret_cast<uintptr_t>(y_lo) & 15u) || (reinterpret_cast<uintptr_t>(y8.q) & 15u) || !y8.d ||
                 (reinterpret_cast<uintptr_t>(y8.d) & 7u) || y8.row_bytes % 16 != 0 || y8.row_bytes < int8_x_units(dim) * 64))
        return cudaErrorInvalidValue;
    auto aligned = [](const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; };
    const int nv = dim / 4;
    const size_t row_copy_bytes = y8.q ? size_t(dim) * 4 : 0; // y and y_lo of the row (norm_rows_int8)
    if (dim % 4 == 0 && nv <= detail::kNormVecs * detail::kNormMaxThreads && x_stride % 4 == 0 &&
        add_stride % 4 == 0 && y_stride % 4 == 0 && aligned(x, 16) && aligned(add, 16) && aligned(w, 16) &&
        aligned(y32, 16) && aligned(y, 8) && aligned(y_lo, 8)) {
        const int per = (nv + detail::kNormMaxThreads - 1) / detail::kNormMaxThreads;
        const int threads = ((nv + per - 1) / per + 31) / 32 * 32;
        return launch_pdl(detail::add_rmsnorm_vec_kernel, dim3(n_tokens), dim3(threads), row_copy_bytes, stream, x, x_stride, add,
                          add_stride, w, y, y_stride, y32, y_lo, dim, eps, y8);
    }
    return launch_pdl(detail::add_rmsnorm_kernel, dim3(n_tokens), dim3(256), row_copy_bytes, stream, x, x_stride, add, add_stride,
                      w, y, y_stride, y32, y_lo, dim, eps, y8);
}

} // namespace ninfer::kernels
