// ninfer::core - one image or video's bytes -> VisionInput (decode, sample, resize, normalise,
// patchify, digest).
//
// Contract:
// - plan_media(kind, bytes, config, limits) reads only headers (sniff_image for images, then
//   MediaReader's probe) and returns what decoding will produce: the resized size, the sampled
//   frame indices and the merged tokens. Everything past a limit or undecodable throws
//   Error("media: ...") (Errc::Invalid: the daemon answers 400) before any frame is decoded;
//   Errc::Unavailable when FFmpeg is missing.
// - decode_media(kind, bytes, config, limits) does the plan, then decodes: an Image is the first
//   frame (GIF: the first frame of an animation), duplicated to temporal_patch_size frames; a
//   Video is the planned frames (sample_frame_indices at config.video.fps, at most
//   min(config.video.max_frames, limits.max_frames)), each converted to RGB at its own size
//   (pixels with alpha composited on white, as transformers' convert_to_rgb does; a YUV video
//   frame with the matrix and range it is tagged with, BT.601 limited when untagged, through the
//   swscale call of transformers' PyAV loader: docs/MEDIA.md) and resized
//   with resize_bicubic_u8 (bicubic_resize.h: the integer bicubic of transformers' default
//   torchvision processors, to the bit) as soon as it is decoded, then patchified in pairs. A
//   video's sampled frames are converted on limits.decoder_threads worker threads
//   (resize_workers.h) while this thread decodes, so at most 2 x decoder_threads decoded frames
//   wait for a worker, one source-size RGB frame a worker and a few resized frames are held
//   besides the output (docs/MEDIA.md gives the measured distance to the references). A stream that ends before a planned frame (a
//   container whose frame count was estimated from its duration) repeats its last sampled frame.
// - The result is the VisionInput of core/vision/vision_input.h (patch order, normalisation,
//   timestamps); digest = SHA-256 over "ninfer-media-v1", kind, grid_t/h/w, patch/temporal/merge
//   sizes (int32 LE each) and every frame's resized RGB24 bytes in order (duplicates included).
// Thread safety: reentrant (runs on the media pool's threads).
#pragma once

#include "core/media/media_config.h"
#include "core/media/media_plan.h"
#include "core/vision/vision_input.h"

#include <span>
#include <string>
#include <vector>

namespace ninfer::core {

struct MediaPlan {
    VisionInput::Kind kind = VisionInput::Kind::Image;
    int64_t source_width = 0, source_height = 0;
    ResizedSize size;                    // resized frame
    std::vector<int64_t> frame_indices;  // video: the source frames to take; image: {0}
    double source_fps = 0;               // video
    int64_t merged_tokens = 0;
};

MediaPlan plan_media(VisionInput::Kind kind, std::span<const uint8_t> bytes, const MediaConfig& config,
                     const MediaLimits& limits);
VisionInput decode_media(VisionInput::Kind kind, std::span<const uint8_t> bytes, const MediaConfig& config,
                         const MediaLimits& limits);

} // namespace ninfer::core
