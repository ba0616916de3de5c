// ninfer::proto - the typed payload of every op, and its encoding (PROTOCOL.md §3).
//
// Contract:
// - Each request/reply struct has encode(WireWriter&) and a static decode(WireReader&) that
//   returns std::nullopt on any malformed input (short, trailing bytes, impossible counts, bool
//   not 0/1). Decoders never read outside the payload and never allocate more than the payload
//   could describe.
// - Fields are versioned by position: a later protocol version may append fields; this version
//   refuses trailing bytes.
// - Names of slots follow kSlotNamePattern; validation lives in is_valid_slot_name().
#pragma once

#include "proto/wire.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ninfer::proto {

// [A-Za-z0-9][A-Za-z0-9._-]{0,63}
bool is_valid_slot_name(std::string_view name);

// Requests with no payload: Status, Metrics, SlotList, CacheList, Drain, Resume, Reload, Settings.
struct EmptyPayload {
    void encode(WireWriter&) const {}
    static std::optional<EmptyPayload> decode(WireReader& r);
};

struct LaneInfo {
    uint32_t id = 0;
    std::string state; // "idle", "prefill", "decode", "saving"
    uint64_t n_tokens = 0;
};

struct MemoryPlanInfo {
    uint64_t weights_bytes = 0;
    uint64_t kv_pool_bytes = 0;
    uint64_t kv_capacity_tokens = 0;
    uint64_t state_slots_bytes = 0;
    uint64_t workspace_bytes = 0;
    uint64_t host_store_bytes = 0;
};

struct StatusReply {
    std::string version;
    std::string model_id;
    std::string artifact;
    std::string device;
    bool synthetic = false;
    bool draining = false;
    uint64_t uptime_s = 0;
    uint32_t queue_length = 0;
    uint32_t max_pending = 0;
    std::vector<LaneInfo> lanes;
    MemoryPlanInfo memory_plan;
    std::string speculative;          // ninferd --speculative: "off", "mtp:K", "ngram:K"
    uint64_t spec_rounds = 0;         // speculative rounds since start (one per lane and round)
    uint64_t spec_draft_tokens = 0;   // drafts verified
    uint64_t spec_accepted_tokens = 0;
    void encode(WireWriter& w) const;
    static std::optional<StatusReply> decode(WireReader& r);
};

struct MetricsReply {
    uint64_t requests_total = 0;
    uint64_t requests_failed = 0;
    uint64_t prompt_tokens_total = 0;
    uint64_t generated_tokens_total = 0;
    uint64_t cached_tokens_total = 0;
    double prompt_tokens_per_s = 0;    // over the last window, see daemon metrics
    double generated_tokens_per_s = 0;
    double ttft_ms_mean = 0;
    uint32_t queue_length = 0;
    uint32_t lanes_busy = 0;
    uint64_t kv_used_tokens = 0;
    uint64_t kv_capacity_tokens = 0;
    uint64_t cache_hits = 0;
    uint64_t cache_misses = 0;
    void encode(WireWriter& w) const;
    static std::optional<MetricsReply> decode(WireReader& r);
};

struct MetricsWatchRequest {
    uint32_t interval_ms = 1000;
    uint32_t count = 0; // 0 = until the client closes
    void encode(WireWriter& w) const;
    static std::optional<MetricsWatchRequest> decode(WireReader& r);
};

struct SlotRequest { // SlotSave, SlotRestore (name used), SlotErase (name empty)
    uint32_t slot = 0;
    std::string name;
    void encode(WireWriter& w) const;
    static std::optional<SlotRequest> decode(WireReader& r);
};

struct SlotReply {
    uint32_t slot = 0;
    uint64_t n_tokens = 0;
    uint64_t bytes = 0;
    double elapsed_ms = 0;
    void encode(WireWriter& w) const;
    static std::optional<SlotReply> decode(WireReader& r);
};

struct SlotListReply {
    std::vector<LaneInfo> slots;
    std::vector<std::string> saved_names; // files in state-dir/slots
    void encode(WireWriter& w) const;
    static std::optional<SlotListReply> decode(WireReader& r);
};

struct CacheEntryInfo {
    std::string key; // hex of the prefix hash
    uint64_t n_tokens = 0;
    uint64_t bytes = 0;
    std::string tier; // "device", "host", "disk"
    uint64_t age_s = 0;
    uint64_t hits = 0;
};

struct CacheListReply {
    std::vector<CacheEntryInfo> entries;
    uint64_t budget_bytes = 0;
    uint64_t used_bytes = 0;
    void encode(WireWriter& w) const;
    static std::optional<CacheListReply> decode(WireReader& r);
};

enum class CacheEvictMode : uint8_t { All = 0, Key = 1, OlderThan = 2 };
struct CacheEvictRequest {
    CacheEvictMode mode = CacheEvictMode::All;
    std::string key;
    uint64_t older_than_s = 0;
    void encode(WireWriter& w) const;
    static std::optional<CacheEvictRequest> decode(WireReader& r);
};

struct CountReply { // CacheEvict: entries and bytes removed
    uint64_t count = 0;
    uint64_t bytes = 0;
    void encode(WireWriter& w) const;
    static std::optional<CountReply> decode(WireReader& r);
};

struct ArtifactUpgradeRequest {
    std::string source;
    std::string destination; // empty = in place
    void encode(WireWriter& w) const;
    static std::optional<ArtifactUpgradeRequest> decode(WireReader& r);
};

struct ProgressReply { // streamed: MetricsWatch frames carry MetricsReply; upgrades carry this
    uint64_t done_bytes = 0;
    uint64_t total_bytes = 0;
    std::string message;
    void encode(WireWriter& w) const;
    static std::optional<ProgressReply> decode(WireReader& r);
};

struct ArtifactUpgradeReply { // the end frame of an artifact-upgrade stream: what was written
    std::string destination;
    uint32_t from_version = 0;
    std::string model_id;
    uint64_t n_objects = 0, n_bindings = 0, n_uses = 0;
    uint64_t payload_bytes = 0, copied_bytes = 0;
    uint32_t n_files = 1;
    void encode(WireWriter& w) const;
    static std::optional<ArtifactUpgradeReply> decode(WireReader& r);
};

struct LogLevelRequest {
    std::string level; // "debug", "info", "notice", "warning", "err"
    void encode(WireWriter& w) const;
    static std::optional<LogLevelRequest> decode(WireReader& r);
};

struct SettingInfo {
    std::string name;  // the option's name (config key, CLI option without dashes)
    std::string value; // effective text; "<redacted>" for a secret that is set
    bool is_default = false;
    bool is_reloadable = false; // SIGHUP applies it; otherwise a change needs a restart
};

struct SettingsReply { // Settings: every config-file option in the daemon's table order
    std::vector<SettingInfo> settings;
    void encode(WireWriter& w) const;
    static std::optional<SettingsReply> decode(WireReader& r);
};

struct ErrorReply { // the payload of any frame whose status is not Ok
    std::string message;
    void encode(WireWriter& w) const;
    static std::optional<ErrorReply> decode(WireReader& r);
};

// Helpers: encode a payload struct into bytes; decode bytes into a struct (nullopt if malformed).
template <typename T> std::vector<uint8_t> encode_payload(const T& value) {
    WireWriter w;
    value.encode(w);
    return std::move(w.bytes());
}
template <typename T> std::optional<T> decode_payload(std::span<const uint8_t> bytes) {
    WireReader r(bytes);
    std::optional<T> v = T::decode(r);
    if (!v || !r.at_end())
        return std::nullopt;
    return v;
}

} // namespace ninfer::proto
