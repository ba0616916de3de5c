// ninfer::core - the resize and frame-sampling arithmetic of transformers' Qwen processors.
//
// Contract (each function mirrors one transformers function; the unit tests check hand-computed
// values of its formula):
// - smart_resize_image: qwen2_vl/image_processing_qwen2_vl.py smart_resize. h' = round(h/f)*f,
//   w' likewise (Python's round: half to even); if h'w' > max: beta = sqrt(hw/max),
//   h' = max(f, floor(h/beta/f)*f); else if h'w' < min: beta = sqrt(min/hw), h' = ceil(h*beta/f)*f.
//   Throws Error("media: ...") when max(h,w)/min(h,w) > 200 (transformers' ValueError) or a side
//   is 0.
// - smart_resize_video: qwen3_vl/video_processing_qwen3_vl.py smart_resize: sides below f are
//   first scaled up to f (int truncation), then the same with t' = round(frames/temporal)*temporal
//   in the products and frames in beta. With cap_pixels_per_frame, Qwen3VLVideoProcessor.resize's
//   cap: max = max(min(768 f², max // frames), int(1.05 min)) * frames.
// - sample_frame_indices: Qwen3VLVideoProcessor.sample_frames with fps: n = int(total / src_fps *
//   fps), clamped to [min_frames, max_frames] and then to total; indices = numpy
//   linspace(0, total-1, n).round() (half to even). max_frames here is the smaller of the
//   config's and the server's.
// - pair_timestamps: Qwen3VLProcessor._calculate_timestamps: the index list padded to a multiple
//   of temporal with its last index, times = idx / src_fps, one mean of each group's first and
//   last time.
// Thread safety: pure functions.
#pragma once

#include "core/media/media_config.h"

#include <cstdint>
#include <vector>

namespace ninfer::core {

struct ResizedSize {
    int64_t height = 0;
    int64_t width = 0;
};

ResizedSize smart_resize_image(int64_t height, int64_t width, const MediaPreprocess& p);
ResizedSize smart_resize_video(int64_t frames, int64_t height, int64_t width, const MediaPreprocess& p);
std::vector<int64_t> sample_frame_indices(int64_t total_frames, double source_fps, double fps, int min_frames,
                                          int max_frames);
std::vector<double> pair_timestamps(std::vector<int64_t> indices, double source_fps, int temporal);

// Merged tokens of a resized item: ceil(frames / temporal) x (h/f) x (w/f) (an image counts 1 frame).
int64_t merged_tokens_of(int64_t frames, ResizedSize size, const MediaPreprocess& p);

} // namespace ninfer::core
