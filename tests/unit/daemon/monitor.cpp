// ninfer tests - /monitor: the embedded page is daemon/monitor.html byte for byte, its CSP allows
// only hashed inline parts and same-origin fetches, and /monitor/stats has every field with the
// figures /metrics renders from the same context.
#include "daemon/metrics.h"
#include "daemon/monitor.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <fstream>
#include <sstream>

using namespace ninfer;
using namespace ninfer::daemon;

namespace {

std::string metric_value(const std::string& text, const std::string& name) {
    size_t at = text.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    at += name.size() + 2;
    return text.substr(at, text.find('\n', at) - at);
}

} // namespace

TEST_CASE("the embedded page is daemon/monitor.html and loads nothing from elsewhere", "[monitor]") {
    std::ifstream file(std::string(NINFER_SOURCE_DIR) + "/daemon/monitor.html", std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    std::string_view page = monitor_page();
    CHECK(page == bytes.str());
    for (const char* external : {"http://", "https://", "src=", "href=", "@import", "url("}) {
        INFO(external);
        CHECK(page.find(external) == std::string_view::npos);
    }
}

TEST_CASE("the monitor CSP allows hashed inline parts only", "[monitor]") {
    std::string csp = monitor_csp();
    CHECK(csp.find("default-src 'none'") != std::string::npos);
    CHECK(csp.find("script-src 'sha256-") != std::string::npos);
    CHECK(csp.find("style-src 'sha256-") != std::string::npos);
    CHECK(csp.find("connect-src 'self'") != std::string::npos);
    CHECK(csp.find("unsafe") == std::string::npos);
    CHECK(csp.find("nonce") == std::string::npos);
}

TEST_CASE("monitor stats carry every field, with the figures /metrics shows", "[monitor]") {
    core::Engine engine({});
    DaemonContext ctx;
    ctx.engine = &engine;
    ctx.model_id = "tiny";
    ctx.synthetic_weights = true;
    ctx.config.device = "auto";
    ctx.device_in_use = "cpu";
    ctx.config.max_pending = 7;
    ctx.state = ServeState::Ready;
    ctx.counters.http_responses_by_status[200] = 3;
    ctx.counters.http_responses_by_status[401] = 1;
    ctx.counters.n_chat_requests_total = 5;
    for (double s : {0.1, 0.3}) ctx.counters.ttft_seconds.observe(s);
    ctx.counters.request_seconds.observe(2.0);

    std::string json = render_monitor_stats(ctx);
    simdjson::dom::parser parser;
    simdjson::dom::element st = parser.parse(json);
    CHECK(std::string_view(st["model"]["id"]) == "tiny");
    CHECK(bool(st["model"]["synthetic_weights"]) == true);
    CHECK(std::string_view(st["model"]["device"]) == "cpu");
    CHECK(std::string_view(st["model"]["device_option"]) == "auto");
    CHECK(std::string_view(st["model"]["state"]) == "ready");
    CHECK(uint64_t(st["queue"]["max_pending_requests"]) == 7);
    CHECK(double(st["ttft_s"]["mean"]) == Approx(0.2));
    CHECK(uint64_t(st["ttft_s"]["count"]) == 2);
    CHECK(double(st["request_duration_s"]["sum"]) == Approx(2.0));
    CHECK(uint64_t(st["requests"]["chat_completions_total"]) == 5);
    CHECK(uint64_t(st["http_responses_total"]["401"]) == 1);
    for (const char* path : {"/uptime_s", "/lanes/total", "/lanes/running", "/lanes/prefilling", "/lanes/list",
                             "/queue/waiting_requests", "/throughput/prompt_tokens_per_s",
                             "/throughput/generated_tokens_per_s", "/throughput/busy_lanes_per_decode_step",
                             "/tokens/prompt_total", "/tokens/prompt_cached_total", "/tokens/prefill_total",
                             "/tokens/generated_total", "/compute_s/prefill_total", "/compute_s/decode_total",
                             "/decode_steps_total", "/kv_tokens/reserved", "/kv_tokens/capacity",
                             "/prefix_cache/hits_total", "/prefix_cache/misses_total", "/requests/finished_total",
                             "/requests/cancelled_total", "/requests/rejected_total",
                             "/requests/client_disconnects_total"}) {
        INFO(path);
        CHECK(st.at_pointer(path).error() == simdjson::SUCCESS);
    }

    std::string metrics = render_metrics(ctx);
    CHECK(metric_value(metrics, "ninfer_time_to_first_token_seconds_count") == "2");
    CHECK(std::to_string(uint64_t(st["kv_tokens"]["capacity"])) == metric_value(metrics, "ninfer_kv_capacity_tokens"));
    CHECK(std::to_string(int64_t(st["lanes"]["total"])) == metric_value(metrics, "ninfer_max_concurrency"));
    ctx.admission_paused = true;
    CHECK(std::string_view(parser.parse(render_monitor_stats(ctx))["model"]["state"]) == "draining");
}
