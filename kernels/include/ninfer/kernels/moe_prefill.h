// ninfer::kernels - MoE prefill glue: group a chunk's (token, slot) pairs by expert so that each
// expert's rows are one contiguous block for the grouped GEMM (gemm.h), and combine the expert
// outputs back per token.
//
// Contract (graph-capturable, deterministic; n_pairs = n_tokens * top_k, ids as moe_route writes
// them: ids[t * top_k + j] = expert of slot j of token t, every id in [0, n_experts)):
// - moe_group_by_expert: offsets [n_experts + 1] with offsets[e] = number of pairs whose expert is
//   below e (offsets[n_experts] = n_pairs); order [n_pairs] lists the pair indices t*top_k+j in
//   expert order, ascending pair index within an expert; position [n_pairs] is its inverse
//   (position[order[r]] = r). counts is scratch of n_experts int32. n_experts <= 1024.
// - moe_gather_rows: dst[r] = src[order[r] / top_k] for r < n_pairs (bf16 rows of width elements,
//   width % 8 == 0, strides multiples of 8, 16-byte aligned rows).
// - moe_combine_grouped: out[t][h] = sum_j weights[t*top_k+j] * y[position[t*top_k+j]][h]
//   (j ascending, fmaf) + sigmoid(score[t*score_stride]) * shared[t][h], f32 - the same arithmetic
//   and order as runner_ops.h moe_combine, so prefill and decode combine identically.
// Errors: cudaErrorInvalidValue for a violated requirement the host can see (nothing launched).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

cudaError_t moe_group_by_expert(const int32_t* ids, int n_tokens, int top_k, int n_experts, int32_t* counts,
                                int32_t* offsets, int32_t* order, int32_t* position, cudaStream_t stream);

cudaError_t moe_gather_rows(const __nv_bfloat16* src, int64_t src_stride, const int32_t* order, int top_k,
                            int n_pairs, int width, __nv_bfloat16* dst, int64_t dst_stride, cudaStream_t stream);

cudaError_t moe_combine_grouped(const float* y, int64_t y_stride, const int32_t* position, const float* weights,
                                int top_k, const float* shared, int64_t shared_stride, const float* score,
                                int64_t score_stride, float* out, int64_t out_stride, int dim, int n_tokens,
                                cudaStream_t stream);

} // namespace ninfer::kernels
