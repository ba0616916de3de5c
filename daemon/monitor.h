// ninfer::daemon - GET /monitor (a live HTML view of the server), GET /monitor/stats (the JSON
// the view polls every second) and GET /monitor/history (the last minutes its charts draw).
//
// Contract:
// - /monitor answers daemon/monitor.html (embedded at build time by daemon/embed_page.cmake) as
//   text/html with monitor_csp(): nothing but the page's own inline script and style (allowed by
//   their SHA-256) runs, and it may only fetch from its own origin. The page holds no figures,
//   so it is public like /health: a browser cannot send a Bearer header on navigation, and the
//   page must load to read the key (URL fragment #key=..., or a form) it then sends to
//   /monitor/stats as Authorization: Bearer. /monitor/stats and /monitor/history need the API
//   key like every other route. All three work while draining; CORS is dispatch's (daemon/cors.h).
// - render_monitor_stats(ctx) (loop thread) is one JSON object built from read_serve_figures and
//   the loop counters, the same figures /metrics renders. Units are in the names
//   (_s seconds, _tokens / *_tokens.* tokens, _per_s tokens per second, _total counts since start):
//     model {id, synthetic_weights, device (cpu|cuda|script), device_option (--device), state (loading|ready|draining|failed), version}
//     uptime_s
//     lanes {total, running, prefilling, list [{id, phase (idle|prefill|decode), tokens}]}
//     queue {waiting_requests, max_pending_requests (--max-pending)}
//     throughput {prompt_tokens_per_s, generated_tokens_per_s, busy_lanes_per_decode_step}
//     tokens {prompt_total, prompt_cached_total, prefill_total, generated_total}
//     compute_s {prefill_total, decode_total}, decode_steps_total
//     ttft_s {count, sum, mean}, request_duration_s {count, sum, mean} (LoopCounters histograms)
//     kv_tokens {reserved, capacity}
//     prefix_cache {hits_total, misses_total} (admissions)
//     requests {finished_total, cancelled_total, rejected_total, chat_completions_total,
//               client_disconnects_total}
//     http_responses_total {"<status>": count}
//   Per-second rates are the page's: counter deltas between two polls over the time between them.
// - GET /monitor/history[?after=SEQ] (API key, like /monitor/stats) answers MonitorHistory's JSON
//   (daemon/monitor_history.h: one sample a second, the last 5 minutes, samples after SEQ only);
//   a malformed after is 400 invalid_request_error with param "after". The page fetches it all
//   once, then only the samples after the last one it holds, so a reload shows the last minutes.
#pragma once

#include "daemon/daemon_context.h"

#include <string>
#include <string_view>

namespace ninfer::daemon {

std::string render_monitor_stats(const DaemonContext& ctx);
std::string monitor_csp(); // the Content-Security-Policy header value for /monitor
std::string_view monitor_page(); // the embedded daemon/monitor.html, byte for byte

} // namespace ninfer::daemon
