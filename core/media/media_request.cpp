// ninfer::core - a request's media decoded on the pool, with the item, byte and vision-token limits.
#include "core/media/media_request.h"

#include "core/media/media_decode.h"
#include "core/media/media_source.h"
#include "core/util/error.h"

#include <future>
#include <optional>

namespace ninfer::core {

MediaConfig media_config_of(const Artifact& artifact) {
    auto text_of = [&](const char* role) {
        const ArtifactResource* r = artifact.resource("vision", role);
        return r ? std::string(r->text()) : std::string();
    };
    return media_config_from_json(text_of("preprocessor_config.json"), text_of("video_preprocessor_config.json"));
}

std::vector<MediaSource> media_sources(const ChatConversation& conversation) {
    std::vector<MediaSource> out;
    for (const ChatMessage& m : conversation.messages)
        for (const ContentPart& p : m.content)
            if (p.kind != ContentPart::Kind::Text)
                out.push_back({p.kind == ContentPart::Kind::Image ? VisionInput::Kind::Image : VisionInput::Kind::Video, p.url});
    return out;
}

std::vector<VisionInput> decode_request_media(std::span<const MediaSource> sources, const MediaConfig& config,
                                              const MediaLimits& limits, const std::string& allowed_local_dir,
                                              MediaPool& pool) {
    if (sources.size() > size_t(limits.max_items))
        throw Error("media: the request has " + std::to_string(sources.size()) + " images and videos; this server takes at most " +
                    std::to_string(limits.max_items) + " a request (ninferd --media-max-items)");
    // Every item may use the request's whole byte budget; the sum is checked once all are read.
    std::vector<std::future<std::pair<VisionInput, uint64_t>>> jobs;
    for (const MediaSource& s : sources)
        jobs.push_back(pool.submit([&config, &limits, &allowed_local_dir, s] {
            if (s.url.empty()) throw Error("media: the part names no image or video URL");
            const std::vector<uint8_t> bytes = media_source_bytes(s.url, allowed_local_dir, limits.max_bytes);
            return std::make_pair(decode_media(s.kind, bytes, config, limits), uint64_t(bytes.size()));
        }));
    std::vector<VisionInput> items;
    uint64_t bytes = 0, tokens = 0;
    std::optional<Error> first_error;
    for (size_t i = 0; i < jobs.size(); ++i) {
        try {
            auto [item, n] = jobs[i].get();
            bytes += n;
            tokens += item.merged_tokens();
            items.push_back(std::move(item));
        } catch (const std::exception& e) {
            const ErrorInfo info = error_info(e);
            if (!first_error) first_error = Error(info.kind, "media item " + std::to_string(i + 1) + ": " + info.message);
        }
    }
    if (first_error) throw *first_error;
    if (bytes > limits.max_bytes)
        throw Error("media: the request's images and videos hold " + std::to_string(bytes >> 20) + " MiB; this server takes at most " +
                    std::to_string(limits.max_bytes >> 20) + " MiB a request (ninferd --media-max-mib)");
    if (tokens > uint64_t(limits.max_vision_tokens))
        throw Error("media: the request's images and videos take " + std::to_string(tokens) + " vision tokens; this server takes at most " +
                    std::to_string(limits.max_vision_tokens) + " a request (ninferd --media-max-vision-tokens)");
    return items;
}

} // namespace ninfer::core
