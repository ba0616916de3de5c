// ninfer tests - the daemon's artifact-upgrade op over a real control socket: progress frames, the
// end frame's summary and the V3 file it wrote (full 27B v2 inventory, sparse); a relative path and a
// file that is not v1/v2 get one error frame and the connection stays usable; ninferctl (when
// built) sends its upgrade to the reachable daemon, a relative path made absolute.
#include "core/artifact/artifact.h"
#include "core/artifact/upgrade.h"
#include "core/engine/engine.h"
#include "daemon/control_server.h"
#include "daemon/loop_bridge.h"
#include "proto/client.h"
#include "proto/messages.h"
#include "tests/unit/artifact/legacy_file.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <unistd.h>

using namespace ninfer;
using namespace ninfer::daemon;

namespace {

struct Refusal {
    int32_t status = 0;
    std::string message;
};

Refusal refusal_of(proto::Client& c, const proto::ArtifactUpgradeRequest& request) {
    try {
        c.call(proto::Op::ArtifactUpgrade, proto::encode_payload(request));
    } catch (const proto::ClientError& e) {
        return {e.status(), e.what()};
    }
    return {};
}

} // namespace

TEST_CASE("artifact-upgrade by the daemon streams progress and writes the V3 file", "[control_upgrade]") {
    char tmpl[] = "/tmp/ninfer-ctl-upgrade-XXXXXX";
    std::string dir = ::mkdtemp(tmpl);
    // The model the daemon serves: a V3 file (the control server only reads its identity).
    std::string served = dir + "/served.ninfer";
    test::build_legacy(dir + "/served-v1.ninfer", "qwen3.6-27b", 1);
    core::artifact_upgrade(dir + "/served-v1.ninfer", served);
    DaemonConfig config;
    config.artifact_path = served;
    config.control_socket = dir + "/ctl/control.sock";
    config.state_dir = dir + "/state";
    PlannedModel model;
    model.artifact = core::Artifact::open(served);
    model.model_id = "served";
    std::string legacy = dir + "/legacy.ninfer";
    test::Built built = test::build_legacy(legacy, "qwen3.6-27b", 2);
    test::build_legacy(dir + "/by-ctl.ninfer", "qwen3.6-35b-a3b", 1);
    std::string ctl_bin = std::string(NINFER_BINARY_DIR) + "/ctl/ninferctl";
    bool have_ctl = ::access(ctl_bin.c_str(), X_OK) == 0;

    uv_loop_t loop;
    uv_loop_init(&loop);
    auto bridge = std::make_unique<LoopBridge>(&loop);
    core::Engine engine({}); // never started: the upgrade runs on its I/O worker only
    DaemonContext ctx;
    ctx.config = config;
    ctx.loop = &loop;
    ctx.bridge = bridge.get();
    ctx.engine = &engine;
    auto server = std::make_unique<ControlServer>(&loop, ControlDeps{&ctx, &model, [] {}, {}});
    REQUIRE(server->start().empty());

    // The client runs on its own thread while the loop runs here; results are checked after.
    std::atomic<bool> finished{false};
    std::string client_error;
    size_t n_progress = 0;
    uint64_t last_done = 0, last_total = 0;
    bool monotonic = true;
    std::optional<proto::ArtifactUpgradeReply> reply;
    Refusal relative, not_legacy;
    std::string ctl_output;
    int ctl_status = -1;
    std::thread client([&] {
        try {
            proto::Client c = proto::Client::connect(config.control_socket, 20000);
            c.set_timeout_ms(300000);
            c.send(proto::Op::ArtifactUpgrade, proto::encode_payload(proto::ArtifactUpgradeRequest{legacy, ""}));
            for (;;) {
                proto::Frame f = c.receive();
                if (f.header.flags & proto::kFlagEnd) {
                    reply = proto::decode_payload<proto::ArtifactUpgradeReply>(f.payload);
                    break;
                }
                std::optional<proto::ProgressReply> p = proto::decode_payload<proto::ProgressReply>(f.payload);
                if (!p || !(f.header.flags & proto::kFlagMore)) throw std::runtime_error("bad progress frame");
                monotonic = monotonic && p->done_bytes >= last_done;
                last_done = p->done_bytes;
                last_total = p->total_bytes;
                ++n_progress;
            }
            relative = refusal_of(c, {"legacy.ninfer", ""});
            not_legacy = refusal_of(c, {served, dir + "/copy.ninfer"});
            // ninferctl sends it to this daemon, with the relative path made absolute.
            if (have_ctl) {
                std::string cmd = "cd " + dir + " && " + ctl_bin + " --socket " + config.control_socket +
                                  " --json artifact upgrade by-ctl.ninfer 2>&1";
                FILE* out = ::popen(cmd.c_str(), "r");
                char buf[4096];
                while (out && std::fgets(buf, sizeof buf, out)) ctl_output += buf;
                ctl_status = out ? ::pclose(out) : -1;
            }
        } catch (const std::exception& e) {
            client_error = e.what();
        }
        finished = true;
        bridge->post([] {}); // wake the loop
    });
    while (!finished) uv_run(&loop, UV_RUN_ONCE);
    client.join();
    server->close();
    server.reset(); // joins the I/O worker
    bridge->close();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);

    REQUIRE(client_error.empty());
    REQUIRE(reply);
    CHECK(reply->destination == legacy);
    CHECK(reply->from_version == 2);
    CHECK(reply->model_id == "qwen3.6-27b");
    CHECK(reply->payload_bytes == built.file_bytes - built.payload_start);
    CHECK(n_progress > 0);
    CHECK(monotonic);
    CHECK(last_done == last_total);
    CHECK(last_total == reply->payload_bytes);
    std::unique_ptr<core::Artifact> upgraded = core::Artifact::open(legacy); // V3 now, in place
    CHECK(upgraded->bindings().size() == reply->n_bindings);
    CHECK(upgraded->payload_bytes() == reply->payload_bytes);
    CHECK(relative.status == int32_t(proto::Status::Invalid));
    CHECK_THAT(relative.message, Catch::Contains("absolute"));
    CHECK(not_legacy.status == int32_t(proto::Status::Invalid));
    CHECK_THAT(not_legacy.message, Catch::Contains("artifact upgrade"));
    CHECK_FALSE(std::filesystem::exists(dir + "/copy.ninfer"));
    if (have_ctl) {
        CHECK(ctl_status == 0);
        CHECK_THAT(ctl_output, Catch::Contains("\"by\":\"ninferd\"") && Catch::Contains("\"from_version\":1"));
        CHECK(core::Artifact::open(dir + "/by-ctl.ninfer")->metadata_name() == "qwen3.6-35b-a3b");
    } else {
        WARN("ninferctl not built (" << ctl_bin << "): its daemon path was not run");
    }
    std::filesystem::remove_all(dir);
}
