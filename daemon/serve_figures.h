// ninfer::daemon - one reading of the serving figures that /metrics and /monitor/stats show, so
// both derive every number the same way.
//
// Contract:
// - read_serve_figures(ctx) reads the engine's EngineStats atomics (relaxed: each figure is exact,
//   the set is not a snapshot) and the loop's LoopCounters once (loop thread only). Units are in
//   the names: *_tokens are token counts, *_s seconds, *_per_s tokens per second, *_total counters
//   since start. Sources, one per field, are the comments below.
// - Derived figures are 0 while their denominator is 0:
//   prompt_tokens_per_s    = prefill_tokens_total / prefill_s (average while prefilling)
//   generated_tokens_per_s = (decode_lane_steps_total + spec_accepted_tokens_total) / decode_s
//     (average while decoding: a speculative round's lane step reports its accepted drafts too)
//   busy_lanes_per_decode_step = decode_lane_steps_total / decode_steps_total
//   uptime_s = wall seconds since the daemon started (ctx.created_unix).
// - lanes lists the first n_lanes engine lanes (at most EngineStats::lane_phase's size) with their
//   phase ("idle", "prefill", "decode") and the tokens each holds.
#pragma once

#include "daemon/daemon_context.h"

#include <array>
#include <cstdint>
#include <vector>

namespace ninfer::daemon {

struct LaneFigure {
    int id = 0;
    const char* phase = "idle"; // EngineStats::lane_phase: 0 idle, 1 prefill, 2 decode
    uint32_t tokens = 0;        // EngineStats::lane_tokens
};

struct ServeFigures {
    // Gauges (EngineStats).
    int n_lanes = 0;            // n_lanes: lanes decoding together
    int n_requests_running = 0; // n_requests_running: requests holding a lane
    int n_requests_waiting = 0; // n_requests_waiting: requests queued for a lane
    int n_requests_prefilling = 0;
    uint64_t kv_reserved_tokens = 0; // kv_reserved_tokens: prompt + max_tokens of admitted requests
    uint64_t kv_capacity_tokens = 0;
    uint64_t host_cache_used_bytes = 0;   // host_cache_used_bytes: prefix-cache snapshots held in host memory
    uint64_t host_cache_budget_bytes = 0; // host_cache_budget_bytes: --host-cache-mib in bytes (0: no cache)
    uint64_t host_cache_entries = 0;      // host_cache_entries: snapshots held
    // Counters (EngineStats).
    uint64_t prompt_tokens_total = 0;        // n_prompt_tokens_total: prompt tokens of admitted requests
    uint64_t prompt_tokens_cached_total = 0; // n_prompt_tokens_cached_total: reused from a lane
    uint64_t prefill_tokens_total = 0;       // n_prefill_tokens_total: prompt tokens computed
    uint64_t generation_tokens_total = 0;    // n_generation_tokens_total
    uint64_t decode_steps_total = 0;         // n_decode_steps_total: batched decode steps
    uint64_t decode_lane_steps_total = 0;    // n_decode_lane_steps_total: sum of batch sizes
    double prefill_s = 0;                    // t_prefill_us_total / 1e6
    double decode_s = 0;                     // t_decode_us_total / 1e6
    double token_report_cpu_s = 0;           // t_token_report_cpu_us_total / 1e6: engine thread CPU reporting tokens
    // The loop thread's share of the per-token work (LoopBridge::figures, HttpServer's writes).
    uint64_t loop_batches_total = 0;         // bridge wake-ups that ran engine events
    uint64_t loop_events_total = 0;          // engine events (closures) run on the loop
    double loop_events_cpu_s = 0;            // cpu_us / 1e6: loop thread CPU inside them, writes included
    uint64_t socket_writes_total = 0;        // uv_write calls on HTTP connections
    uint64_t socket_write_bytes_total = 0;   // bytes they carried
    uint64_t requests_finished_total = 0;
    uint64_t requests_cancelled_total = 0;
    uint64_t requests_rejected_total = 0;
    uint64_t prefix_cache_hits_total = 0;   // n_prefix_cache_hits_total: admissions restored from the cache
    uint64_t prefix_cache_misses_total = 0; // n_prefix_cache_misses_total
    uint64_t prefix_cache_checkpoints_total = 0;         // n_prefix_cache_checkpoints_total
    uint64_t prefix_cache_checkpoints_skipped_total = 0; // n_prefix_cache_checkpoints_skipped_total
    uint64_t prefill_slices_total = 0;                   // n_prefill_slices_total: --prefill-slice-layers slices
    uint64_t spec_rounds_total = 0;          // n_spec_rounds_total: speculative rounds (one per lane)
    uint64_t spec_lane_pauses_total = 0;     // n_spec_lane_pauses_total: gate pauses (speculation_gate.h)
    uint64_t graph_capture_failures_total = 0; // n_graph_capture_failures_total: rounds run eagerly instead
    uint64_t spec_draft_tokens_total = 0;    // n_spec_draft_tokens_total: drafts verified
    uint64_t spec_accepted_tokens_total = 0; // n_spec_accepted_tokens_total
    uint64_t spec_draft_tokens_refused_total = 0; // n_spec_draft_tokens_refused_total: cut by a grammar, not verified
    std::array<uint64_t, 5> spec_accepted_per_pos{}; // n_spec_accepted_per_pos
    uint64_t media_items_decoded_total = 0; // n_media_items_decoded_total: images and videos decoded
    double media_decode_s_total = 0;        // t_media_decode_us_total / 1e6: requests' decoding wall time
    uint64_t vision_items_encoded_total = 0; // n_vision_items_encoded_total: items through the tower
    double vision_encode_s_total = 0;        // t_vision_encode_us_total / 1e6: the tower's time
    // Derived (see the contract).
    double prompt_tokens_per_s = 0;
    double generated_tokens_per_s = 0;
    double busy_lanes_per_decode_step = 0;
    uint64_t uptime_s = 0;
    std::vector<LaneFigure> lanes;
};

ServeFigures read_serve_figures(const DaemonContext& ctx);

// Mean of a latency histogram in seconds (0 before the first observation).
double mean_seconds(const Histogram& h);

} // namespace ninfer::daemon
