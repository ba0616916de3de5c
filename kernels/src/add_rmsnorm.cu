// ninfer::kernels - the CUDA runner's f32 residual stream: residual add + offset RMSNorm (runner_ops.h).
#include "common.cuh"
#include "ninfer/kernels/runner_ops.h"

namespace ninfer::kernels {

namespace detail {

// The q4 offsets of the rows written (runner_ops.h, gemv.h x_q4_offset): hi of y, lo of y_lo.
struct Q4OffsetRows {
    float* hi;
    float* lo;
    int64_t stride;
};
// Offset of a group from its f64 sum (exact for 64 bf16 values of any realistic spread, so the
// summation order does not matter), rounded once.
__device__ __forceinline__ float q4_offset_of(double sum) { return float(kGemvQ4OffsetScale * sum); }
// Groups in [ceil(dim/64), gemv_q4_offset_per_row(dim)) are zero (read as padding units).
__device__ __forceinline__ void q4_offset_padding(const Q4OffsetRows& o, int t, int dim) {
    for (int g = (dim + 63) / 64 + threadIdx.x; g < gemv_q4_offset_per_row(dim); g += blockDim.x) {
        o.hi[t * o.stride + g] = 0.f;
        if (o.lo) o.lo[t * o.stride + g] = 0.f;
    }
}

// One block per row, strided over dim (the fallback for dims the register path does not take).
// OFS: also the row's q4 offsets, summed from y / y_lo as written (visible after the barrier).
template <bool OFS>
__global__ void add_rmsnorm_kernel(float* x, int64_t x_stride, const float* add, int64_t add_stride,
                                   const float* w, __nv_bfloat16* y, int64_t y_stride, float* y32,
                                   __nv_bfloat16* y_lo, int dim, float eps, Q4OffsetRows ofs) {
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
        if (y_lo) y_lo[t * y_stride + c] = __float2bfloat16(v - __bfloat162float(hi));
    }
    if constexpr (OFS) {
        __syncthreads();
        for (int g = threadIdx.x; g < (dim + 63) / 64; g += blockDim.x) {
            double h = 0, l = 0;
            for (int c = 64 * g; c < min(dim, 64 * g + 64); ++c) {
                h += double(__bfloat162float(y[t * y_stride + c]));
                if (ofs.lo) l += double(__bfloat162float(y_lo[t * y_stride + c]));
            }
            ofs.hi[t * ofs.stride + g] = q4_offset_of(h);
            if (ofs.lo) ofs.lo[t * ofs.stride + g] = q4_offset_of(l);
        }
        q4_offset_padding(ofs, t, dim);
    }
}

// One block per row, the row in registers (kNormVecs float4 per thread): one read of x (and add),
// so a 5120-wide row costs one load round trip instead of a 20-step strided loop. OFS: also the
// row's q4 offsets; a 64-column group is 16 consecutive threads' float4s, summed by shuffles.
constexpr int kNormVecs = 4, kNormMaxThreads = 1024;
template <bool OFS>
__global__ void __launch_bounds__(kNormMaxThreads) add_rmsnorm_vec_kernel(
    float* x, int64_t x_stride, const float* add, int64_t add_stride, const float* w, __nv_bfloat16* y,
    int64_t y_stride, float* y32, __nv_bfloat16* y_lo, int dim, float eps, Q4OffsetRows ofs) {
    __shared__ float red[32];
    ninfer_grid_launch_dependents(); // the next GEMV may start streaming its weights
    ninfer_grid_wait();
    const int t = blockIdx.x, nv = dim / 4;
    float4* xr = reinterpret_cast<float4*>(x + t * x_stride);
    const float4* ar = add ? reinterpret_cast<const float4*>(add + t * add_stride) : nullptr;
    float4 v[kNormVecs];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c >= nv) break;
        v[i] = xr[c];
        if (ar) {
            const float4 b = ar[c];
            v[i] = make_float4(v[i].x + b.x, v[i].y + b.y, v[i].z + b.z, v[i].w + b.w);
            xr[c] = v[i];
        }
        ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
    }
    const float inv = rsqrtf(block_sum(ss, red) / float(dim) + eps);
    [[maybe_unused]] double sum_hi[kNormVecs] = {}, sum_lo[kNormVecs] = {}; // OFS: this thread's 4 columns
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
        const int c = threadIdx.x + i * blockDim.x;
        if (c >= nv) break;
        const float4 wv = reinterpret_cast<const float4*>(w)[c];
        const float o[4] = {v[i].x * inv * (1.f + wv.x), v[i].y * inv * (1.f + wv.y), v[i].z * inv * (1.f + wv.z),
                            v[i].w * inv * (1.f + wv.w)};
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
        if constexpr (OFS)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                sum_hi[i] += double(__bfloat162float(hi[e]));
                sum_lo[i] += double(__bfloat162float(lo[e]));
            }
    }
    if constexpr (OFS) {
#pragma unroll
        for (int i = 0; i < kNormVecs; ++i) {
            if ((threadIdx.x & ~31u) + i * blockDim.x >= unsigned(nv)) break; // the whole warp leaves
            double h = sum_hi[i], l = sum_lo[i];
#pragma unroll
            for (int o = 8; o > 0; o >>= 1) { // within each half warp: 16 float4 = one group
                h += __shfl_xor_sync(0xffffffffu, h, o);
                l += __shfl_xor_sync(0xffffffffu, l, o);
            }
            const int c = threadIdx.x + i * blockDim.x;
            if ((threadIdx.x & 15) == 0 && c < nv) {
                ofs.hi[t * ofs.stride + c / 16] = q4_offset_of(h);
                if (ofs.lo) ofs.lo[t * ofs.stride + c / 16] = q4_offset_of(l);
            }
        }
        q4_offset_padding(ofs, t, dim);
    }
}

} // namespace detail

