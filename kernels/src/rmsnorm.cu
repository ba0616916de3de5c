// ninfer::kernels - offset RMSNorm with optional fused residual add: one block per row.
#include "common.cuh"
#include "ninfer/kernels/rmsnorm.h"

namespace ninfer::kernels {

namespace detail {

__global__ void rmsnorm_offset_kernel(RmsNormArgs a) {
    __shared__ float red[32];
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const int64_t row = blockIdx.x;
    const __nv_bfloat16* x = a.x + row * a.x_stride;
    const int n_vec = a.dim / 8;
    float sum_sq = 0.f;
    for (int i = threadIdx.x; i < n_vec; i += blockDim.x) {
        uint4 v = *reinterpret_cast<const uint4*>(x + i * 8);
        if (a.add) {
            const uint4 b = *reinterpret_cast<const uint4*>(a.add + row * a.x_stride + i * 8);
            __nv_bfloat162* pv = reinterpret_cast<__nv_bfloat162*>(&v);
            const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 fa = __bfloat1622float2(pv[j]), fb = __bfloat1622float2(pb[j]);
                pv[j] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
            }
            *reinterpret_cast<uint4*>(a.h_out + row * a.x_stride + i * 8) = v;
        }
        const __nv_bfloat162* pv = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 f = __bfloat1622float2(pv[j]);
            sum_sq += f.x * f.x + f.y * f.y;
        }
    }
    const float total = block_sum(sum_sq, red);
    const float inv = rsqrtf(total / float(a.dim) + a.eps);
    const __nv_bfloat16* h = a.add ? a.h_out + row * a.x_stride : x;
    for (int i = threadIdx.x; i < n_vec; i += blockDim.x) {
        const uint4 v = *reinterpret_cast<const uint4*>(h + i * 8);
        const uint4 w = *reinterpret_cast<const uint4*>(a.weight + i * 8);
        const __nv_bfloat162* pv = reinterpret_cast<const __nv_bfloat162*>(&v);
        const __nv_bfloat162* pw = reinterpret_cast<const __nv_bfloat162*>(&w);
        uint4 out;
        __nv_bfloat162* po = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 f = __bfloat1622float2(pv[j]), fw = __bfloat1622float2(pw[j]);
            po[j] = __floats2bfloat162_rn(f.x * inv * (1.f + fw.x), f.y * inv * (1.f + fw.y));
        }
        *reinterpret_cast<uint4*>(a.y + row * a.y_stride + i * 8) = out;
    }
}

} // namespace detail

cudaError_t rmsnorm_offset(const RmsNormArgs& a, cudaStream_t stream) {
    auto misaligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) != 0; };
    if (!a.x || !a.weight || !a.y || a.n_rows < 0 || a.dim < 8 || a.dim > 65536 || a.dim % 8 != 0 ||
        a.x_stride % 8 != 0 || a.y_stride % 8 != 0 || (a.n_rows > 1 && (a.x_stride < a.dim || a.y_stride < a.dim)) ||
        (a.add && !a.h_out) || misaligned(a.x) || misaligned(a.y) || misaligned(a.weight) ||
        (a.add && (misaligned(a.add) || misaligned(a.h_out))))
        return cudaErrorInvalidValue;
    if (a.n_rows == 0) return cudaSuccess;
    const int n_vec = a.dim / 8;
    const int threads = n_vec >= 512 ? 512 : ((n_vec + 31) / 32) * 32;
    return launch_pdl(detail::rmsnorm_offset_kernel, dim3(a.n_rows), dim3(threads), 0, stream, a);
}

} // namespace ninfer::kernels
