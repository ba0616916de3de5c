// ninfer::proto - payload encoders and decoders, one pair per message type.
#include "proto/messages.h"

namespace ninfer::proto {

namespace {
// Smallest encoding of one list item; bounds counts against the remaining payload.
constexpr size_t kMinLaneBytes = 4 + 4 + 8;
constexpr size_t kMinStringBytes = 4;
constexpr size_t kMinCacheEntryBytes = 4 + 8 + 8 + 4 + 8 + 8;
constexpr size_t kMinSettingBytes = 4 + 4 + 1 + 1;

void encode_lane(WireWriter& w, const LaneInfo& l) {
    w.u32(l.id);
    w.str(l.state);
    w.u64(l.n_tokens);
}
LaneInfo decode_lane(WireReader& r) {
    LaneInfo l;
    l.id = r.u32();
    l.state = r.str();
    l.n_tokens = r.u64();
    return l;
}
std::vector<LaneInfo> decode_lanes(WireReader& r) {
    std::vector<LaneInfo> v(r.count(kMinLaneBytes));
    for (LaneInfo& l : v)
        l = decode_lane(r);
    return v;
}
void encode_lanes(WireWriter& w, const std::vector<LaneInfo>& v) {
    w.u32(uint32_t(v.size()));
    for (const LaneInfo& l : v)
        encode_lane(w, l);
}
template <typename T> std::optional<T> done(WireReader& r, T&& v) {
    if (!r.ok())
        return std::nullopt;
    return std::move(v);
}
} // namespace

bool is_valid_slot_name(std::string_view name) {
    auto alnum = [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    };
    if (name.empty() || name.size() > 64 || !alnum(name[0]))
        return false;
    for (char c : name)
        if (!alnum(c) && c != '.' && c != '_' && c != '-')
            return false;
    return true;
}

std::optional<EmptyPayload> EmptyPayload::decode(WireReader& r) { return done(r, EmptyPayload{}); }

void StatusReply::encode(WireWriter& w) const {
    w.str(version);
    w.str(model_id);
    w.str(artifact);
    w.str(device);
    w.boolean(synthetic);
    w.boolean(draining);
    w.u64(uptime_s);
    w.u32(queue_length);
    w.u32(max_pending);
    encode_lanes(w, lanes);
    w.u64(memory_plan.weights_bytes);
    w.u64(memory_plan.kv_pool_bytes);
    w.u64(memory_plan.kv_capacity_tokens);
    w.u64(memory_plan.state_slots_bytes);
    w.u64(memory_plan.workspace_bytes);
    w.u64(memory_plan.host_store_bytes);
    w.str(speculative);
    w.u64(spec_rounds);
    w.u64(spec_draft_tokens);
    w.u64(spec_accepted_tokens);
}
std::optional<StatusReply> StatusReply::decode(WireReader& r) {
    StatusReply s;
    s.version = r.str();
    s.model_id = r.str();
    s.artifact = r.str();
    s.device = r.str();
    s.synthetic = r.boolean();
    s.draining = r.boolean();
    s.uptime_s = r.u64();
    s.queue_length = r.u32();
    s.max_pending = r.u32();
    s.lanes = decode_lanes(r);
    s.memory_plan.weights_bytes = r.u64();
    s.memory_plan.kv_pool_bytes = r.u64();
    s.memory_plan.kv_capacity_tokens = r.u64();
    s.memory_plan.state_slots_bytes = r.u64();
    s.memory_plan.workspace_bytes = r.u64();
    s.memory_plan.host_store_bytes = r.u64();
    s.speculative = r.str();
    s.spec_rounds = r.u64();
    s.spec_draft_tokens = r.u64();
    s.spec_accepted_tokens = r.u64();
    return done(r, std::move(s));
}

void MetricsReply::encode(WireWriter& w) const {
    w.u64(requests_total);
    w.u64(requests_failed);
    w.u64(prompt_tokens_total);
    w.u64(generated_tokens_total);
    w.u64(cached_tokens_total);
    w.f64(prompt_tokens_per_s);
    w.f64(generated_tokens_per_s);
    w.f64(ttft_ms_mean);
    w.u32(queue_length);
    w.u32(lanes_busy);
    w.u64(kv_used_tokens);
    w.u64(kv_capacity_tokens);
    w.u64(cache_hits);
    w.u64(cache_misses);
}
std::optional<MetricsReply> MetricsReply::decode(WireReader& r) {
    MetricsReply m;
    m.requests_total = r.u64();
    m.requests_failed = r.u64();
    m.prompt_tokens_total = r.u64();
    m.generated_tokens_total = r.u64();
    m.cached_tokens_total = r.u64();
    m.prompt_tokens_per_s = r.f64();
    m.generated_tokens_per_s = r.f64();
    m.ttft_ms_mean = r.f64();
    m.queue_length = r.u32();
    m.lanes_busy = r.u32();
    m.kv_used_tokens = r.u64();
    m.kv_capacity_tokens = r.u64();
    m.cache_hits = r.u64();
    m.cache_misses = r.u64();
    return done(r, std::move(m));
}

void MetricsWatchRequest::encode(WireWriter& w) const {
    w.u32(interval_ms);
    w.u32(count);
}
std::optional<MetricsWatchRequest> MetricsWatchRequest::decode(WireReader& r) {
    MetricsWatchRequest m;
    m.interval_ms = r.u32();
    m.count = r.u32();
    if (m.interval_ms < 100 || m.interval_ms > 3'600'000)
        r.fail(); // 0.1 s .. 1 h
    return done(r, std::move(m));
}

void SlotRequest::encode(WireWriter& w) const {
    w.u32(slot);
    w.str(name);
}
std::optional<SlotRequest> SlotRequest::decode(WireReader& r) {
    SlotRequest s;
    s.slot = r.u32();
    s.name = r.str();
    return done(r, std::move(s));
}

void SlotReply::encode(WireWriter& w) const {
    w.u32(slot);
    w.u64(n_tokens);
    w.u64(bytes);
    w.f64(elapsed_ms);
}
std::optional<SlotReply> SlotReply::decode(WireReader& r) {
    SlotReply s;
    s.slot = r.u32();
    s.n_tokens = r.u64();
    s.bytes = r.u64();
    s.elapsed_ms = r.f64();
    return done(r, std::move(s));
}

void SlotListReply::encode(WireWriter& w) const {
    encode_lanes(w, slots);
    w.u32(uint32_t(saved_names.size()));
    for (const std::string& n : saved_names)
        w.str(n);
}
std::optional<SlotListReply> SlotListReply::decode(WireReader& r) {
    SlotListReply s;
    s.slots = decode_lanes(r);
    s.saved_names.resize(r.count(kMinStringBytes));
    for (std::string& n : s.saved_names)
        n = r.str();
    return done(r, std::move(s));
}

void CacheListReply::encode(WireWriter& w) const {
    w.u32(uint32_t(entries.size()));
    for (const CacheEntryInfo& e : entries) {
        w.str(e.key);
        w.u64(e.n_tokens);
        w.u64(e.bytes);
        w.str(e.tier);
        w.u64(e.age_s);
        w.u64(e.hits);
    }
    w.u64(budget_bytes);
    w.u64(used_bytes);
}
std::optional<CacheListReply> CacheListReply::decode(WireReader& r) {
    CacheListReply c;
    c.entries.resize(r.count(kMinCacheEntryBytes));
    for (CacheEntryInfo& e : c.entries) {
        e.key = r.str();
        e.n_tokens = r.u64();
        e.bytes = r.u64();
        e.tier = r.str();
        e.age_s = r.u64();
        e.hits = r.u64();
    }
    c.budget_bytes = r.u64();
    c.used_bytes = r.u64();
    return done(r, std::move(c));
}

void CacheEvictRequest::encode(WireWriter& w) const {
    w.u8(uint8_t(mode));
    w.str(key);
    w.u64(older_than_s);
}
std::optional<CacheEvictRequest> CacheEvictRequest::decode(WireReader& r) {
    CacheEvictRequest c;
    uint8_t mode = r.u8();
    if (mode > uint8_t(CacheEvictMode::OlderThan))
        r.fail();
    c.mode = CacheEvictMode(mode);
    c.key = r.str();
    c.older_than_s = r.u64();
    return done(r, std::move(c));
}

void CountReply::encode(WireWriter& w) const {
    w.u64(count);
    w.u64(bytes);
}
std::optional<CountReply> CountReply::decode(WireReader& r) {
    CountReply c;
    c.count = r.u64();
    c.bytes = r.u64();
    return done(r, std::move(c));
}

void ArtifactUpgradeRequest::encode(WireWriter& w) const {
    w.str(source);
    w.str(destination);
}
std::optional<ArtifactUpgradeRequest> ArtifactUpgradeRequest::decode(WireReader& r) {
    ArtifactUpgradeRequest a;
    a.source = r.str();
    a.destination = r.str();
    return done(r, std::move(a));
}

void ProgressReply::encode(WireWriter& w) const {
    w.u64(done_bytes);
    w.u64(total_bytes);
    w.str(message);
}
std::optional<ProgressReply> ProgressReply::decode(WireReader& r) {
    ProgressReply p;
    p.done_bytes = r.u64();
    p.total_bytes = r.u64();
    p.message = r.str();
    return done(r, std::move(p));
}

void ArtifactUpgradeReply::encode(WireWriter& w) const {
    w.str(destination);
    w.u32(from_version);
    w.str(model_id);
    w.u64(n_objects);
    w.u64(n_bindings);
    w.u64(n_uses);
    w.u64(payload_bytes);
    w.u64(copied_bytes);
    w.u32(n_files);
}
std::optional<ArtifactUpgradeReply> ArtifactUpgradeReply::decode(WireReader& r) {
    ArtifactUpgradeReply a;
    a.destination = r.str();
    a.from_version = r.u32();
    a.model_id = r.str();
    a.n_objects = r.u64();
    a.n_bindings = r.u64();
    a.n_uses = r.u64();
    a.payload_bytes = r.u64();
    a.copied_bytes = r.u64();
    a.n_files = r.u32();
    return done(r, std::move(a));
}

void LogLevelRequest::encode(WireWriter& w) const { w.str(level); }
std::optional<LogLevelRequest> LogLevelRequest::decode(WireReader& r) {
    LogLevelRequest l;
    l.level = r.str();
    return done(r, std::move(l));
}

void ErrorReply::encode(WireWriter& w) const { w.str(message); }
std::optional<ErrorReply> ErrorReply::decode(WireReader& r) {
    ErrorReply e;
    e.message = r.str();
    return done(r, std::move(e));
}

void SettingsReply::encode(WireWriter& w) const {
    w.u32(uint32_t(settings.size()));
    for (const SettingInfo& s : settings) {
        w.str(s.name);
        w.str(s.value);
        w.boolean(s.is_default);
        w.boolean(s.is_reloadable);
    }
}
std::optional<SettingsReply> SettingsReply::decode(WireReader& r) {
    SettingsReply v;
    v.settings.resize(r.count(kMinSettingBytes));
    for (SettingInfo& s : v.settings) {
        s.name = r.str();
        s.value = r.str();
        s.is_default = r.boolean();
        s.is_reloadable = r.boolean();
    }
    return done(r, std::move(v));
}

} // namespace ninfer::proto
