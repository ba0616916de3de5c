// ninfer::kernels - device helpers shared by the kernels: programmatic dependent launch,
// cache-hinted loads, mma.sync, reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <utility>

#include "probe.cuh"

namespace ninfer::kernels {

// Programmatic dependent launch (PDL, sm_90). A kernel started by launch_pdl() may begin while its
// predecessor on the stream still runs, so it MUST call ninfer_grid_wait() before it reads
// anything a predecessor wrote or writes anything a predecessor reads; before the wait it may
// only read constant data (weights). ninfer_grid_launch_dependents() lets the next PDL kernel
// start (its blocks take SM slots as this kernel's blocks retire and prefetch their weights);
// without it the next one starts when this one ends. Both are no-ops for a normal launch.
// Both carry the step timeline probe's hooks (probe.cuh), empty unless built with NINFER_PROBE.
__device__ __forceinline__ void ninfer_grid_wait() {
    const unsigned long long t_wait = probe_wait_begin();
    asm volatile("griddepcontrol.wait;" ::: "memory");
    probe_wait_end(t_wait);
}
__device__ __forceinline__ void ninfer_grid_launch_dependents() {
    probe_block_start();
    asm volatile("griddepcontrol.launch_dependents;");
}

namespace detail {
extern bool g_pdl; // KernelTuning::pdl as kernel_tuning_apply installed it (defined in gemv.cu)
}
// Whether launches carry the PDL attribute (KernelTuning::pdl; a launch attribute, not a kernel branch).
inline bool pdl_enabled() { return detail::g_pdl; }

// The launch configuration of launch_pdl(_cluster): PDL attribute, and the grid's y dimension in
// clusters of cluster_y blocks when cluster_y > 1. attr must outlive the launch.
inline cudaLaunchConfig_t pdl_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, int cluster_y,
                                     cudaLaunchAttribute (&attr)[2]) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = 1;
    attr[1].val.clusterDim.y = unsigned(cluster_y);
    attr[1].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = cluster_y > 1 ? 2 : 1;
    return cfg;
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute (graph-capturable).
template <class... Params, class... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                       Args&&... args) {
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = pdl_config(grid, block, smem, stream, 1, attr);
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// launch_pdl with clusters of cluster_y blocks along y (grid.y a multiple of it; above 8, the
// kernel must allow non-portable cluster sizes: cudaFuncAttributeNonPortableClusterSizeAllowed).
template <class... Params, class... Args>
cudaError_t launch_pdl_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                               int cluster_y, Args&&... args) {
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = pdl_config(grid, block, smem, stream, cluster_y, attr);
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

} // namespace ninfer::kernels

namespace ninfer::kernels::detail {

// Weights are streamed once per step: do not let them evict activations from L1.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 load_stream8(const void* p) {
    uint2 v;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}
// Activations are re-read by every warp of a block: keep them in L1.
__device__ __forceinline__ uint4 load_cached16(const void* p) {
    return __ldg(reinterpret_cast<const uint4*>(p));
}

// D += A(16x16 bf16, row) * B(16x8 bf16, col), fp32 accumulate.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
    __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
}
__device__ __forceinline__ uint32_t bf16x2_sub(uint32_t a, uint32_t b) {
    __nv_bfloat162 r = __hsub2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
}

// E4M3FN bytes 0 and 2 (or 1 and 3 after >> 8) to a bf16 pair, exact (subnormals included):
// the bits land in bf16's exponent/mantissa fields and a multiply by 2^120 fixes the bias.
__device__ __forceinline__ uint32_t fp8_pair_to_bf16(uint32_t v) {
    const uint32_t bits = ((v & 0x007F007Fu) << 4) | ((v & 0x00800080u) << 8);
    return bf16x2_mul(bits, 0x7B807B80u);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block; every thread gets the result. scratch holds >= 32 floats; blockDim % 32 == 0.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = 0.f;
    for (int i = 0; i < n_warps; ++i) total += scratch[i];
    return total;
}

__device__ __forceinline__ float bf16_round(float v) { return __bfloat162float(__float2bfloat16(v)); }
__device__ __forceinline__ float silu(float v) { return v / (1.f + expf(-v)); }

} // namespace ninfer::kernels::detail