cudaError_t add_rmsnorm(float* x, int64_t x_stride, const float* add, int64_t add_stride, const float* w,
                        __nv_bfloat16* y, int64_t y_stride, float* y32, int n_tokens, int dim, float eps,
                        cudaStream_t stream, __nv_bfloat16* y_lo, float* q4_offset, float* lo_q4_offset,
                        int64_t q4_offset_stride) {
    if (!x || !w || !y || n_tokens < 1 || n_tokens > 65535 || dim < 1 || (lo_q4_offset && (!y_lo || !q4_offset)) ||
        (q4_offset && n_tokens > 1 && q4_offset_stride < gemv_q4_offset_per_row(dim)))
        return cudaErrorInvalidValue;
    const detail::Q4OffsetRows ofs{q4_offset, lo_q4_offset, q4_offset_stride};
    auto aligned = [](const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; };
    const int nv = dim / 4;
    if (dim % 4 == 0 && nv <= detail::kNormVecs * detail::kNormMaxThreads && x_stride % 4 == 0 &&
        add_stride % 4 == 0 && y_stride % 4 == 0 && aligned(x, 16) && aligned(add, 16) && aligned(w, 16) &&
        aligned(y32, 16) && aligned(y, 8) && aligned(y_lo, 8)) {
        const int per = (nv + detail::kNormMaxThreads - 1) / detail::kNormMaxThreads;
        const int threads = ((nv + per - 1) / per + 31) / 32 * 32;
        return launch_pdl(q4_offset ? detail::add_rmsnorm_vec_kernel<true> : detail::add_rmsnorm_vec_kernel<false>,
                          dim3(n_tokens), dim3(threads), 0, stream, x, x_stride, add, add_stride, w, y, y_stride, y32,
                          y_lo, dim, eps, ofs);
    }
    return launch_pdl(q4_offset ? detail::add_rmsnorm_kernel<true> : detail::add_rmsnorm_kernel<false>, dim3(n_tokens),
                      dim3(256), 0, stream, x, x_stride, add, add_stride, w, y, y_stride, y32, y_lo, dim, eps, ofs);
}

} // namespace ninfer::kernels
