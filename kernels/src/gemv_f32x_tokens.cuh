// ninfer::kernels - gemv_f32x for many tokens (runner_ops.h contract): the prefill's router and
// shared-expert score, and the f32-activation mode's projections over a prompt.
//
// Contract: y[t][r] = sum over c in increasing order of fmaf(W[r][c], x[t][c], acc) from acc = 0,
// with W[r][c] decoded exactly (RowDecoder::value), for r < d.n, t < n_tokens; y f32, or
// bf16(sum). One f32 chain per output, so a token's results do not depend on which other tokens
// share the launch (a prompt's chunking does not change its router logits).
// Why: runner_ops' per-token kernels read every weight row once per token, which made the 35B-A3B
// router (256 x 2048, q4) a third of the whole prefill (kernels/PERF_NOTES.md session 9); here a
// block decodes a 32-row slab once into shared memory for 128 tokens.
// Worth it from kF32xTokensMinTokens tokens and kF32xTokensMinRows rows (below, the tile would be
// mostly padding; gemv_f32x keeps its per-token kernels there).
#pragma once

#include "row_decoder.cuh"

#include <cuda_runtime.h>

namespace ninfer::kernels::detail {

constexpr int kF32xTokensMinTokens = 32, kF32xTokensMinRows = 32;

cudaError_t launch_gemv_f32x_tokens(const RowDecoder& d, const float* x, int64_t x_stride, int n_tokens, void* y,
                                    bool y_fp32, int64_t y_stride, cudaStream_t stream);

} // namespace ninfer::kernels::detail
