// ninfer::daemon - DaemonConfig, the typed settings ninferd runs with.
//
// Contract:
// - Every field is set by exactly the option-table rows that name it (daemon/options.cpp): their
//   defaults, parsers and SIGHUP behaviour live there, not here. A default-constructed
//   DaemonConfig is zeroed; to_daemon_config (config_load.h) fills one from Settings, so a
//   default comes from the table only. Tests may set single fields by hand.
// - Units are in the names where a field has one; the table converts (max-body-mib -> bytes).
// - operator== compares every field (the reload tests use it).
// Thread affinity: the loop thread owns the running copy (DaemonContext::config).
#pragma once

#include "core/backend/generation_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::daemon {

struct DaemonConfig {
    std::string artifact_path;
    std::string host;
    int port{};
    std::string model_id;
    std::string control_socket;
    std::string state_dir;
    uint64_t host_cache_mib{}; // prefix-cache host store (0 = none)
    bool persist_slots{};      // lanes saved at stop, restored at start (core::Engine::persist_all)
    bool verify_artifact{};    // payload CRC-32Cs checked at start-up (core/artifact/checksums.h)
    std::string device;        // "auto", "cpu", "cuda" or "script:FILE"
    int threads{};
    uint32_t max_context{};        // 0 = auto until plan_model resolves it (run_daemon stores the plan's)
    uint64_t kv_capacity_tokens{}; // 0 = auto
    std::string kv_dtype;
    std::string speculative = "off"; // "mtp:K" or "ngram:K" (core::parse_speculative); the option's "auto" until run_daemon stores plan_model's resolution
    uint32_t speculative_max_lanes = 4;       // rounds only while at most this many lanes decode (0: any)
    double speculative_min_acceptance = 0.5;  // a lane pauses below this share of drafts accepted (0: never)
    int max_concurrency{};
    uint32_t prefill_chunk{};
    uint32_t prefill_chunk_decoding{};
    uint32_t prefill_slice_layers{};
    uint32_t default_max_tokens{};
    bool strict_max_tokens{}; // a max_tokens beyond the context left is a 400, not shortened
    uint32_t grammar_cache_entries{}; // compiled grammars kept (core::grammar::GrammarCache)
    core::SamplingDefaults sampling; // --temperature ...: over the model's generation_config.json
    uint32_t max_pending{};
    uint64_t pending_timeout_ms{};
    uint32_t drain_timeout_s{};
    std::vector<std::string> api_keys; // api-key, then the lines of api-key-file
    std::vector<std::string> cors_origins;
    uint64_t max_body_bytes{};
    uint32_t max_header_bytes{};
    uint32_t max_connections{};
    uint32_t header_timeout_s{};
    uint32_t body_timeout_s{};
    uint64_t output_buffer_bytes{};
    uint64_t max_inflight_body_bytes{};
    uint32_t write_timeout_s{};
    uint32_t idle_timeout_s{};
    bool enable_thinking{};
    // Images and video (core/media): limits on top of the artifact's processor configs.
    std::string allowed_local_media_path;
    uint64_t media_max_bytes{};
    int64_t media_max_pixels{};
    int media_max_frames{};
    int media_max_video_seconds{};
    int media_max_items{};
    int64_t media_max_vision_tokens{};
    std::string vision_device; // "cpu", "cuda" or "auto": where the vision tower runs
    int64_t vision_batch_patches{}; // patches the GPU tower runs at once (cuda_vision_bytes plans them)
    int media_decode_threads{};
    std::string log_level;

    bool operator==(const DaemonConfig&) const = default;
};

} // namespace ninfer::daemon
