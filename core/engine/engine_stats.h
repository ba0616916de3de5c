// ninfer::core - the engine's live figures as atomics: written by the engine thread, read by any
// thread (the loop's /metrics, ninferctl status) without a task round trip.
//
// Contract: counters only grow; gauges are the state after the engine's latest step. Times are
// microseconds. Relaxed ordering: each figure is exact, a set of them is not a snapshot.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace ninfer::core {

struct EngineStats {
    // Gauges.
    std::atomic<int> n_lanes{0};
    std::atomic<int> n_requests_running{0};    // holding a lane (prefilling or decoding)
    std::atomic<int> n_requests_waiting{0};    // in the FIFO queue
    std::atomic<int> n_requests_prefilling{0};
    std::atomic<uint64_t> kv_reserved_tokens{0}; // admitted prompt + max_tokens
    std::atomic<uint64_t> kv_capacity_tokens{0};
    // The prefix cache's host (pinned) snapshot store: bytes held by its entries, its budget
    // (--host-cache-mib; 0 without a prefix cache) and its entries.
    std::atomic<uint64_t> host_cache_used_bytes{0};
    std::atomic<uint64_t> host_cache_budget_bytes{0};
    std::atomic<uint64_t> host_cache_entries{0};
    // Counters.
    std::atomic<uint64_t> n_prompt_tokens_total{0};  // prompt tokens of admitted requests
    std::atomic<uint64_t> n_prompt_tokens_cached_total{0};
    std::atomic<uint64_t> n_prefill_tokens_total{0}; // prompt tokens actually computed
    std::atomic<uint64_t> n_prefill_slices_total{0}; // layer slices of sliced prefill chunks (prefill_advance calls)
    std::atomic<uint64_t> n_generation_tokens_total{0};
    std::atomic<uint64_t> t_prefill_us_total{0};
    std::atomic<uint64_t> t_decode_us_total{0};
    std::atomic<uint64_t> n_decode_steps_total{0};
    std::atomic<uint64_t> n_decode_lane_steps_total{0}; // sum of batch sizes
    // Engine thread CPU time reporting sampled tokens (sinks: detokenise, parse, hand to the loop;
    // stops and finishes), by thread_cpu_us.
    std::atomic<uint64_t> t_token_report_cpu_us_total{0};
    std::atomic<uint64_t> n_requests_finished_total{0};
    std::atomic<uint64_t> n_requests_cancelled_total{0};
    std::atomic<uint64_t> n_requests_rejected_total{0};
    std::atomic<uint64_t> n_steps_total{0};             // engine loop iterations with work
    std::atomic<uint64_t> n_prefix_cache_hits_total{0};   // admissions restored from the prefix cache
    std::atomic<uint64_t> n_prefix_cache_misses_total{0};
    std::atomic<uint64_t> n_prefix_cache_checkpoints_total{0};         // lane images begun for the cache
    std::atomic<uint64_t> n_prefix_cache_checkpoints_skipped_total{0}; // not begun: the copies were busy
    // Speculative decoding (vLLM's spec_decode names): rounds, drafts verified, drafts accepted,
    // and accepted drafts by position in the round (the i-th draft of a round is counted in [i]).
    std::atomic<uint64_t> n_spec_rounds_total{0};
    std::atomic<uint64_t> n_spec_draft_tokens_total{0};
    std::atomic<uint64_t> n_spec_accepted_tokens_total{0};
    std::array<std::atomic<uint64_t>, 5> n_spec_accepted_per_pos{};
    // Drafts of constrained lanes that their grammar cut before verification (not in the above).
    std::atomic<uint64_t> n_spec_draft_tokens_refused_total{0};
    // Pauses of speculating lanes by the gate (speculation_gate.h): a window of poor acceptance.
    std::atomic<uint64_t> n_spec_lane_pauses_total{0};
    // CUDA graphs of speculative rounds whose capture or instantiation failed (Backend::
    // graph_capture_failures): those rounds, and every later new shape, run eagerly.
    std::atomic<uint64_t> n_graph_capture_failures_total{0};
    // Images and videos: decoded on the daemon's media pool (items and the requests' wall time of
    // decoding, microseconds), and encoded by the vision tower on the engine thread (items and time).
    std::atomic<uint64_t> n_media_items_decoded_total{0};
    std::atomic<uint64_t> t_media_decode_us_total{0};
    std::atomic<uint64_t> n_vision_items_encoded_total{0};
    std::atomic<uint64_t> t_vision_encode_us_total{0};
    // Per lane (control plane status): phase 0 idle, 1 prefill, 2 decode; tokens held by the lane.
    std::array<std::atomic<uint8_t>, 8> lane_phase{};
    std::array<std::atomic<uint32_t>, 8> lane_tokens{};
};

} // namespace ninfer::core
