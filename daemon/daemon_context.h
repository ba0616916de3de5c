// ninfer::daemon - the state the loop thread's handlers share: config, serving state, engine,
// frontend, live chat sessions and loop-side counters.
//
// Contract: loop thread only, except `engine` (thread-safe posts) and its atomic stats. The
// frontend is set once the engine reports Ready. Sessions register themselves under their request
// id and remove themselves when the engine has reported their end (finished or rejected).
#pragma once

#include "core/engine/engine.h"
#include "core/grammar/grammar_cache.h"
#include "daemon/config_load.h"
#include "daemon/http_server.h"
#include "daemon/loop_bridge.h"
#include "daemon/model_frontend.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <uv.h>

namespace ninfer::daemon {

enum class ServeState : uint8_t { Loading, Ready, Failed, Draining };

class ChatSession;
class MonitorHistory;
class ResponseStore;

// Histogram bucket bounds (Prometheus `le`). Latencies in seconds (TTFT, queue time, request
// duration) up to an hour: an agent's long turn (a 32K-token answer on a CPU) must not land in
// +Inf only. The gap between two tokens of a reply: vLLM's inter-token latency buckets. Token
// counts of a request: vLLM's 1-2-5 series, up to a million.
inline constexpr std::array<double, 17> kLatencyBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5, 5,
                                                           10,   30,    60,   120, 300,  600, 1800, 3600};
inline constexpr std::array<double, 19> kTokenGapBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                            0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
inline constexpr std::array<double, 19> kTokenCountBuckets = {1,     2,     5,      10,     20,     50,    100,
                                                              200,   500,   1000,   2000,   5000,   10000, 20000,
                                                              50000, 100000, 200000, 500000, 1000000};

struct Histogram {
    explicit Histogram(std::span<const double> bucket_bounds = kLatencyBuckets)
        : bounds(bucket_bounds), counts(bucket_bounds.size()) {}
    std::span<const double> bounds; // a constant table above
    std::vector<uint64_t> counts;   // per bucket, not cumulative
    uint64_t count = 0;
    double sum = 0;
    void observe(double value);
};

struct LoopCounters {
    std::map<int, uint64_t> http_responses_by_status; // every response, counted by HttpServer::on_response
    uint64_t n_chat_requests_total = 0;
    uint64_t n_client_disconnects_total = 0;
    Histogram ttft_seconds;                             // arrival -> first token
    Histogram request_seconds;                          // arrival -> last token
    Histogram queue_seconds;                            // arrival -> a lane takes it (Admitted)
    Histogram token_gap_seconds{kTokenGapBuckets};      // between two tokens of one reply
    Histogram prompt_tokens{kTokenCountBuckets};        // a finished request's prompt
    Histogram generation_tokens{kTokenCountBuckets};    // a finished request's output
    uint64_t n_tokens_max = 0; // largest prompt + generated tokens of a finished request
};

struct DaemonContext {
    DaemonConfig config;
    Settings settings; // the effective settings' text (status --settings); apply_reload keeps both in step
    std::string model_id;
    bool synthetic_weights = false; // the artifact holds seeded random weights (convert --synthetic)
    std::string device_in_use;      // the backend --device resolved to: "cpu", "cuda" or "script"
    uv_loop_t* loop = nullptr;
    LoopBridge* bridge = nullptr;
    core::Engine* engine = nullptr;
    const HttpServer* http = nullptr; // its memory peaks and write figures for /metrics; null before listening
    std::shared_ptr<ModelFrontend> frontend;
    ServeState state = ServeState::Loading;
    bool admission_paused = false; // ninferctl drain: new requests 503 until resume
    std::string failure; // why the engine failed
    int64_t created_unix = 0;
    uint64_t next_request_id = 1;
    std::unordered_map<uint64_t, std::shared_ptr<ChatSession>> sessions;
    std::shared_ptr<ResponseStore> response_store; // /v1/responses, made on first use
    // Compiled grammars of constrained requests (grammar-cache entries), made on first use; the
    // worker pool's threads compile into it (thread-safe).
    std::shared_ptr<core::grammar::GrammarCache> grammar_cache;
    LoopCounters counters;
    std::shared_ptr<MonitorHistory> monitor_history; // /monitor/history; the Daemon samples it once a second
    std::function<void()> on_session_end; // the drain check
};

} // namespace ninfer::daemon
