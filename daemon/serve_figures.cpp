// ninfer::daemon - reads the engine atomics once and derives the averages /metrics and /monitor/stats show.
#include "daemon/serve_figures.h"

#include "daemon/http_server.h"

#include <algorithm>
#include <ctime>

namespace ninfer::daemon {
namespace {

const char* phase_name(uint8_t phase) { return phase == 2 ? "decode" : phase == 1 ? "prefill" : "idle"; }

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

} // namespace

ServeFigures read_serve_figures(const DaemonContext& ctx) {
    const core::EngineStats& s = ctx.engine->stats();
    ServeFigures f;
    f.n_lanes = s.n_lanes;
    f.n_requests_running = s.n_requests_running;
    f.n_requests_waiting = s.n_requests_waiting;
    f.n_requests_prefilling = s.n_requests_prefilling;
    f.kv_reserved_tokens = s.kv_reserved_tokens;
    f.kv_capacity_tokens = s.kv_capacity_tokens;
    f.host_cache_used_bytes = s.host_cache_used_bytes;
    f.host_cache_budget_bytes = s.host_cache_budget_bytes;
    f.host_cache_entries = s.host_cache_entries;
    f.prompt_tokens_total = s.n_prompt_tokens_total;
    f.prompt_tokens_cached_total = s.n_prompt_tokens_cached_total;
    f.prefill_tokens_total = s.n_prefill_tokens_total;
    f.generation_tokens_total = s.n_generation_tokens_total;
    f.decode_steps_total = s.n_decode_steps_total;
    f.decode_lane_steps_total = s.n_decode_lane_steps_total;
    f.prefill_s = double(s.t_prefill_us_total.load()) / 1e6;
    f.decode_s = double(s.t_decode_us_total.load()) / 1e6;
    f.token_report_cpu_s = double(s.t_token_report_cpu_us_total.load()) / 1e6;
    if (ctx.bridge) {
        const LoopBridge::Figures& b = ctx.bridge->figures();
        f.loop_batches_total = b.n_batches;
        f.loop_events_total = b.n_closures;
        f.loop_events_cpu_s = double(b.cpu_us) / 1e6;
    }
    if (ctx.http) {
        f.socket_writes_total = ctx.http->write_figures().n_writes;
        f.socket_write_bytes_total = ctx.http->write_figures().n_bytes;
    }
    f.requests_finished_total = s.n_requests_finished_total;
    f.requests_cancelled_total = s.n_requests_cancelled_total;
    f.requests_rejected_total = s.n_requests_rejected_total;
    f.prefix_cache_hits_total = s.n_prefix_cache_hits_total;
    f.prefix_cache_misses_total = s.n_prefix_cache_misses_total;
    f.prefix_cache_checkpoints_total = s.n_prefix_cache_checkpoints_total;
    f.prefix_cache_checkpoints_skipped_total = s.n_prefix_cache_checkpoints_skipped_total;
    f.prefill_slices_total = s.n_prefill_slices_total;
    f.spec_rounds_total = s.n_spec_rounds_total;
    f.spec_lane_pauses_total = s.n_spec_lane_pauses_total;
    f.graph_capture_failures_total = s.n_graph_capture_failures_total;
    f.media_items_decoded_total = s.n_media_items_decoded_total;
    f.media_decode_s_total = double(s.t_media_decode_us_total) / 1e6;
    f.vision_items_encoded_total = s.n_vision_items_encoded_total;
    f.vision_encode_s_total = double(s.t_vision_encode_us_total) / 1e6;
    f.spec_draft_tokens_total = s.n_spec_draft_tokens_total;
    f.spec_accepted_tokens_total = s.n_spec_accepted_tokens_total;
    f.spec_draft_tokens_refused_total = s.n_spec_draft_tokens_refused_total;
    for (size_t i = 0; i < f.spec_accepted_per_pos.size(); ++i) f.spec_accepted_per_pos[i] = s.n_spec_accepted_per_pos[i];

    f.prompt_tokens_per_s = ratio(double(f.prefill_tokens_total), f.prefill_s);
    f.generated_tokens_per_s = ratio(double(f.decode_lane_steps_total + f.spec_accepted_tokens_total), f.decode_s);
    f.busy_lanes_per_decode_step = ratio(double(f.decode_lane_steps_total), double(f.decode_steps_total));
    f.uptime_s = uint64_t(std::max<int64_t>(0, int64_t(std::time(nullptr)) - ctx.created_unix));
    int n_listed = std::clamp(f.n_lanes, 0, int(s.lane_phase.size()));
    for (int i = 0; i < n_listed; ++i)
        f.lanes.push_back({i, phase_name(s.lane_phase[size_t(i)]), s.lane_tokens[size_t(i)]});
    return f;
}

double mean_seconds(const Histogram& h) { return h.count ? h.sum / double(h.count) : 0.0; }

} // namespace ninfer::daemon
