// ninfer::core - the CUDA runner's lane state to and from a host LaneImage (layout of
// memory_plan.h, the CPU backend's): KV rows in the plan's dtype (kv_codec.h: bf16, or fp8/int8
// codes followed by their scales; the GPU pages keep codes and scales apart) by layer, K then V,
// position, head; GDN conv history as f32 (bf16 on the GPU: widened on save, rounded to nearest on
// restore; f32 in the runner's f32-activation mode: copied); f32 state. Images therefore move between the CPU and CUDA backends for every KV dtype.
//
// Contract: `pages` is the lane's page table (covering image/tokens length); the caller checks
// sizes and dtypes against the plan first. Both synchronise the runner's stream.
// Thread safety: engine thread only.
#pragma once

#include "core/cuda/cuda_runner.h"
#include "core/backend/backend.h"

#include <cstdint>
#include <vector>

namespace ninfer::core::cuda {

LaneImage save_lane_image(const Runner& run, const MemoryPlan& plan, int lane, const std::vector<int32_t>& tokens,
                          const std::vector<uint32_t>& pages);
void restore_lane_image(Runner& run, const MemoryPlan& plan, int lane, const LaneImage& image,
                        const std::vector<uint32_t>& pages);

} // namespace ninfer::core::cuda
