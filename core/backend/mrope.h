// ninfer::core - M-RoPE positions of a multimodal prompt (docs/MODEL.md §5, transformers'
// Qwen3_5Model.get_rope_index), the shape the backends' multimodal prefill takes them in.
//
// Contract:
// - MropePosition is one token's temporal, height and width position; a text token has
//   t = h = w, which makes interleaved M-RoPE exactly plain 1-D RoPE (docs/MODEL.md §5).
// - MediaGrid is one image or video of the prompt, in prompt order, in patches: t temporal
//   patches of h x w patches (h, w multiples of `merge`).
// - mrope_positions(tokens, image_token, video_token, media, merge) follows get_rope_index: the
//   prompt splits into runs of consecutive tokens of one kind (image pad, video pad, anything
//   else). A text run of n tokens takes p .. p+n-1 on all three axes, then p += n. An image run
//   takes the next image; a video run takes the next temporal patch of the next video (each video
//   is split into grid_t grids of one temporal patch, since the prompt puts a timestamp between
//   them). Its tokens, in merged order (temporal patch, row, column over the h/merge x w/merge
//   grid), take t = p + temporal patch, h = p + row, w = p + column; then p += max(h, w) / merge.
//   `next` is p at the end: the largest position + 1, where the text after the prompt continues
//   (decode positions are token index + next - prompt length: transformers' rope_deltas).
//   ninfer::Error("mrope: ...") when a run's length differs from its grid's merged tokens, or the
//   prompt's runs and the media do not pair up one to one.
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core {

struct MropePosition {
    uint32_t t = 0, h = 0, w = 0;
    static MropePosition text(uint32_t p) { return {p, p, p}; }
    bool operator==(const MropePosition&) const = default;
};

struct MediaGrid {
    bool video = false;
    uint32_t t = 1, h = 0, w = 0; // in patches
};

struct MropeLayout {
    std::vector<MropePosition> positions; // one per token
    uint32_t next = 0;                    // the position after the prompt
};

MropeLayout mrope_positions(std::span<const int32_t> tokens, int32_t image_token, int32_t video_token,
                            std::span<const MediaGrid> media, uint32_t merge);

} // namespace ninfer::core
