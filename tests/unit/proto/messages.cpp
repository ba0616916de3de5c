// ninfer tests - payload round trips, malformed payloads, slot names.
#include "proto/messages.h"

#include <catch2/catch.hpp>

using namespace ninfer::proto;

TEST_CASE("messages: every payload round-trips", "[messages]") {
    StatusReply s;
    s.version = "0.1.0";
    s.model_id = "tiny";
    s.lanes = {{0, "idle", 0}, {1, "decode", 1234}};
    s.memory_plan.kv_pool_bytes = 1ull << 40;
    auto s2 = decode_payload<StatusReply>(encode_payload(s));
    REQUIRE(s2);
    CHECK(s2->model_id == "tiny");
    CHECK(s2->lanes.size() == 2);
    CHECK(s2->lanes[1].n_tokens == 1234);
    CHECK(s2->memory_plan.kv_pool_bytes == 1ull << 40);

    CacheListReply c;
    c.entries = {{"abcd", 10, 20, "host", 5, 2}};
    auto c2 = decode_payload<CacheListReply>(encode_payload(c));
    REQUIRE(c2);
    CHECK(c2->entries[0].tier == "host");

    SlotRequest r{3, "conv-1.a_b"};
    auto r2 = decode_payload<SlotRequest>(encode_payload(r));
    REQUIRE(r2);
    CHECK(r2->name == "conv-1.a_b");
    CHECK(decode_payload<CacheEvictRequest>(encode_payload(CacheEvictRequest{CacheEvictMode::OlderThan, "", 60}))->older_than_s == 60);

    ArtifactUpgradeReply u{"/m/x.ninfer", 2, "qwen3.6-27b", 1124, 900, 300, 17ull << 30, 4096, 1};
    auto u2 = decode_payload<ArtifactUpgradeReply>(encode_payload(u));
    REQUIRE(u2);
    CHECK(u2->destination == "/m/x.ninfer");
    CHECK(u2->from_version == 2);
    CHECK(u2->model_id == "qwen3.6-27b");
    CHECK((u2->n_objects == 1124 && u2->n_bindings == 900 && u2->n_uses == 300));
    CHECK((u2->payload_bytes == 17ull << 30 && u2->copied_bytes == 4096 && u2->n_files == 1));

    SettingsReply st{{{"port", "8080", true, false}, {"api-key", "<redacted>", false, true}}};
    auto st2 = decode_payload<SettingsReply>(encode_payload(st));
    REQUIRE(st2);
    REQUIRE(st2->settings.size() == 2);
    CHECK((st2->settings[0].name == "port" && st2->settings[0].value == "8080"));
    CHECK((st2->settings[0].is_default && !st2->settings[0].is_reloadable));
    CHECK((st2->settings[1].value == "<redacted>" && !st2->settings[1].is_default && st2->settings[1].is_reloadable));
}

TEST_CASE("messages: malformed payloads are refused", "[messages]") {
    auto bytes = encode_payload(SlotRequest{1, "x"});
    bytes.push_back(0); // trailing byte
    CHECK_FALSE(decode_payload<SlotRequest>(bytes));
    bytes.resize(6); // short string
    CHECK_FALSE(decode_payload<SlotRequest>(bytes));
    std::vector<uint8_t> lie = {0xff, 0xff, 0xff, 0x7f}; // a count no payload can hold
    CHECK_FALSE(decode_payload<CacheListReply>(lie));
    CHECK_FALSE(decode_payload<SettingsReply>(lie));
    auto setting = encode_payload(SettingsReply{{{"port", "1", false, false}}});
    setting.back() = 2; // a bool that is neither 0 nor 1
    CHECK_FALSE(decode_payload<SettingsReply>(setting));
    auto evict = encode_payload(CacheEvictRequest{});
    evict[0] = 9; // unknown mode
    CHECK_FALSE(decode_payload<CacheEvictRequest>(evict));
    auto watch = encode_payload(MetricsWatchRequest{1, 0}); // 1 ms interval is out of range
    CHECK_FALSE(decode_payload<MetricsWatchRequest>(watch));
}

TEST_CASE("messages: slot names", "[messages]") {
    CHECK(is_valid_slot_name("a"));
    CHECK(is_valid_slot_name("Chat_01.v2-x"));
    CHECK(is_valid_slot_name(std::string(64, 'a')));
    CHECK_FALSE(is_valid_slot_name(std::string(65, 'a')));
    CHECK_FALSE(is_valid_slot_name(""));
    CHECK_FALSE(is_valid_slot_name(".hidden"));
    CHECK_FALSE(is_valid_slot_name("../etc"));
    CHECK_FALSE(is_valid_slot_name("a/b"));
    CHECK_FALSE(is_valid_slot_name("a b"));
}
