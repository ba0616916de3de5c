// ninfer::daemon - a request's media parts decoded on the media pool, with the per-request limits.
#include "daemon/media_input.h"

#include "core/media/media_decode.h"
#include "core/media/media_source.h"
#include "core/util/error.h"
#include "daemon/api_error.h"

#include <future>
#include <optional>

namespace ninfer::daemon {
namespace {

std::string resource_text(const core::Artifact& artifact, const char* role) {
    const core::ArtifactResource* r = artifact.resource("vision", role);
    return r ? std::string(r->text()) : std::string();
}

ApiError media_error(const std::exception& e, size_t index) {
    const ErrorInfo info = error_info(e);
    const std::string where = "media item " + std::to_string(index + 1) + ": ";
    if (info.kind == Errc::Unavailable) return {501, where + info.message, "media_decoding_unavailable", "messages", ""};
    if (info.kind == Errc::Invalid || info.kind == Errc::NotFound)
        return {400, where + info.message, "invalid_media", "messages", ""};
    return api_error_of(info, "messages");
}

} // namespace

bool has_media(const core::ChatConversation& conversation) {
    for (const core::ChatMessage& m : conversation.messages)
        for (const core::ContentPart& p : m.content)
            if (p.kind != core::ContentPart::Kind::Text) return true;
    return false;
}

MediaInput::MediaInput(const core::Artifact& artifact, const DaemonConfig& config)
    : takes_media_(artifact.has_component("vision")), allowed_local_dir_(config.allowed_local_media_path) {
    if (takes_media_)
        config_ = core::media_config_from_json(resource_text(artifact, "preprocessor_config.json"),
                                               resource_text(artifact, "video_preprocessor_config.json"));
    limits_.max_bytes = config.media_max_bytes;
    limits_.max_source_pixels = config.media_max_pixels;
    limits_.max_frames = config.media_max_frames;
    limits_.max_video_seconds = config.media_max_video_seconds;
    limits_.max_items = config.media_max_items;
    limits_.max_vision_tokens = config.media_max_vision_tokens;
    if (takes_media_) pool_ = std::make_unique<core::MediaPool>(config.media_decode_threads);
}

std::vector<core::VisionInput> MediaInput::decode(const core::ChatConversation& conversation) const {
    std::vector<const core::ContentPart*> parts;
    for (const core::ChatMessage& m : conversation.messages)
        for (const core::ContentPart& p : m.content)
            if (p.kind != core::ContentPart::Kind::Text) parts.push_back(&p);
    if (parts.size() > size_t(limits_.max_items))
        throw ApiError{400,
                       "the request has " + std::to_string(parts.size()) + " images and videos; this server takes at most " +
                           std::to_string(limits_.max_items) + " a request (ninferd --media-max-items)",
                       "too_many_media_items", "messages", ""};
    // Every item may use the request's whole byte budget; the sum is checked once all are read.
    std::vector<std::future<std::pair<core::VisionInput, uint64_t>>> jobs;
    for (const core::ContentPart* p : parts) {
        const auto kind = p->kind == core::ContentPart::Kind::Image ? core::VisionInput::Kind::Image : core::VisionInput::Kind::Video;
        jobs.push_back(pool_->submit([this, url = p->url, kind] {
            if (url.empty()) throw Error("media: the part names no image or video URL");
            const std::vector<uint8_t> bytes = core::media_source_bytes(url, allowed_local_dir_, limits_.max_bytes);
            return std::make_pair(core::decode_media(kind, bytes, config_, limits_), uint64_t(bytes.size()));
        }));
    }
    std::vector<core::VisionInput> items;
    uint64_t bytes = 0, tokens = 0;
    std::optional<ApiError> first_error;
    for (size_t i = 0; i < jobs.size(); ++i) {
        try {
            auto [item, n] = jobs[i].get(); // every job is waited for: none outlives the request
            bytes += n;
            tokens += item.merged_tokens();
            items.push_back(std::move(item));
        } catch (const std::exception& e) {
            if (!first_error) first_error = media_error(e, i);
        }
    }
    if (first_error) throw *first_error;
    if (bytes > limits_.max_bytes)
        throw ApiError{400, "the request's images and videos hold " + std::to_string(bytes >> 20) + " MiB; this server takes at most " +
                                std::to_string(limits_.max_bytes >> 20) + " MiB a request (ninferd --media-max-mib)",
                       "invalid_media", "messages", ""};
    if (tokens > uint64_t(limits_.max_vision_tokens))
        throw ApiError{400, "the request's images and videos take " + std::to_string(tokens) + " vision tokens; this server takes at most " +
                                std::to_string(limits_.max_vision_tokens) + " a request (ninferd --media-max-vision-tokens)",
                       "invalid_media", "messages", ""};
    return items;
}

} // namespace ninfer::daemon
