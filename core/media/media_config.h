// ninfer::core - how images and video become tower input (the artifact's processor configs) and
// the server's limits on them.
//
// Contract:
// - MediaPreprocess is one processor's settings: transformers' Qwen2VLImageProcessor
//   (preprocessor_config.json) or Qwen3VLVideoProcessor (video_preprocessor_config.json). Pixel
//   bounds come from "size": {"shortest_edge", "longest_edge"} (transformers 5's spelling), overridden by
//   "min_pixels" / "max_pixels" where present (as the fast image processor does); for video they bound frames x height x width. Members absent
//   from the JSON keep the defaults below (docs/MODEL.md §9, the upstream processor's: image
//   32²..1024² px, video 128·32²..4·1024² px·frames, 2 fps, 4..768 frames; patch 16, temporal 2,
//   merge 2; mean = std = 0.5 after rescaling by 1/255).
// - media_config_from_json(image_json, video_json): "" = defaults for that kind. Throws
//   Error("media: preprocessor_config.json: ...") for JSON that is not an object or values out of
//   range (non-positive sizes, min > max, a std of 0).
// - MediaLimits are the server's refusals on top (ninferd options, daemon/options.cpp); each
//   has its ninferd option named beside it. Defaults = docs/MODEL.md §9's upstream limits.
// Thread safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace ninfer::core {

struct MediaPreprocess {
    int patch_size = 16;
    int temporal_patch_size = 2;
    int merge_size = 2;
    int64_t min_pixels = 32 * 32;   // image: per frame; video: frames x h x w
    int64_t max_pixels = 1024 * 1024;
    double rescale_factor = 1.0 / 255.0;
    std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
    std::array<float, 3> std{0.5f, 0.5f, 0.5f};
    // Video only.
    double fps = 2.0;
    int min_frames = 4;
    int max_frames = 768;
    bool cap_pixels_per_frame = false; // Qwen3VLVideoProcessor's option (qwen-vl-utils' per-frame cap)

    int factor() const { return patch_size * merge_size; } // resized sides are multiples of it
};

struct MediaConfig {
    MediaPreprocess image;
    MediaPreprocess video{16, 2, 2, 128 * 32 * 32, 4 * 1024 * 1024};
};

MediaConfig media_config_from_json(std::string_view image_json, std::string_view video_json);

struct MediaLimits {
    uint64_t max_bytes = 256ull << 20;      // media-max-mib: encoded bytes of one request's media
    int64_t max_source_pixels = 8192 * 8192; // media-max-pixels: a decoded frame's width x height
    int max_frames = 768;                    // media-max-frames: sampled frames of one video
    double max_video_seconds = 600;          // media-max-video-seconds
    int max_items = 16;                      // media-max-items: images + videos of one request
    int64_t max_vision_tokens = 16384;       // media-max-vision-tokens: merged tokens of one request
    // Frame threads of one video's decoder (FFmpeg's frame threading: the frames are the same as
    // with one thread). ninferd gives it media-decode-threads, so one long video, which decodes
    // every frame to sample 2 a second, takes the pool's threads rather than one. 2: ninferd's
    // default.
    int decoder_threads = 2;
    // A video's decoder skips the frames that are neither sampled nor referenced by another frame
    // where that is exact (H.264 in MP4/MOV: MediaReader::decode_only); the sampled frames are the
    // same, bit for bit. false decodes every frame (the tests compare the two).
    bool skip_unsampled_frames = true;
};

} // namespace ninfer::core
