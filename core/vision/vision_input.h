// ninfer::core - VisionInput: one image or video, decoded, resized and patchified for the tower.
//
// Contract (the seam between core/media, which produces it, and core/vision, which consumes it):
// - One VisionInput is one media item of a request (one image_url / video_url / input_image /
//   Anthropic image block). core/media fills it on a decode worker thread; it is then moved,
//   never shared, into the request and on to the engine thread. Plain data: no thread affinity.
// - Geometry in patches: the resized frame is grid_h * patch_size pixels high and grid_w *
//   patch_size wide; grid_h and grid_w are multiples of merge_size (the resize makes the frame
//   a multiple of patch_size * merge_size = 32 px, docs/MODEL.md §9). grid_t counts temporal
//   patches of temporal_patch_size frames: a still image is its frame duplicated (grid_t = 1), a
//   video of F sampled frames (F even; an odd count repeats the last frame, as transformers'
//   patchify pads) has grid_t = F / temporal_patch_size.
// - patches: row-major [grid_t * grid_h * grid_w, 3 * temporal_patch_size * patch_size^2] f32,
//   exactly transformers' `pixel_values` / `pixel_values_videos` for this item
//   (Qwen2VLImageProcessor._preprocess and Qwen3VLVideoProcessor.patchify): the frames
//   [grid_t*T, C, H, W] are viewed as
//     (grid_t, T, C, grid_h/M, M, P, grid_w/M, M, P)
//   and permuted to (0, 3, 6, 4, 7, 2, 1, 5, 8), i.e.
//     rows:    t, block_y, block_x, merge_y, merge_x   (slowest .. fastest)
//     columns: c, frame-within-pair, y-within-patch, x-within-patch (slowest .. fastest)
//   where T = temporal_patch_size, C = 3 (RGB), M = merge_size, P = patch_size. So the four
//   patches of one 2x2 merge group are consecutive rows (the merger's 4*hidden input), and a
//   patch's row is the Conv3d kernel's [C, T, P, P] flattened. Row r's pixel position:
//     t = r / (gh*gw);  q = r % (gh*gw);  by = q / ((gw/M)*M*M);  bx = (q / (M*M)) % (gw/M);
//     my = (q / M) % M;  mx = q % M;  patch_y = by*M + my;  patch_x = bx*M + mx.
//   Column k: c = k / (T*P*P); tt = (k / (P*P)) % T; y = (k / P) % P; x = k % P; the value is
//   frame (t*T + tt), channel c, pixel (patch_y*P + y, patch_x*P + x).
// - Values are normalised as the artifact's preprocessor config says; Qwen3.5's is
//   mean = std = 0.5 after rescaling by 1/255: (p/255 - 0.5) / 0.5, in [-1, 1].
// - digest: SHA-256 over the item's kind, its geometry and its resized 8-bit RGB frames
//   (core/media/media_digest.h says exactly what), so equal digests mean the same tower input.
//   The prefix cache and slot files key on it (ARCHITECTURE §5: media digests).
// - merged_tokens(): how many placeholder tokens the item takes in the prompt (one per merged
//   2x2 group per temporal patch) = the number of embedding rows the tower returns for it.
//   Prompt expansion (core/media/placeholders.h, mirroring Qwen3VLProcessor.__call__): an image is
//   <|vision_start|> <|image_pad|> x merged_tokens() <|vision_end|>; a video is, per temporal
//   patch t, the text "<{timestamps_s[t]:.1f} seconds>" then <|vision_start|>
//   <|video_pad|> x (merged_tokens() / grid_t) <|vision_end|>. The tower's embedding rows replace
//   the pad tokens in order (image_token_id 248056, video_token_id 248057; docs/MODEL.md §2.2).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ninfer::core {

struct VisionInput {
    enum class Kind { Image, Video };
    Kind kind = Kind::Image;
    int grid_t = 0; // temporal patches (frame pairs)
    int grid_h = 0; // patch rows
    int grid_w = 0; // patch columns
    int patch_size = 16;         // P, pixels (vision_config.patch_size)
    int temporal_patch_size = 2; // T, frames (vision_config.temporal_patch_size)
    int merge_size = 2;          // M (vision_config.spatial_merge_size)
    // Video: one time per temporal patch, seconds: the mean of its first and last frame's time
    // (frame index / source fps), as Qwen3VLProcessor._calculate_timestamps computes it. The
    // prompt expansion writes each as "<%.1f seconds>" before that patch's vision span. Image: empty.
    std::vector<double> timestamps_s;
    std::vector<float> patches;  // [grid_t*grid_h*grid_w, 3*T*P*P], order above
    std::array<uint8_t, 32> digest{};

    size_t n_patches() const { return size_t(grid_t) * size_t(grid_h) * size_t(grid_w); }
    size_t patch_dim() const { return size_t(3) * size_t(temporal_patch_size) * size_t(patch_size) * size_t(patch_size); }
    size_t merged_tokens() const { return n_patches() / (size_t(merge_size) * size_t(merge_size)); }
};

} // namespace ninfer::core
