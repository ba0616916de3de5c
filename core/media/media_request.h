// ninfer::core - every image and video of a conversation decoded, with the per-request limits:
// what ninferd (daemon/media_input.h) and `ninferctl run --messages` share.
//
// Contract:
// - media_config_of(artifact): the vision component's stored preprocessor_config.json and
//   video_preprocessor_config.json read by media_config_from_json ("" where absent: defaults).
// - media_sources(conversation) lists the conversation's Image/Video parts in order (the order
//   their placeholders take in the rendered prompt).
// - decode_request_media(sources, config, limits, allowed_local_dir, pool) refuses more than
//   limits.max_items items, then runs one job per item on `pool` (media_source_bytes, then
//   decode_media), waits for every job (none outlives the call), and refuses a total above
//   limits.max_bytes or limits.max_vision_tokens. Returns the items in order.
//   Errors: ninfer::Error("media item N: ...") keeping the failing item's kind (Invalid: bad or
//   oversized media; NotFound: a missing file; Unavailable: FFmpeg cannot be loaded), the first
//   failing item in order; the totals and the item count are Invalid.
// Thread safety: reentrant; the pool's threads do the decoding.
#pragma once

#include "core/artifact/artifact.h"
#include "core/frontend/chat_messages.h"
#include "core/media/media_config.h"
#include "core/media/media_pool.h"
#include "core/vision/vision_input.h"

#include <span>
#include <string>
#include <vector>

namespace ninfer::core {

struct MediaSource {
    VisionInput::Kind kind = VisionInput::Kind::Image;
    std::string url;
};

MediaConfig media_config_of(const Artifact& artifact);
std::vector<MediaSource> media_sources(const ChatConversation& conversation);
std::vector<VisionInput> decode_request_media(std::span<const MediaSource> sources, const MediaConfig& config,
                                              const MediaLimits& limits, const std::string& allowed_local_dir,
                                              MediaPool& pool);

} // namespace ninfer::core
