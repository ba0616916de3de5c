// ninfer::core - the host side of a multimodal prefill chunk on the CUDA backend (backend.h
// prefill_with; core/backend/prefill_inputs.h checks it): putting the vision rows into the
// device's input rows and uploading its M-RoPE positions.
//
// Contract:
// - inputs_part(inputs, at, n): the inputs of tokens [at, at + n) of a chunk (the same rows).
// - enqueue_embedding_rows(inputs, hidden, x, x_stride, stream) copies, for every token i whose
//   index is >= 0, embeddings row index into device row x + i * x_stride (f32), one 2-D copy per
//   run of consecutive tokens taking consecutive rows; the other rows are left as they are (the
//   token embeddings already there). enqueue_rope_positions(positions, dst, stream) writes them as
//   int32 [n][3] (t, h, w) to device dst. Both are ordered on `stream` and copy out of the host
//   spans before returning (pageable copies), so the spans may go right after.
// Thread safety: engine thread only (the stream's).
#pragma once

#include "core/backend/backend.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

namespace ninfer::core::cuda {

PrefillInputs inputs_part(const PrefillInputs& inputs, size_t at, size_t n);
void enqueue_embedding_rows(const PrefillInputs& inputs, uint32_t hidden, float* x, int64_t x_stride,
                            cudaStream_t stream);
void enqueue_rope_positions(std::span<const MropePosition> positions, int32_t* dst, cudaStream_t stream);

} // namespace ninfer::core::cuda
