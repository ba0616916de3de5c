// ninfer::core - the vision tower on the GPU (docs/MODEL.md §9) behind the engine's VisionEncoder
// seam (core/backend/vision_encoder.h): the CPU tower's math (core/vision/vision_tower.h) with
// bf16 GEMM inputs on the tensor cores.
//
// Contract:
// - make_cuda_vision_encoder(weights, image_token, video_token, batch_rows) uploads the tower once:
//   its matrices decoded from their stored format and rounded to bf16 (query, key and value as one
//   [3 hidden, hidden] matrix), biases, LayerNorm parameters and the position table in f32; and
//   allocates the activations of one batch of batch_rows patches (default
//   VisionTower::kMaxBatchRows = 4096) and the inputs of two. cuda_vision_bytes(config,
//   batch_rows) is all of that GPU memory (weights + workspace), for the memory plan. Besides, it
//   takes cuda_vision_pinned_bytes(config, batch_rows) of pinned (page-locked) host memory, not
//   GPU memory: two batches' staged inputs and output rows (core/cuda/vision_staging.h; 66.5 MiB
//   for the real shape at 4096 rows, 4x that at 16384). ninfer::Error("cuda: ...") without a GPU,
//   for a config whose widths (patch values, hidden, intermediate) are not multiples of 8, or for
//   batch_rows below merge_unit or above 2^20.
// - encode(item) returns the rows VisionTower::encode returns (same order, f32), computed as:
//   patches -> bf16 (on the host, round to nearest even: the bits the device's conversion gives)
//   -> patch GEMM + bias (f32) + the position table resampled with the CPU's taps
//   (vision_tower.h position_taps, computed on the host); per block LayerNorm (f32 moments) -> bf16
//   -> qkv GEMM (f32 out) + bias -> attention per frame pair with the 2-D rotary (the CPU's
//   tables): frame pairs of 256+ patches through one flash kernel per piece (kernels/vision.h
//   vision_flash_attention: q, k rotated to bf16, v and P in bf16 on the tensor cores, f32 online
//   softmax; head sizes a multiple of 8 up to 128), smaller ones in f32 (vision_attention) -> bf16
//   -> proj GEMM, residual in f32; LayerNorm -> fc1 GEMM + bias
//   + tanh GELU -> bf16 -> fc2 GEMM, residual; merger LayerNorm -> [rows/4, 4 hidden] view -> fc1 +
//   erf GELU -> fc2 + bias. Batches hold whole temporal patches, at most batch_rows rows
//   (core/vision/vision_batch_inputs.h pack_vision_batches); a temporal patch larger than that, or
//   an item VisionTower::check refuses, throws ninfer::Error("vision: ..."). Synchronous: the
//   rows are in host memory on return.
// - Batches are pipelined over two pinned slots: batch b+1's inputs are built on the host and
//   uploaded (a copy stream), and batch b-1's rows downloaded (another) and copied into the
//   caller's vectors, while the device runs batch b; events order them, one stream
//   synchronisation at the end of a call. The host's share (rounding the patches, copying the
//   rows out) runs on a pool of up to 4 threads the encoder owns (idle between calls).
// - It runs on streams of its own; the engine thread calls it between backend steps, so it never
//   overlaps the backend's work.
// Thread safety: one caller at a time (the engine thread).
#pragma once

#include "core/backend/vision_encoder.h"
#include "core/model/vision_weights.h"
#include "core/vision/vision_tower.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ninfer::core {

std::unique_ptr<VisionEncoder> make_cuda_vision_encoder(const VisionWeights& weights, int32_t image_token_id,
                                                        int32_t video_token_id,
                                                        size_t batch_rows = VisionTower::kMaxBatchRows);
uint64_t cuda_vision_bytes(const VisionConfig& config, size_t batch_rows = VisionTower::kMaxBatchRows);
uint64_t cuda_vision_pinned_bytes(const VisionConfig& config, size_t batch_rows = VisionTower::kMaxBatchRows);

} // namespace ninfer::core
