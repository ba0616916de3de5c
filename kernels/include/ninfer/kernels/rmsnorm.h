// ninfer::kernels - offset RMSNorm (Qwen3.5 input/post-attention/q/k/final norms), optionally
// fused with the residual add that precedes it.
//
// Contract:
// - Row r of n_rows, dim elements (dim % 8 == 0, 8 <= dim <= 65536):
//   without add: h = x[r];  with add: h = bf16(float(x[r]) + float(add[r])) and h is stored to
//   h_out[r] (h_out may equal x: in-place residual update).
//   y[r] = bf16( h_f32 * rsqrt(mean(h_f32^2) + eps) * (1 + w_f32) ).
// - Strides are in elements (multiples of 8); add uses x_stride, h_out uses x_stride; every
//   pointer 16-byte aligned. y must not overlap x, add or h_out.
// - Returns cudaErrorInvalidValue (nothing launched) on a violated requirement.
// - Kernels start by programmatic dependent launch (kernels/src/common.cuh launch_pdl) and wait
//   for the previous kernel on the stream before touching memory.
// Thread safety: stateless; any host thread, any stream; graph-capturable.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

struct RmsNormArgs {
    const __nv_bfloat16* x = nullptr;
    int64_t x_stride = 0;
    const __nv_bfloat16* add = nullptr; // optional residual operand
    __nv_bfloat16* h_out = nullptr;     // required when add is given
    const __nv_bfloat16* weight = nullptr;
    __nv_bfloat16* y = nullptr;
    int64_t y_stride = 0;
    int n_rows = 0;
    int dim = 0;
    float eps = 1e-6f;
};

cudaError_t rmsnorm_offset(const RmsNormArgs& args, cudaStream_t stream);

} // namespace ninfer::kernels
