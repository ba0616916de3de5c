// ninfer tests - /metrics text: every sample belongs to a family with HELP and TYPE, histograms are
// cumulative with +Inf = count over their own buckets, and the llama.cpp and vLLM names dashboards
// read are present.
#include "daemon/metrics.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <sstream>
#include <vector>

using namespace ninfer;
using namespace ninfer::daemon;

TEST_CASE("metrics text is well-formed Prometheus exposition", "[metrics]") {
    core::Engine engine({});
    DaemonContext ctx;
    ctx.engine = &engine;
    ctx.model_id = "tiny";
    ctx.state = ServeState::Ready;
    ctx.counters.http_responses_by_status[200] = 3;
    for (double s : {0.005, 0.3, 0.3, 100.0}) ctx.counters.ttft_seconds.observe(s);
    for (double n : {3.0, 700.0, 2'000'000.0}) ctx.counters.prompt_tokens.observe(n);
    ctx.counters.token_gap_seconds.observe(0.06);
    std::string text = render_metrics(ctx);

    std::map<std::string, std::string> types;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("# TYPE ", 0) == 0) {
            std::istringstream f(line.substr(7));
            std::string name, type;
            f >> name >> type;
            types[name] = type;
            continue;
        }
        if (line.empty() || line[0] == '#') continue;
        std::string name = line.substr(0, line.find_first_of("{ "));
        std::string family = name;
        for (const char* suffix : {"_bucket", "_sum", "_count"})
            if (!types.count(family) && family.size() > strlen(suffix) &&
                family.compare(family.size() - strlen(suffix), std::string::npos, suffix) == 0)
                family.resize(family.size() - strlen(suffix));
        INFO(line);
        CHECK(types.count(family) == 1);
    }
    for (const char* name : {"llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:requests_processing",
                             "llamacpp:requests_deferred", "llamacpp:n_busy_slots_per_decode", "ninfer_requests_total",
                             "ninfer_time_to_first_token_seconds"})
        CHECK(types.count(name) == 1);
    CHECK(types["ninfer_time_to_first_token_seconds"] == "histogram");
    CHECK(text.find("ninfer_time_to_first_token_seconds_bucket{le=\"0.01\"} 1\n") != std::string::npos);
    CHECK(text.find("ninfer_time_to_first_token_seconds_bucket{le=\"0.5\"} 3\n") != std::string::npos);
    CHECK(text.find("ninfer_time_to_first_token_seconds_bucket{le=\"60\"} 3\n") != std::string::npos);
    CHECK(text.find("ninfer_time_to_first_token_seconds_bucket{le=\"+Inf\"} 4\n") != std::string::npos);
    CHECK(text.find("ninfer_time_to_first_token_seconds_count 4\n") != std::string::npos);
    // vLLM's histograms under ninfer_ names, each with its own buckets.
    for (const char* name : {"ninfer_request_queue_time_seconds", "ninfer_inter_token_latency_seconds",
                             "ninfer_request_prompt_tokens", "ninfer_request_generation_tokens"})
        CHECK(types[name] == "histogram");
    CHECK(text.find("ninfer_request_prompt_tokens_bucket{le=\"2\"} 0\n") != std::string::npos);
    CHECK(text.find("ninfer_request_prompt_tokens_bucket{le=\"5\"} 1\n") != std::string::npos);
    CHECK(text.find("ninfer_request_prompt_tokens_bucket{le=\"1000\"} 2\n") != std::string::npos);
    CHECK(text.find("ninfer_request_prompt_tokens_bucket{le=\"1e+06\"} 2\n") != std::string::npos);
    CHECK(text.find("ninfer_request_prompt_tokens_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
    CHECK(text.find("ninfer_request_prompt_tokens_sum 2000703\n") != std::string::npos);
    CHECK(text.find("ninfer_inter_token_latency_seconds_bucket{le=\"0.05\"} 0\n") != std::string::npos);
    CHECK(text.find("ninfer_inter_token_latency_seconds_bucket{le=\"0.075\"} 1\n") != std::string::npos);
    CHECK(text.find("ninfer_request_generation_tokens_count 0\n") != std::string::npos);
    CHECK(text.find("ninfer_http_responses_total{code=\"200\"} 3\n") != std::string::npos);
    CHECK(text.find("ninfer_engine_ready 1\n") != std::string::npos);
    CHECK(text.find("ninfer_http_request_body_peak_bytes 0\n") != std::string::npos); // no server yet
}

TEST_CASE("metrics: the resident memory of the process and its peak, in bytes", "[metrics]") {
    ProcessMemory before = read_process_memory();
    REQUIRE(before.resident_bytes > 0);
    std::vector<char> touched(64 << 20, 1); // 64 MiB made resident
    ProcessMemory after = read_process_memory();
    CHECK(after.resident_peak_bytes >= before.resident_bytes + (60 << 20));
    CHECK(after.resident_peak_bytes >= after.resident_bytes);
    core::Engine engine({});
    DaemonContext ctx;
    ctx.engine = &engine;
    std::string text = render_metrics(ctx);
    auto value_of = [&](const std::string& name) {
        size_t at = text.find("\n" + name + " ");
        REQUIRE(at != std::string::npos);
        return std::stod(text.substr(at + name.size() + 2));
    };
    CHECK(value_of("ninfer_process_resident_peak_bytes") >= double(after.resident_peak_bytes));
    CHECK(value_of("ninfer_process_resident_bytes") > 0);
    CHECK(touched[12345] == 1);
}
