// ninfer::daemon - /monitor's history: one-second samples of the serving figures in a bounded ring.
#include "daemon/monitor_history.h"

#include "core/util/json_writer.h"
#include "daemon/serve_figures.h"

#include <chrono>
#include <cmath>
#include <limits>

namespace ninfer::daemon {
namespace {

BucketCounts bucket_counts_of(const Histogram& h) { return {h.bounds, h.counts, h.count}; }

uint64_t grown(uint64_t older, uint64_t newer) { return newer > older ? newer - older : 0; }

// Rounded for the wire: rates to 0.001 token/s, latencies to the microsecond (the buckets are
// coarser than either); NaN stays NaN (null).
double rounded(double v, double per_unit) { return std::isnan(v) ? v : std::round(v * per_unit) / per_unit; }

void member_or_null(core::JsonWriter& w, std::string_view name, double v) {
    w.key(name);
    if (std::isnan(v)) w.null();
    else w.value(v);
}

} // namespace

double bucket_quantile(const BucketCounts& older, const BucketCounts& newer, double q) {
    const uint64_t total = grown(older.count, newer.count);
    if (total == 0 || newer.bounds.empty()) return std::numeric_limits<double>::quiet_NaN();
    const double rank = q * double(total);
    double below = 0; // observations in the buckets before i
    for (size_t i = 0; i < newer.counts.size() && i < newer.bounds.size(); ++i) {
        const double in_bucket = double(grown(i < older.counts.size() ? older.counts[i] : 0, newer.counts[i]));
        if (in_bucket > 0 && below + in_bucket >= rank) {
            const double lower = i == 0 ? 0.0 : newer.bounds[i - 1];
            return lower + (newer.bounds[i] - lower) * (rank - below) / in_bucket;
        }
        below += in_bucket;
    }
    return newer.bounds.back(); // the rank lies above the last bound: say the top bound, as Prometheus does
}

void MonitorHistory::record(HistoryReading reading) {
    if (!readings_.empty() && reading.at_ms <= readings_.back().at_ms) return;
    if (!readings_.empty()) {
        const HistoryReading& previous = readings_.back();
        const HistoryReading& window_start = readings_.size() > kPercentileWindowS
                                                 ? readings_[readings_.size() - kPercentileWindowS]
                                                 : readings_.front();
        HistorySample s;
        s.seq = ++last_seq_;
        s.t_unix_ms = reading.unix_ms;
        s.interval_s = double(reading.at_ms - previous.at_ms) / 1000.0;
        s.prompt_tokens_per_s = double(grown(previous.prefill_tokens_total, reading.prefill_tokens_total)) / s.interval_s;
        s.generated_tokens_per_s =
            double(grown(previous.generation_tokens_total, reading.generation_tokens_total)) / s.interval_s;
        s.ttft_p50_s = bucket_quantile(window_start.ttft, reading.ttft, 0.50);
        s.ttft_p99_s = bucket_quantile(window_start.ttft, reading.ttft, 0.99);
        s.itl_p50_s = bucket_quantile(window_start.token_gap, reading.token_gap, 0.50);
        s.itl_p99_s = bucket_quantile(window_start.token_gap, reading.token_gap, 0.99);
        s.lanes_total = reading.lanes_total;
        s.lanes_running = reading.lanes_running;
        s.lanes_prefilling = reading.lanes_prefilling;
        s.requests_waiting = reading.requests_waiting;
        s.kv_reserved_tokens = reading.kv_reserved_tokens;
        s.kv_capacity_tokens = reading.kv_capacity_tokens;
        s.host_cache_used_bytes = reading.host_cache_used_bytes;
        s.host_cache_budget_bytes = reading.host_cache_budget_bytes;
        samples_.push_back(s);
        if (samples_.size() > kHistoryCapacity) samples_.pop_front();
    }
    readings_.push_back(std::move(reading));
    if (readings_.size() > kPercentileWindowS + 1) readings_.pop_front();
}

std::string MonitorHistory::render_json(uint64_t after_seq) const {
    core::JsonWriter w;
    w.begin_object().member("period_s", double(kHistoryPeriodMs) / 1000.0);
    w.member("capacity", uint64_t(kHistoryCapacity)).member("percentile_window_s", uint64_t(kPercentileWindowS));
    w.member("last_seq", last_seq_).key("samples").begin_array();
    for (const HistorySample& s : samples_) {
        if (s.seq <= after_seq) continue;
        w.begin_object().member("seq", s.seq).member("t_unix_ms", s.t_unix_ms).member("interval_s", rounded(s.interval_s, 1e3));
        w.member("prompt_tokens_per_s", rounded(s.prompt_tokens_per_s, 1e3));
        w.member("generated_tokens_per_s", rounded(s.generated_tokens_per_s, 1e3));
        member_or_null(w, "ttft_p50_s", rounded(s.ttft_p50_s, 1e6));
        member_or_null(w, "ttft_p99_s", rounded(s.ttft_p99_s, 1e6));
        member_or_null(w, "itl_p50_s", rounded(s.itl_p50_s, 1e6));
        member_or_null(w, "itl_p99_s", rounded(s.itl_p99_s, 1e6));
        w.member("lanes_total", s.lanes_total).member("lanes_running", s.lanes_running);
        w.member("lanes_prefilling", s.lanes_prefilling).member("requests_waiting", s.requests_waiting);
        w.member("kv_reserved_tokens", s.kv_reserved_tokens).member("kv_capacity_tokens", s.kv_capacity_tokens);
        w.member("host_cache_used_bytes", s.host_cache_used_bytes);
        w.member("host_cache_budget_bytes", s.host_cache_budget_bytes);
        w.end_object();
    }
    w.end_array().end_object();
    return w.take();
}

HistoryReading read_history(const DaemonContext& ctx) {
    const ServeFigures f = read_serve_figures(ctx);
    HistoryReading r;
    r.at_ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now().time_since_epoch()).count());
    r.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
    r.prefill_tokens_total = f.prefill_tokens_total;
    r.generation_tokens_total = f.generation_tokens_total;
    r.ttft = bucket_counts_of(ctx.counters.ttft_seconds);
    r.token_gap = bucket_counts_of(ctx.counters.token_gap_seconds);
    r.lanes_total = f.n_lanes;
    r.lanes_running = f.n_requests_running;
    r.lanes_prefilling = f.n_requests_prefilling;
    r.requests_waiting = f.n_requests_waiting;
    r.kv_reserved_tokens = f.kv_reserved_tokens;
    r.kv_capacity_tokens = f.kv_capacity_tokens;
    r.host_cache_used_bytes = f.host_cache_used_bytes;
    r.host_cache_budget_bytes = f.host_cache_budget_bytes;
    return r;
}

} // namespace ninfer::daemon
