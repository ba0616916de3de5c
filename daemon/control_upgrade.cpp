// ninfer::daemon - the artifact-upgrade control op: core::artifact_upgrade on the engine's I/O worker, progress streamed.
#include "core/artifact/upgrade.h"
#include "daemon/control_server.h"
#include "daemon/log.h"
#include "proto/messages.h"

#include <chrono>

namespace ninfer::daemon {

void handle_artifact_upgrade_op(ControlServer& s, const ControlServer::ConnPtr& c, const proto::Frame& f) {
    using proto::Status;
    std::optional<proto::ArtifactUpgradeRequest> req = proto::decode_payload<proto::ArtifactUpgradeRequest>(f.payload);
    if (!req) return s.reply_error(c, f, Status::BadMessage, "artifact-upgrade: malformed payload");
    // The daemon's working directory is not the client's: only absolute paths mean the same file.
    if (req->source.empty() || req->source[0] != '/' || (!req->destination.empty() && req->destination[0] != '/'))
        return s.reply_error(c, f, Status::Invalid, "artifact-upgrade: SOURCE and DESTINATION must be absolute paths");
    log_info("ctl, artifact upgrade " + req->source + " -> " +
             (req->destination.empty() ? std::string("in place") : req->destination) + " (the served model " +
             s.deps().ctx->config.artifact_path + " is not changed)");
    ControlServer* server = &s;
    s.deps().ctx->engine->post_io([server, c, f, request = *req] {
        using Clock = std::chrono::steady_clock;
        core::ArtifactUpgradeOptions options;
        Clock::time_point last{};
        options.progress = [&](uint64_t done, uint64_t total) {
            Clock::time_point now = Clock::now();
            if (now - last < std::chrono::milliseconds(200) && done < total) return;
            last = now;
            std::vector<uint8_t> frame = proto::encode_payload(proto::ProgressReply{done, total, ""});
            server->post([server, c, f, frame] { server->reply(c, f, Status::Ok, frame, proto::kFlagMore); });
        };
        try {
            core::ArtifactUpgradeResult r = core::artifact_upgrade(request.source, request.destination, options);
            proto::ArtifactUpgradeReply reply{r.destination, uint32_t(r.from_version), r.model_id, r.n_objects,
                                              r.n_bindings, r.n_uses, r.payload_bytes, r.copied_bytes,
                                              uint32_t(r.n_files)};
            std::vector<uint8_t> frame = proto::encode_payload(reply);
            log_info("ctl, artifact upgrade wrote " + r.destination + " (v" + std::to_string(r.from_version) + " -> V3)");
            server->post([server, c, f, frame] { server->reply(c, f, Status::Ok, frame, proto::kFlagEnd); });
        } catch (const std::exception& e) {
            ErrorInfo error = error_info(e);
            log_warning("ctl, " + error.message);
            server->post([server, c, f, error] { server->reply_error(c, f, error); });
        }
    });
}

} // namespace ninfer::daemon
