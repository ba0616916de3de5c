// ninfer::daemon - a request's media parts decoded on the media pool, with the per-request limits.
#include "daemon/media_input.h"

#include "core/media/media_request.h"
#include "core/util/error.h"
#include "daemon/api_error.h"

#include <chrono>

namespace ninfer::daemon {
namespace {

ApiError media_error(const std::exception& e) {
    const ErrorInfo info = error_info(e);
    if (info.kind == Errc::Unavailable) return {501, info.message, "media_decoding_unavailable", "messages", ""};
    if (info.kind == Errc::Invalid || info.kind == Errc::NotFound) return {400, info.message, "invalid_media", "messages", ""};
    return api_error_of(info, "messages");
}

} // namespace

bool has_media(const core::ChatConversation& conversation) { return !core::media_sources(conversation).empty(); }

MediaInput::MediaInput(const core::Artifact& artifact, const DaemonConfig& config)
    : takes_media_(artifact.has_component("vision")), allowed_local_dir_(config.allowed_local_media_path) {
    if (takes_media_) config_ = core::media_config_of(artifact);
    limits_.max_bytes = config.media_max_bytes;
    limits_.max_source_pixels = config.media_max_pixels;
    limits_.max_frames = config.media_max_frames;
    limits_.max_video_seconds = config.media_max_video_seconds;
    limits_.max_items = config.media_max_items;
    limits_.max_vision_tokens = config.media_max_vision_tokens;
    limits_.decoder_threads = int(config.media_decode_threads);
    if (takes_media_) pool_ = std::make_unique<core::MediaPool>(config.media_decode_threads);
}

std::vector<core::VisionInput> MediaInput::decode(const core::ChatConversation& conversation) const {
    const std::vector<core::MediaSource> sources = core::media_sources(conversation);
    try {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<core::VisionInput> items = core::decode_request_media(sources, config_, limits_, allowed_local_dir_, *pool_);
        if (on_decoded_)
            on_decoded_(items.size(), uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                                                   std::chrono::steady_clock::now() - t0).count()));
        return items;
    } catch (const std::exception& e) {
        throw media_error(e);
    }
}

} // namespace ninfer::daemon
