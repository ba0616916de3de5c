// ninfer::core - the vision tower on the GPU (docs/MODEL.md §9) behind the engine's VisionEncoder
// seam (core/backend/vision_encoder.h): the CPU tower's math (core/vision/vision_tower.h) with
// bf16 GEMM inputs on the tensor cores.
//
// Contract:
// - make_cuda_vision_encoder(weights, image_token, video_token) uploads the tower once: its
//   matrices decoded from their stored format and rounded to bf16 (query, key and value as one
//   [3 hidden, hidden] matrix), biases, LayerNorm parameters and the position table in f32; and
//   allocates the activations of one batch of kMaxBatchRows patches. cuda_vision_bytes(config) is
//   all of it (weights + workspace), for the memory plan. ninfer::Error("cuda: ...") without a GPU
//   or for a config whose widths (patch values, hidden, intermediate) are not multiples of 8.
// - encode(item) returns the rows VisionTower::encode returns (same order, f32), computed as:
//   patches -> bf16 -> patch GEMM + bias (f32) + the position table resampled with the CPU's taps
//   (vision_tower.h position_taps, computed on the host); per block LayerNorm (f32 moments) -> bf16
//   -> qkv GEMM (f32 out) + bias -> attention per frame pair with the 2-D rotary (the CPU's
//   tables): frame pairs of 256+ patches through one flash kernel per piece (kernels/vision.h
//   vision_flash_attention: q, k rotated to bf16, v and P in bf16 on the tensor cores, f32 online
//   softmax; head sizes a multiple of 8 up to 128), smaller ones in f32 (vision_attention) -> bf16
//   -> proj GEMM, residual in f32; LayerNorm -> fc1 GEMM + bias
//   + tanh GELU -> bf16 -> fc2 GEMM, residual; merger LayerNorm -> [rows/4, 4 hidden] view -> fc1 +
//   erf GELU -> fc2 + bias. Batches hold whole temporal patches, at most kMaxBatchRows rows; a
//   temporal patch larger than that, or an item VisionTower::check refuses, throws
//   ninfer::Error("vision: ..."). Synchronous: the rows are in host memory on return.
// - It runs on a stream of its own; the engine thread calls it between backend steps, so it never
//   overlaps the backend's work.
// Thread safety: one caller at a time (the engine thread).
#pragma once

#include "core/backend/vision_encoder.h"
#include "core/model/vision_weights.h"

#include <cstdint>
#include <memory>

namespace ninfer::core {

std::unique_ptr<VisionEncoder> make_cuda_vision_encoder(const VisionWeights& weights, int32_t image_token_id,
                                                        int32_t video_token_id);
uint64_t cuda_vision_bytes(const VisionConfig& config);

} // namespace ninfer::core
