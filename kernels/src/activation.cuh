// ninfer::kernels - the vision tower's GELU forms, one definition shared by the element-wise kernel
// (vision.cu's vision_bias_act) and the GEMM epilogue (gemm_kernel.cuh), so that a GEMM with the
// activation fused computes the same bits as the GEMM followed by the element-wise kernel.
#pragma once

#include <cuda_runtime.h>

namespace ninfer::kernels::detail {

// gelu_pytorch_tanh: 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))).
__device__ __forceinline__ float gelu_tanh(float v) {
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

// Exact GELU: 0.5 v (1 + erf(v / sqrt 2)).
__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)); }

} // namespace ninfer::kernels::detail
