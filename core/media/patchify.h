// ninfer::core - resized RGB frames -> normalised patch rows in transformers' order.
//
// Contract: patchify_frames(frames, height, width, t, p, out) writes the grid_h*grid_w rows of
// temporal patch t (grid_h = height/P, grid_w = width/P) into out (the VisionInput::patches
// array; rows t*grid_h*grid_w.. of width 3*T*P*P), in the order vision_input.h states.
// frames holds T pointers to RGB24 frames of height x width (row-major, 3 bytes a pixel; they
// may alias when a frame is repeated). Each value is (v - mean/rescale) / (std/rescale) in
// float32, the fused rescale-and-normalise of transformers' fast processors. height and width
// must be multiples of P*M (the caller's resize guarantees it).
// Thread safety: pure.
#pragma once

#include "core/media/media_config.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core {

void patchify_frames(std::span<const uint8_t* const> frames, int64_t height, int64_t width, int64_t t,
                     const MediaPreprocess& p, std::vector<float>& out);

} // namespace ninfer::core
