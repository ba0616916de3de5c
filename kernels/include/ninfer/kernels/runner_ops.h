// ninfer::kernels - the small glue kernels of the CUDA model runner (core/cuda): embedding rows,
// the f32 residual stream with its offset RMSNorm, SwiGLU, MoE routing, per-expert GEMV and the
// MoE combine, and the copy of step logits into per-lane rows.
//
// Contract (all graph-capturable, stateless; strides in elements; n_tokens 1..65535):
// - embed_rows: out[t][c] = decode(W)[ids[t]][c] in f32 for c < w.k, exactly as core's codecs
//   (bf16 widened; fp8 code * row multiplier; q4/q5/q6/q8 signed code * group multiplier; nvfp4
//   (e2m1 * e4m3 block scale) / the row's divisor, in gemv.h's nvfp4 form).
// - add_rmsnorm: x[t] += add[t] (when add is given, f32 in place); then
//   y[t] = bf16(x * rsqrt(mean(x^2) + eps) * (1 + w)), w f32 [dim] (docs/MODEL.md §4, offset form);
//   y32 (optional, stride y_stride) gets the same values unrounded, y_lo (optional, same stride)
//   the low halves bf16(v - float(bf16(v))) for gemv's x_lo; y8 (optional; n_tokens <= 8, dim % 16
//   == 0, dim <= kAddRmsnormInt8MaxDim, y 16-byte aligned) the q4 int8 route's quantisation of y (+ y_lo) (gemv.h
//   Int8X), from a copy of the row in shared memory.
// - gemv_f32x: y[t][r] = W.row(r) . x[t] with f32 x (the router and the shared-expert score,
//   whose top-k choice and gate must not see x rounded to bf16; every projection in the runner's
//   f32-activation mode); f32 sums; y f32 or bf16(sum). From 32 tokens and 32 rows one f32 fmaf
//   chain per output in column order (gemv_f32x_tokens.cuh: a token's sums do not depend on the
//   other tokens of the call), else one warp per row.
// - swiglu: out[t][i] = bf16(silu(in[t][i]) * in[t][inter + i]), in f32 rows [gate | up]; out32
//   (optional; out may then be null) gets the f32 value, out_lo (optional) the low half
//   bf16(v - float(out)), same stride; out8 (optional; out given, n_rows <= 8, inter % 16 == 0) the
//   int8 route's quantisation of out (+ out_lo) (gemv.h Int8X), by blocks of 512 columns then.
// - embed_rows, add_rmsnorm, swiglu and scatter_rows start by programmatic dependent launch
//   (common.cuh launch_pdl): they wait for the previous kernel before touching memory.
// - moe_route: per token, softmax (f32) over n_experts router logits, top_k largest (ties to the
//   lower id), weights renormalised to sum 1: ids [t][top_k], weights [t][top_k] (core/cpu order).
//   n_experts <= 1024, top_k <= 32.
// - moe_gemv: for token t and slot j, expert e = ids[t*top_k + j]:
//   y[(t*top_k + j)*y_stride + r] = W.row(e * rows_per_expert + r) . x_row, r < rows_per_expert,
//   x_row = x + (x_per_slot ? t*top_k + j : t) * x_stride (f32), f32 sums; W any of the
//   gemv.h formats with n = n_experts * rows_per_expert rows. Only the chosen experts' rows are
//   read: for bf16, fp8 and q4 16-byte vectors per lane, 4 rows per lane in flight, when k % 16 == 0 and x and its
//   stride are 16-byte aligned (a scalar kernel otherwise); gemv_f32x below 32 tokens or rows takes the same path.
// - Every WeightView here is in the stored layout (WeightLayout::Artifact), else InvalidValue.
// - moe_combine: out[t][h] = sum_j weights[t][j] * y[t*top_k + j][h] + sigmoid(score[t*score_stride])
//   * shared[t][h], f32.
// - scatter_rows: dst[lanes[t] * dst_stride + i] = src[t * src_stride + i], i < n (f32).
// Errors: cudaErrorInvalidValue for a violated requirement the host can see (nothing launched).
#pragma once

#include "ninfer/kernels/gemv.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

cudaError_t embed_rows(const WeightView& w, const int32_t* ids, int n_tokens, float* out,
                       int64_t out_stride, cudaStream_t stream);

// Widest row add_rmsnorm quantises into y8: its row copy (4 bytes a column) and the kernels' static
// shared memory (128 bytes) must fit the 48 KB a block gets without opting in (dim 12288 would ask
// 49280 bytes and fail to launch); 1 KB is left for the static part.
constexpr int kAddRmsnormInt8MaxDim = (48 * 1024 - 1024) / 4;

cudaError_t add_rmsnorm(float* x, int64_t x_stride, const float* add, int64_t add_stride,
                        const float* w, __nv_bfloat16* y, int64_t y_stride, float* y32, int n_tokens,
                        int dim, float eps, cudaStream_t stream, __nv_bfloat16* y_lo = nullptr,
                        const Int8X& y8 = {});

cudaError_t gemv_f32x(const WeightView& w, const float* x, int64_t x_stride, int n_tokens, void* y, bool y_fp32,
                      int64_t y_stride, cudaStream_t stream);

cudaError_t swiglu(const float* in, int64_t in_stride, int inter, __nv_bfloat16* out, float* out32,
                   int64_t out_stride, int n_rows, cudaStream_t stream, __nv_bfloat16* out_lo = nullptr,
                   const Int8X& out8 = {});

cudaError_t moe_route(const float* logits, int64_t logits_stride, int n_experts, int top_k,
                      int32_t* ids, float* weights, int n_tokens, cudaStream_t stream);

struct MoeGemvArgs {
    WeightView w; // n = n_experts * rows_per_expert
    int rows_per_expert = 0;
    const int32_t* ids = nullptr;
    int top_k = 0;
    const float* x = nullptr;
    int64_t x_stride = 0;
    bool x_per_slot = false;
    float* y = nullptr;
    int64_t y_stride = 0;
    int n_tokens = 0;
};
cudaError_t moe_gemv(const MoeGemvArgs& args, cudaStream_t stream);

cudaError_t moe_combine(const float* y, int64_t y_stride, const float* weights, int top_k,
                        const float* shared, int64_t shared_stride, const float* score,
                        int64_t score_stride, float* out, int64_t out_stride, int dim, int n_tokens,
                        cudaStream_t stream);

cudaError_t scatter_rows(const float* src, int64_t src_stride, const int32_t* lanes, float* dst,
                         int64_t dst_stride, int64_t n, int n_tokens, cudaStream_t stream);

} // namespace ninfer::kernels
