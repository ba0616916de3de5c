// ninfer::daemon - the last minutes of the serving figures for /monitor's charts: a bounded ring
// of one-second samples the daemon takes on the loop thread, served as JSON by GET /monitor/history.
//
// Contract (loop thread only, like DaemonContext):
// - read_history(ctx) takes one HistoryReading: the cumulative figures of read_serve_figures and
//   the loop's LoopCounters histograms (TTFT, inter-token gap) at this instant, stamped with the
//   monotonic clock (steady_clock, ms) and the wall clock (Unix ms, for the chart's time axis).
// - MonitorHistory::record(reading) turns it and the reading before it into one HistorySample
//   (the first reading only primes; a reading whose clock did not advance is ignored):
//     prompt_tokens_per_s    = delta of prefill_tokens_total (prompt tokens computed) / interval_s
//     generated_tokens_per_s = delta of generation_tokens_total / interval_s
//     ttft_p50_s, ttft_p99_s, itl_p50_s, itl_p99_s: quantiles of the observations that fell in the
//       last kPercentileWindowS seconds (histogram bucket deltas between this reading and the one
//       that many readings back), estimated as Prometheus' histogram_quantile does: linear inside
//       the bucket holding the rank, lower edge 0 for the first bucket, the top finite bound when
//       the rank lies above it. So a value is as precise as its bucket (daemon_context.h's bounds:
//       the first bucket of both is [0, 0.01] s). NaN (JSON null) when no observation fell in the
//       window.
//     gauges (lanes total/running/prefilling, requests waiting, KV tokens reserved/capacity): the
//       reading's own, as read_serve_figures gives them.
// - It keeps the last kHistoryCapacity samples (5 minutes at the 1 s period; the oldest is
//   dropped) and the last kPercentileWindowS + 1 readings: memory is bounded, about 40 KB.
//   Samples carry a sequence number counting from 1 that never repeats in a daemon's life.
// - render_json(after_seq) answers {"period_s", "capacity", "percentile_window_s", "last_seq",
//   "samples": [...]} with the samples whose seq > after_seq, oldest first; each sample is
//   {seq, t_unix_ms, interval_s, prompt_tokens_per_s, generated_tokens_per_s, ttft_p50_s,
//   ttft_p99_s, itl_p50_s, itl_p99_s, lanes_total, lanes_running, lanes_prefilling,
//   requests_waiting, kv_reserved_tokens, kv_capacity_tokens}. Units are in the names.
#pragma once

#include "daemon/daemon_context.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

namespace ninfer::daemon {

inline constexpr uint64_t kHistoryPeriodMs = 1000; // the sampling timer's period (server.cpp)
inline constexpr size_t kHistoryCapacity = 300;    // 5 minutes of 1 s samples
inline constexpr size_t kPercentileWindowS = 10;   // readings (seconds) a percentile covers

// A histogram's cumulative state: counts per bucket (not cumulative) and the total, which also
// counts the observations above the last bound.
struct BucketCounts {
    std::span<const double> bounds;
    std::vector<uint64_t> counts;
    uint64_t count = 0;
};

struct HistoryReading {
    uint64_t at_ms = 0;     // steady_clock: monotonic milliseconds
    int64_t unix_ms = 0;    // wall clock, for the time axis
    uint64_t prefill_tokens_total = 0;
    uint64_t generation_tokens_total = 0;
    BucketCounts ttft;      // LoopCounters::ttft_seconds
    BucketCounts token_gap; // LoopCounters::token_gap_seconds
    int lanes_total = 0;
    int lanes_running = 0;
    int lanes_prefilling = 0;
    int requests_waiting = 0;
    uint64_t kv_reserved_tokens = 0;
    uint64_t kv_capacity_tokens = 0;
    uint64_t host_cache_used_bytes = 0, host_cache_budget_bytes = 0;
};

struct HistorySample {
    uint64_t seq = 0;
    int64_t t_unix_ms = 0;
    double interval_s = 0;
    double prompt_tokens_per_s = 0;
    double generated_tokens_per_s = 0;
    double ttft_p50_s = 0, ttft_p99_s = 0; // NaN: no first token in the window
    double itl_p50_s = 0, itl_p99_s = 0;   // NaN: no token gap in the window
    int lanes_total = 0, lanes_running = 0, lanes_prefilling = 0, requests_waiting = 0;
    uint64_t kv_reserved_tokens = 0, kv_capacity_tokens = 0;
    uint64_t host_cache_used_bytes = 0, host_cache_budget_bytes = 0;
};

// The q-quantile (0 < q < 1) of the observations between two states of one histogram, as
// described in the contract; NaN when there were none.
double bucket_quantile(const BucketCounts& older, const BucketCounts& newer, double q);

class MonitorHistory {
  public:
    void record(HistoryReading reading);
    const std::deque<HistorySample>& samples() const { return samples_; }
    std::string render_json(uint64_t after_seq) const;

  private:
    std::deque<HistoryReading> readings_; // the last kPercentileWindowS + 1, oldest first
    std::deque<HistorySample> samples_;   // the last kHistoryCapacity, oldest first
    uint64_t last_seq_ = 0;
};

HistoryReading read_history(const DaemonContext& ctx);

} // namespace ninfer::daemon
