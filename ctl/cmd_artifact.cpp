// ninfer::ctl - `ninferctl artifact upgrade SRC [DST]`: v1/v2 container to V3, offline (core/artifact/upgrade.h).
#include "core/artifact/upgrade.h"
#include "core/util/json_writer.h"
#include "ctl/command_list.h"
#include "ctl/control_common.h"

#include <chrono>
#include <cstdio>
#include <unistd.h>

namespace ninfer::ctl {

int cmd_artifact(int argc, char** argv) {
    return run_control(argc, argv, "ninferctl artifact upgrade SRC [DST] [--json]", [](ControlArgs& a) {
        const auto& p = a.positional;
        if (p.empty() || p[0] != "upgrade") throw UsageError(p.empty() ? "artifact needs a subcommand" : "unknown artifact subcommand '" + p[0] + "'");
        if (p.size() < 2 || p.size() > 3) throw UsageError("artifact upgrade wants SRC [DST]");
        core::ArtifactUpgradeOptions opt;
        bool tty = !a.options.json && ::isatty(STDERR_FILENO);
        auto last = std::chrono::steady_clock::now();
        opt.progress = [&](uint64_t done, uint64_t total) {
            auto now = std::chrono::steady_clock::now();
            if (a.options.json || (now - last < std::chrono::milliseconds(200) && done < total)) return;
            last = now;
            std::fprintf(stderr, tty ? "\rupgrading: %5.1f%% of %s" : "upgrading: %5.1f%% of %s\n",
                         total ? 100.0 * double(done) / double(total) : 100.0, format_bytes(total).c_str());
        };
        core::ArtifactUpgradeResult r = core::artifact_upgrade(p[1], p.size() == 3 ? p[2] : "", opt);
        if (tty) std::fprintf(stderr, "\n");
        if (a.options.json) {
            core::JsonWriter w;
            w.begin_object().member("destination", r.destination).member("from_version", r.from_version);
            w.member("model_id", r.model_id).member("objects", uint64_t(r.n_objects)).member("bindings", uint64_t(r.n_bindings));
            w.member("uses", uint64_t(r.n_uses)).member("payload_bytes", r.payload_bytes).member("copied_bytes", r.copied_bytes);
            w.member("files", uint64_t(r.n_files));
            std::printf("%s\n", w.end_object().take().c_str());
        } else {
            std::printf("%s: v%d -> V3 (%s, %zu objects, %zu bindings, %zu uses, %s payload in %zu file%s)\n",
                        r.destination.c_str(), r.from_version, r.model_id.c_str(), r.n_objects, r.n_bindings, r.n_uses,
                        format_bytes(r.payload_bytes).c_str(), r.n_files, r.n_files == 1 ? "" : "s");
        }
        return 0;
    });
}

} // namespace ninfer::ctl
