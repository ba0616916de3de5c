// ninfer::ctl - `ninferctl slot list | save ID NAME | restore ID NAME | erase ID` and
// `ninferctl cache list | evict (--all | KEY | --older-than SECONDS)`.
#include "core/util/json_writer.h"
#include "ctl/command_list.h"
#include "ctl/control_common.h"

#include <cstdio>
#include <cstdlib>

namespace ninfer::ctl {
namespace {

using core::JsonWriter;
using proto::Op;

constexpr const char* kSlotUsage = "ninferctl slot list | slot save ID NAME | slot restore ID NAME | slot erase ID";
constexpr const char* kCacheUsage = "ninferctl cache list | cache evict (--all | KEY | --older-than SECONDS)";

uint32_t parse_slot_id(const std::string& text) {
    char* end = nullptr;
    unsigned long v = std::strtoul(text.c_str(), &end, 10);
    if (text.empty() || *end || text[0] == '-' || v > 1024) throw UsageError("slot ID must be a lane number, not '" + text + "'");
    return uint32_t(v);
}

int slot_list(const ControlArgs& a) {
    proto::Client client = connect_daemon(a.options);
    auto r = call_daemon<proto::SlotListReply>(client, Op::SlotList, {});
    if (a.options.json) {
        JsonWriter w;
        w.begin_object().key("slots").begin_array();
        for (const proto::LaneInfo& l : r.slots)
            w.begin_object().member("id", uint64_t(l.id)).member("state", l.state).member("tokens", l.n_tokens).end_object();
        w.end_array().key("saved").begin_array();
        for (const std::string& n : r.saved_names) w.value(n);
        std::printf("%s\n", w.end_array().end_object().take().c_str());
        return 0;
    }
    std::printf("SLOT  STATE     TOKENS\n");
    for (const proto::LaneInfo& l : r.slots)
        std::printf("%4u  %-8s  %6llu\n", l.id, l.state.c_str(), static_cast<unsigned long long>(l.n_tokens));
    std::printf("\nsaved: %s", r.saved_names.empty() ? "(none)" : "");
    for (size_t i = 0; i < r.saved_names.size(); ++i) std::printf("%s%s", i ? ", " : "", r.saved_names[i].c_str());
    std::printf("\n");
    return 0;
}

int slot_op(const ControlArgs& a, Op op, bool with_name) {
    if (a.positional.size() != (with_name ? 3u : 2u)) throw UsageError("wrong number of arguments");
    proto::SlotRequest req;
    req.slot = parse_slot_id(a.positional[1]);
    if (with_name) {
        req.name = a.positional[2];
        if (!proto::is_valid_slot_name(req.name))
            throw UsageError("slot NAME must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}, not '" + req.name + "'");
    }
    proto::Client client = connect_daemon(a.options);
    auto r = call_daemon<proto::SlotReply>(client, op, proto::encode_payload(req));
    const char* verb = op == Op::SlotSave ? "saved" : op == Op::SlotRestore ? "restored" : "erased";
    if (a.options.json) {
        JsonWriter w;
        w.begin_object().member("slot", uint64_t(r.slot)).member("action", verb).member("tokens", r.n_tokens);
        w.member("bytes", r.bytes).member("elapsed_ms", r.elapsed_ms);
        if (with_name) w.member("name", req.name);
        std::printf("%s\n", w.end_object().take().c_str());
    } else if (op == Op::SlotErase) {
        std::printf("slot %u erased\n", r.slot);
    } else {
        double gib_s = r.elapsed_ms > 0 ? double(r.bytes) / double(1ull << 30) / (r.elapsed_ms / 1000.0) : 0;
        std::printf("slot %u %s %s %s: %llu tokens, %s in %.1f ms (%.2f GiB/s)\n", r.slot, verb,
                    op == Op::SlotSave ? "to" : "from", req.name.c_str(), static_cast<unsigned long long>(r.n_tokens),
                    format_bytes(r.bytes).c_str(), r.elapsed_ms, gib_s);
    }
    return 0;
}

int cache_list(const ControlArgs& a) {
    proto::Client client = connect_daemon(a.options);
    auto r = call_daemon<proto::CacheListReply>(client, Op::CacheList, {});
    if (a.options.json) {
        JsonWriter w;
        w.begin_object().member("budget_bytes", r.budget_bytes).member("used_bytes", r.used_bytes);
        w.key("entries").begin_array();
        for (const proto::CacheEntryInfo& e : r.entries)
            w.begin_object().member("key", e.key).member("tokens", e.n_tokens).member("bytes", e.bytes)
                .member("tier", e.tier).member("age_s", e.age_s).member("hits", e.hits).end_object();
        std::printf("%s\n", w.end_array().end_object().take().c_str());
        return 0;
    }
    std::printf("prefix cache: %s of %s used, %zu entries\n", format_bytes(r.used_bytes).c_str(),
                format_bytes(r.budget_bytes).c_str(), r.entries.size());
    if (r.entries.empty()) return 0;
    std::printf("\nKEY               TOKENS  SIZE        TIER    AGE_S  HITS\n");
    for (const proto::CacheEntryInfo& e : r.entries)
        std::printf("%-16s  %6llu  %-10s  %-6s  %5llu  %4llu\n", e.key.c_str(),
                    static_cast<unsigned long long>(e.n_tokens), format_bytes(e.bytes).c_str(), e.tier.c_str(),
                    static_cast<unsigned long long>(e.age_s), static_cast<unsigned long long>(e.hits));
    return 0;
}

int cache_evict(const ControlArgs& a) {
    const auto& p = a.positional;
    proto::CacheEvictRequest req;
    if (p.size() == 2 && p[1] == "--all") {
        req.mode = proto::CacheEvictMode::All;
    } else if (p.size() == 3 && p[1] == "--older-than") {
        req.mode = proto::CacheEvictMode::OlderThan;
        req.older_than_s = parse_seconds_arg(p[2], "--older-than");
    } else if (p.size() == 2 && !p[1].empty() && p[1][0] != '-') {
        req.mode = proto::CacheEvictMode::Key;
        req.key = p[1];
    } else {
        throw UsageError("cache evict wants exactly one of --all, KEY, --older-than SECONDS");
    }
    proto::Client client = connect_daemon(a.options);
    auto r = call_daemon<proto::CountReply>(client, Op::CacheEvict, proto::encode_payload(req));
    if (a.options.json) {
        JsonWriter w;
        std::printf("%s\n", w.begin_object().member("evicted", r.count).member("bytes", r.bytes).end_object().take().c_str());
    } else {
        std::printf("evicted %llu entries (%s)\n", static_cast<unsigned long long>(r.count), format_bytes(r.bytes).c_str());
    }
    return 0;
}

} // namespace

int cmd_slot(int argc, char** argv) {
    return run_control(argc, argv, kSlotUsage, [](ControlArgs& a) {
        const std::string sub = a.positional.empty() ? "" : a.positional[0];
        if (sub == "list" && a.positional.size() == 1) return slot_list(a);
        if (sub == "save") return slot_op(a, Op::SlotSave, true);
        if (sub == "restore") return slot_op(a, Op::SlotRestore, true);
        if (sub == "erase") return slot_op(a, Op::SlotErase, false);
        throw UsageError(sub.empty() ? "slot needs a subcommand" : "unknown slot subcommand '" + sub + "'");
    });
}

int cmd_cache(int argc, char** argv) {
    return run_control(argc, argv, kCacheUsage, [](ControlArgs& a) {
        const std::string sub = a.positional.empty() ? "" : a.positional[0];
        if (sub == "list" && a.positional.size() == 1) return cache_list(a);
        if (sub == "evict") return cache_evict(a);
        throw UsageError(sub.empty() ? "cache needs a subcommand" : "unknown cache subcommand '" + sub + "'");
    });
}

} // namespace ninfer::ctl
