// ninfer tests - a daemon whose engine failed (server.h: it is exiting to be restarted) answers
// /health and generation requests on connections still open with 503 and the failure's reason.
#include "daemon/daemon_context.h"
#include "daemon/routes.h"
#include "http_harness.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::daemon;
using namespace ninfer::daemon::test;

namespace {

const std::string kFailure = "cuda: decode graph: an illegal memory access was encountered";

// One request through dispatch() of a context in ServeState::Failed; the raw response.
std::string ask_failed_daemon(const std::string& request) {
    Harness h(default_limits());
    core::Engine engine({});
    DaemonContext ctx;
    ctx.engine = &engine;
    ctx.model_id = "tiny";
    ctx.state = ServeState::Failed;
    ctx.failure = kFailure;
    h.custom = [&](HttpRequest& r, std::shared_ptr<ResponseWriter> w) {
        dispatch(ctx, r, std::move(w));
        return true;
    };
    return h.exchange(request, 1, "}");
}

} // namespace

TEST_CASE("after an engine failure /health says failed and why", "[failed_state]") {
    std::string got = ask_failed_daemon("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(got.rfind("HTTP/1.1 503", 0) == 0);
    CHECK_THAT(got, Catch::Contains(R"({"status":"failed","error":"the inference engine failed: )" + kFailure + "\"}"));
}

TEST_CASE("after an engine failure a generation request gets 503 engine_unavailable naming the failure",
          "[failed_state]") {
    const std::string body = R"({"model":"tiny","messages":[{"role":"user","content":"hi"}]})";
    std::string got = ask_failed_daemon("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    CHECK(got.rfind("HTTP/1.1 503", 0) == 0);
    CHECK_THAT(got, Catch::Contains(R"("code":"engine_unavailable")"));
    CHECK_THAT(got, Catch::Contains("the inference engine failed (" + kFailure + "); ninferd exits to be restarted"));
}
