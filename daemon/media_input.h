// ninfer::daemon - a request's images and videos: read, decoded on the media pool, checked
// against the server's limits (issue 31).
//
// Contract:
// - MediaInput(artifact, config): takes_media() is whether the artifact has a vision component;
//   the processor settings come from its stored preprocessor_config.json /
//   video_preprocessor_config.json (core/media/media_config.h; defaults where absent); the
//   limits and the local-file directory from the media-* options. FFmpeg is not loaded here:
//   the first decode loads it (core/media/ffmpeg_api.h), so a server without it serves text.
// - decode(conversation) runs on a libuv pool thread (never the loop): core/media/media_request.h
//   on the media pool (media-decode-threads threads) with the media-* limits. Errors: ApiError
//   400 "invalid_media" (param "messages") with the decoder's message ("media item N: ..."); 501
//   "media_decoding_unavailable" naming the missing FFmpeg library.
// - set_on_decoded(f): after each successful decode, f(items, wall microseconds) (the engine's
//   media counters, /metrics); set before the first decode.
// - has_media(conversation): whether any message holds an Image or Video part.
// Thread safety: decode may run on several pool threads at once.
#pragma once

#include "core/artifact/artifact.h"
#include "core/frontend/chat_messages.h"
#include "core/media/media_config.h"
#include "core/media/media_pool.h"
#include "core/vision/vision_input.h"
#include "daemon/daemon_config.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ninfer::daemon {

class MediaInput {
  public:
    MediaInput(const core::Artifact& artifact, const DaemonConfig& config);
    bool takes_media() const { return takes_media_; }
    std::vector<core::VisionInput> decode(const core::ChatConversation& conversation) const;
    const core::MediaConfig& media_config() const { return config_; }
    const core::MediaLimits& limits() const { return limits_; }
    void set_on_decoded(std::function<void(uint64_t items, uint64_t wall_us)> f) { on_decoded_ = std::move(f); }

  private:
    bool takes_media_ = false;
    core::MediaConfig config_;
    core::MediaLimits limits_;
    std::string allowed_local_dir_;
    std::unique_ptr<core::MediaPool> pool_;
    std::function<void(uint64_t, uint64_t)> on_decoded_;
};

bool has_media(const core::ChatConversation& conversation);

} // namespace ninfer::daemon
