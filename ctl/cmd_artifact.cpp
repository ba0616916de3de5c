// ninfer::ctl - `ninferctl artifact upgrade [--offline] SRC [DST]`: v1/v2 container to V3
// (core/artifact/upgrade.h), by the daemon when one is reachable, else offline.
#include "core/artifact/upgrade.h"
#include "core/util/json_writer.h"
#include "ctl/command_list.h"
#include "ctl/control_common.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <unistd.h>

namespace ninfer::ctl {
namespace {

using Result = proto::ArtifactUpgradeReply;
using Progress = std::function<void(uint64_t done, uint64_t total)>;

// The daemon's working directory is not ours: it gets absolute paths.
std::string absolute_path(const std::string& path) {
    return path.empty() ? path : std::filesystem::absolute(path).lexically_normal().string();
}

Result upgrade_offline(const std::string& src, const std::string& dst, const Progress& progress) {
    core::ArtifactUpgradeOptions opt;
    opt.progress = progress;
    core::ArtifactUpgradeResult r = core::artifact_upgrade(src, dst, opt);
    return {r.destination, uint32_t(r.from_version), r.model_id, r.n_objects, r.n_bindings, r.n_uses,
            r.payload_bytes, r.copied_bytes, uint32_t(r.n_files)};
}

// nullopt when no daemon answers, or the one that does leaves the upgrade to us (no admin rights,
// an older daemon without the op): then it runs offline.
std::optional<Result> upgrade_by_daemon(const GlobalOptions& options, const std::string& src, const std::string& dst,
                                        const Progress& progress, std::string& why_not) {
    std::optional<proto::Client> client;
    try {
        client.emplace(connect_daemon(options));
    } catch (const proto::ClientError& e) {
        if (e.kind() != proto::ClientError::Kind::CannotConnect) throw;
        why_not = "no ninferd at " + options.socket;
        return std::nullopt;
    }
    // Progress frames can be far apart while the daemon syncs a large file.
    client->set_timeout_ms(int(std::max(options.timeout_s, 600.0) * 1000));
    try {
        client->send(proto::Op::ArtifactUpgrade,
                     proto::encode_payload(proto::ArtifactUpgradeRequest{absolute_path(src), absolute_path(dst)}));
        for (;;) {
            proto::Frame f = client->receive();
            if (f.header.flags & proto::kFlagEnd) {
                std::optional<Result> r = proto::decode_payload<Result>(f.payload);
                if (!r) throw proto::ClientError(proto::ClientError::Kind::Protocol, "malformed reply from the daemon");
                return r;
            }
            if (std::optional<proto::ProgressReply> p = proto::decode_payload<proto::ProgressReply>(f.payload))
                progress(p->done_bytes, p->total_bytes);
        }
    } catch (const proto::ClientError& e) {
        bool leave_to_us = e.status() == int32_t(proto::Status::Refused) || e.status() == int32_t(proto::Status::UnknownOp);
        if (e.kind() == proto::ClientError::Kind::Refused && leave_to_us) {
            why_not = std::string("ninferd: ") + e.what();
            return std::nullopt;
        }
        throw proto::ClientError(e.kind(), std::string("ninferd: ") + e.what(), e.status());
    }
}

void print_result(const Result& r, bool json, bool by_daemon) {
    if (json) {
        core::JsonWriter w;
        w.begin_object().member("destination", r.destination).member("from_version", int64_t(r.from_version));
        w.member("model_id", r.model_id).member("objects", r.n_objects).member("bindings", r.n_bindings);
        w.member("uses", r.n_uses).member("payload_bytes", r.payload_bytes).member("copied_bytes", r.copied_bytes);
        w.member("files", uint64_t(r.n_files)).member("by", by_daemon ? "ninferd" : "offline");
        std::printf("%s\n", w.end_object().take().c_str());
        return;
    }
    std::printf("%s: v%u -> V3 (%s, %llu objects, %llu bindings, %llu uses, %s payload in %u file%s)%s\n",
                r.destination.c_str(), r.from_version, r.model_id.c_str(), static_cast<unsigned long long>(r.n_objects),
                static_cast<unsigned long long>(r.n_bindings), static_cast<unsigned long long>(r.n_uses),
                format_bytes(r.payload_bytes).c_str(), r.n_files, r.n_files == 1 ? "" : "s",
                by_daemon ? " by ninferd" : "");
}

} // namespace

int cmd_artifact(int argc, char** argv) {
    return run_control(argc, argv, "ninferctl artifact upgrade [--offline] SRC [DST] [--json]", [](ControlArgs& a) {
        auto& p = a.positional;
        if (p.empty() || p[0] != "upgrade") throw UsageError(p.empty() ? "artifact needs a subcommand" : "unknown artifact subcommand '" + p[0] + "'");
        auto offline_flag = std::find(p.begin(), p.end(), "--offline");
        bool offline = offline_flag != p.end();
        if (offline) p.erase(offline_flag);
        if (p.size() < 2 || p.size() > 3) throw UsageError("artifact upgrade wants SRC [DST]");
        std::string src = p[1], dst = p.size() == 3 ? p[2] : "";
        bool tty = !a.options.json && ::isatty(STDERR_FILENO);
        auto last = std::chrono::steady_clock::now();
        Progress progress = [&](uint64_t done, uint64_t total) {
            auto now = std::chrono::steady_clock::now();
            if (a.options.json || (now - last < std::chrono::milliseconds(200) && done < total)) return;
            last = now;
            std::fprintf(stderr, tty ? "\rupgrading: %5.1f%% of %s" : "upgrading: %5.1f%% of %s\n",
                         total ? 100.0 * double(done) / double(total) : 100.0, format_bytes(total).c_str());
        };
        std::optional<Result> r;
        std::string why_not;
        if (!offline) r = upgrade_by_daemon(a.options, src, dst, progress, why_not);
        bool by_daemon = r.has_value();
        if (!by_daemon) {
            if (!offline) std::fprintf(stderr, "ninferctl: %s: upgrading offline\n", why_not.c_str());
            r = upgrade_offline(src, dst, progress);
        }
        if (tty) std::fprintf(stderr, "\n");
        print_result(*r, a.options.json, by_daemon);
        return 0;
    });
}

} // namespace ninfer::ctl
