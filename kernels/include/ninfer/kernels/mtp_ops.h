// ninfer::kernels - the MTP head's glue kernels (core/cuda/mtp_head.h): a per-lane ring of
// final-normed hidden rows indexed by position, and greedy drafts kept on the device.
//
// Contract (graph-capturable, stateless; strides in elements; n_tokens 1..65535; f32 rows):
// - mtp_keep_rows: for step row t, lane = lanes[t], p = positions[t] + position_offset:
//   ring[(lane * ring_rows + p % ring_rows) * ring_stride + i] = src[t * src_stride + i], i < n.
// - mtp_take_rows: out[t * out_stride + i] = ring[(lanes[t] * ring_rows + positions[t] % ring_rows)
//   * ring_stride + i], i < n (the hidden rows of the head's step rows).
// - mtp_argmax: for row t, id = the largest logits[t * logits_stride + v], v < vocab, the lowest v on
//   ties (the CPU head's std::max_element); drafts[lanes[t] * drafts_stride + column] = id.
// - mtp_draft_tokens: tokens[t] = drafts[lanes[t] * drafts_stride + column] (the next draft step's
//   inputs: the draft each lane made in the step before).
// All start by programmatic dependent launch (common.cuh) and wait before touching memory.
// Errors: cudaErrorInvalidValue for a null pointer or a size out of range (nothing launched).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

cudaError_t mtp_keep_rows(const float* src, int64_t src_stride, const int32_t* lanes, const int32_t* positions,
                          int position_offset, float* ring, int ring_rows, int64_t ring_stride, int64_t n,
                          int n_tokens, cudaStream_t stream);

cudaError_t mtp_take_rows(const float* ring, int ring_rows, int64_t ring_stride, const int32_t* lanes,
                          const int32_t* positions, float* out, int64_t out_stride, int64_t n, int n_tokens,
                          cudaStream_t stream);

cudaError_t mtp_argmax(const float* logits, int64_t logits_stride, int vocab, const int32_t* lanes, int32_t* drafts,
                       int drafts_stride, int column, int n_tokens, cudaStream_t stream);

cudaError_t mtp_draft_tokens(int32_t* tokens, const int32_t* lanes, const int32_t* drafts, int drafts_stride,
                             int column, int n_tokens, cudaStream_t stream);

} // namespace ninfer::kernels
