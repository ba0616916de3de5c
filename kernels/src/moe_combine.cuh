// ninfer::kernels - the body of the MoE combine shared by moe_combine (runner_ops.cu: pair i's y row
// is i) and moe_combine_grouped (moe_prefill.cu: y grouped by expert, pair i's row is position[i]),
// so prefill and decode sum in the same order: out[t][h] = sum_j weights[t*top_k+j] * y[row][h],
// then + sigmoid(score[t]) * shared[t][h], each as one fmaf.
#pragma once

#include <cstdint>

namespace ninfer::kernels::detail {

// Token t = blockIdx.y, columns h strided over the x blocks; y_row(i) gives the y row of pair
// i = t * top_k + j (token t's j-th chosen expert).
template <typename YRow>
__device__ __forceinline__ void moe_combine_token(const float* y, int64_t y_stride, YRow y_row, const float* weights,
                                                  int top_k, const float* shared, int64_t shared_stride,
                                                  const float* score, int64_t score_stride, float* out,
                                                  int64_t out_stride, int dim) {
    const int t = blockIdx.y;
    const float sg = 1.f / (1.f + expf(-score[t * score_stride]));
    for (int h = blockIdx.x * blockDim.x + threadIdx.x; h < dim; h += gridDim.x * blockDim.x) {
        float acc = 0.f;
        for (int j = 0; j < top_k; ++j)
            acc = fmaf(weights[t * top_k + j], y[y_row(t * top_k + j) * y_stride + h], acc);
        out[int64_t(t) * out_stride + h] = fmaf(sg, shared[int64_t(t) * shared_stride + h], acc);
    }
}

} // namespace ninfer::kernels::detail
