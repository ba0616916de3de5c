// ninfer::core - the chat template's vision placeholders expanded to one token per merged vision
// token, as transformers' Qwen3VLProcessor.__call__ does to the rendered text.
//
// Contract: expand_vision_placeholders(text, items) walks the rendered prompt and replaces, in
// order, each "<|vision_start|><|image_pad|><|vision_end|>" with the next Image item's
//   <|vision_start|> + <|image_pad|> x merged_tokens() + <|vision_end|>
// and each "<|vision_start|><|video_pad|><|vision_end|>" with the next Video item's, per temporal
// patch t,
//   "<{timestamps_s[t]:.1f} seconds>" + <|vision_start|> + <|video_pad|> x (merged_tokens()/grid_t)
//   + <|vision_end|>.
// items are in the order of the message parts (images and videos interleaved as sent); the
// placeholders must match them one for one in order and kind, else Error("media: ...") (a
// client that typed a placeholder into its text is refused, not mis-aligned). The tokenizer
// then turns each special-token text into its id; the text between is tokenized as transformers
// tokenizes it, since the expansion happens on the text.
// Thread safety: pure.
#pragma once

#include "core/vision/vision_input.h"

#include <span>
#include <string>
#include <string_view>

namespace ninfer::core {

std::string expand_vision_placeholders(std::string_view text, std::span<const VisionInput> items);

} // namespace ninfer::core
