// ninfer::core - a multimodal prompt made ready for Backend::prefill_with (issue 31): the vision
// tower's rows at the placeholder tokens and the prompt's M-RoPE positions.
//
// Contract:
// - prepare_vision_prefill(prompt, media, encoder, skip_before) pairs the prompt's placeholder runs
//   (encoder.image_token_id, encoder.video_token_id) with `media` in prompt order, per kind (an image
//   is one run; a video is one run per temporal patch, since the prompt puts its timestamp text
//   between them), computes the whole prompt's positions (core/backend/mrope.h) and runs the
//   encoder over every item that has a placeholder at or after `skip_before` (tokens before it are
//   already in the lane: a reused prefix needs no rows), in one encode_batch call (prompt order). Placeholder i at or after skip_before gets
//   rows[i], the index of its row in `embeddings`; every other token -1.
//   ninfer::Error("vision: ..." or "mrope: ...") when runs and media do not pair up.
// - chunk(begin, n) is prefill_with's input for prompt tokens [begin, begin + n); the spans point
//   into this object, which must outlive the call.
// - tower_ms is the time the encoder took (the share of this prompt's prefill spent in the tower).
// Thread safety: engine thread (the encoder's).
#pragma once

#include "core/backend/backend.h"
#include "core/backend/mrope.h"
#include "core/backend/vision_encoder.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core {

struct VisionPrefill {
    std::vector<MropePosition> positions; // one per prompt token
    std::vector<int32_t> rows;            // one per prompt token, -1 = the token's own embedding
    std::vector<float> embeddings;        // [n rows][encoder.out_hidden()]
    uint32_t next_position = 0;           // where text after the prompt continues
    double tower_ms = 0;
    size_t n_items_encoded = 0;

    PrefillInputs chunk(size_t begin, size_t n) const {
        return {std::span(positions).subspan(begin, n), std::span(rows).subspan(begin, n), embeddings};
    }
};

VisionPrefill prepare_vision_prefill(std::span<const int32_t> prompt, std::span<const VisionInput> media,
                                     VisionEncoder& encoder, size_t skip_before);

} // namespace ninfer::core
