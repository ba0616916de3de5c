// ninfer::core - the CPU vision tower behind the engine's VisionEncoder seam.
//
// Contract: make_cpu_vision_encoder(weights, threads, image_token_id, video_token_id) owns a thread
// pool of `threads` (0 = every core) and a VisionTower over `weights`, which must outlive it. It
// runs on the engine thread before a request's prefill, whatever backend serves the text model.
#pragma once

#include "core/backend/vision_encoder.h"
#include "core/model/vision_weights.h"

#include <memory>

namespace ninfer::core {

std::unique_ptr<VisionEncoder> make_cpu_vision_encoder(const VisionWeights& weights, unsigned threads,
                                                       int32_t image_token_id, int32_t video_token_id);

} // namespace ninfer::core
