// ninfer::daemon - GET /monitor (the embedded live page), /monitor/stats and /monitor/history (its JSON).
#include "daemon/monitor.h"

#include "core/util/json_writer.h"
#include "daemon/api_error.h"
#include "daemon/monitor_history.h"
#include "daemon/routes.h"
#include "daemon/serve_figures.h"
#include "generated/monitor_page.h" // from daemon/monitor.html, see daemon/CMakeLists.txt

#include <charconv>

namespace ninfer::daemon {
namespace {

const char* state_name(ServeState s) {
    switch (s) {
    case ServeState::Loading: return "loading";
    case ServeState::Ready: return "ready";
    case ServeState::Draining: return "draining";
    case ServeState::Failed: break;
    }
    return "failed";
}

void write_histogram(core::JsonWriter& w, std::string_view name, const Histogram& h) {
    w.key(name).begin_object().member("count", h.count).member("sum", h.sum).member("mean", mean_seconds(h)).end_object();
}

// ?after=SEQ of /monitor/history: the last sample the caller holds (0, all, when absent).
uint64_t after_seq_of(std::string_view query) {
    while (!query.empty()) {
        const size_t amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        if (!pair.starts_with("after=")) continue;
        const std::string_view digits = pair.substr(6);
        uint64_t seq = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
        if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
            throw bad_request("after: expected the sequence number of a sample (digits), got '" + std::string(digits) + "'",
                              "after");
        return seq;
    }
    return 0;
}

} // namespace

std::string monitor_csp() {
    return "default-src 'none'; script-src '" + std::string(kMonitorPageScriptHash) + "'; style-src '" +
           std::string(kMonitorPageStyleHash) +
           "'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
}

std::string_view monitor_page() { return kMonitorPage; }

std::string render_monitor_stats(const DaemonContext& ctx) {
    const ServeFigures f = read_serve_figures(ctx);
    const LoopCounters& c = ctx.counters;
    core::JsonWriter w;
    w.begin_object().key("model").begin_object().member("id", ctx.model_id).member("synthetic_weights", ctx.synthetic_weights);
    w.member("device", ctx.device_in_use).member("device_option", ctx.config.device).member("state", ctx.admission_paused ? "draining" : state_name(ctx.state));
    w.member("version", NINFER_VERSION_STRING).end_object();
    w.member("uptime_s", f.uptime_s);

    w.key("lanes").begin_object().member("total", f.n_lanes).member("running", f.n_requests_running);
    w.member("prefilling", f.n_requests_prefilling).key("list").begin_array();
    for (const LaneFigure& l : f.lanes)
        w.begin_object().member("id", l.id).member("phase", l.phase).member("tokens", uint64_t(l.tokens)).end_object();
    w.end_array().end_object();
    w.key("queue").begin_object().member("waiting_requests", f.n_requests_waiting);
    w.member("max_pending_requests", uint64_t(ctx.config.max_pending)).end_object();

    w.key("throughput").begin_object().member("prompt_tokens_per_s", f.prompt_tokens_per_s);
    w.member("generated_tokens_per_s", f.generated_tokens_per_s);
    w.member("busy_lanes_per_decode_step", f.busy_lanes_per_decode_step).end_object();
    w.key("tokens").begin_object().member("prompt_total", f.prompt_tokens_total);
    w.member("prompt_cached_total", f.prompt_tokens_cached_total).member("prefill_total", f.prefill_tokens_total);
    w.member("generated_total", f.generation_tokens_total).end_object();
    w.key("compute_s").begin_object().member("prefill_total", f.prefill_s).member("decode_total", f.decode_s).end_object();
    w.member("decode_steps_total", f.decode_steps_total);
    write_histogram(w, "ttft_s", c.ttft_seconds);
    write_histogram(w, "request_duration_s", c.request_seconds);
    w.key("kv_tokens").begin_object().member("reserved", f.kv_reserved_tokens).member("capacity", f.kv_capacity_tokens).end_object();
    w.key("prefix_cache").begin_object().member("hits_total", f.prefix_cache_hits_total);
    w.member("misses_total", f.prefix_cache_misses_total).end_object();

    w.key("requests").begin_object().member("finished_total", f.requests_finished_total);
    w.member("cancelled_total", f.requests_cancelled_total).member("rejected_total", f.requests_rejected_total);
    w.member("chat_completions_total", c.n_chat_requests_total);
    w.member("client_disconnects_total", c.n_client_disconnects_total).end_object();
    w.key("http_responses_total").begin_object();
    for (const auto& [status, n] : c.http_responses_by_status) w.member(std::to_string(status), n);
    w.end_object().end_object();
    return w.take();
}

void handle_monitor(DaemonContext& ctx, HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->send(200, "text/html; charset=utf-8", monitor_page(),
                 {{"Content-Security-Policy", monitor_csp()},
                  {"X-Content-Type-Options", "nosniff"},
                  {"Referrer-Policy", "no-referrer"},
                  {"Cache-Control", "no-cache"}});
}

void handle_monitor_stats(DaemonContext& ctx, HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->send(200, "application/json", render_monitor_stats(ctx), {{"Cache-Control", "no-store"}});
}

void handle_monitor_history(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    const uint64_t after = after_seq_of(request.query);
    const std::string body = ctx.monitor_history ? ctx.monitor_history->render_json(after) : MonitorHistory{}.render_json(after);
    writer->send(200, "application/json", body, {{"Cache-Control", "no-store"}});
}

} // namespace ninfer::daemon
