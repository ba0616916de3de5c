// ninfer::kernels - decode GEMV over nvfp4 weights (the runner's form of block_scale_k16_m128x4_v1,
// gemv.h): launcher shared by gemv.cu's format dispatch.
#pragma once

#include "gemv_launch.cuh"

namespace ninfer::kernels::detail {

// p as gemv() fills it for the artifact layout (row_bytes = k/2, scales = the E4M3 plane, the
// per-row f32 divisors follow it); grid and block as for gemv_kernel; launched with PDL like it.
cudaError_t gemv_nvfp4_launch(const GemvParams& p, dim3 grid, dim3 block, cudaStream_t stream);

} // namespace ninfer::kernels::detail
