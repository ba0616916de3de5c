// ninfer::core - VisionEncoder: what the scheduler calls to turn a request's images and video into
// the embedding rows that replace their placeholder tokens (issue 31). The CPU tower
// (core/vision/vision_tower.h, make_cpu_vision_encoder) implements it; the engine sees only this.
//
// Contract:
// - encode(item) returns item.merged_tokens() rows of out_hidden() floats (the text model's hidden
//   size), in the order the item's placeholder tokens take them; ninfer::Error("vision: ...") for
//   an item the tower cannot take. Engine thread only (one call at a time).
// - encode_batch(items) returns encode(*item) for each item, in order; an encoder that runs
//   several items together (the GPU tower: one batch of GEMMs over a request's images) overrides
//   it. The engine encodes a request's items with one call.
// - image_token_id / video_token_id are the placeholder ids of the served model's tokenizer
//   (<|image_pad|>, <|video_pad|>); the scheduler finds each item's tokens by them.
#pragma once

#include "core/vision/vision_input.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core {

class VisionEncoder {
  public:
    virtual ~VisionEncoder() = default;
    virtual uint32_t out_hidden() const = 0;
    virtual std::vector<float> encode(const VisionInput& item) = 0;
    virtual std::vector<std::vector<float>> encode_batch(std::span<const VisionInput* const> items) {
        std::vector<std::vector<float>> out;
        for (const VisionInput* item : items)
            out.push_back(encode(*item));
        return out;
    }

    int32_t image_token_id = -1;
    int32_t video_token_id = -1;
};

} // namespace ninfer::core
