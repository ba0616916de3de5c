// ninfer tests - prefix cache: chained hashes, longest token-verified match, eviction by key and age.
#include "core/engine/prefix_cache.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using Clock = PrefixCache::Clock;

namespace {

std::vector<int32_t> seq(size_t n, int32_t base = 0) {
    std::vector<int32_t> s;
    for (size_t i = 0; i < n; ++i) s.push_back(base + int32_t(i * 37 % 1009));
    return s;
}

LaneImage image_of(std::vector<int32_t> tokens) {
    LaneImage img;
    for (uint8_t& b : img.add_section(LaneSectionTag::Kv, tokens.size() * 8)) b = 1;
    for (uint8_t& b : img.add_section(LaneSectionTag::Gdn, 64)) b = 2;
    img.tokens = std::move(tokens);
    return img;
}

SnapshotStoreOptions options() {
    SnapshotStoreOptions o;
    o.host_budget_bytes = 1 << 20;
    o.lock_memory = false;
    return o;
}

std::vector<int32_t> prefix(const std::vector<int32_t>& s, size_t n) { return {s.begin(), s.begin() + long(n)}; }

} // namespace

TEST_CASE("block hashes chain: a block's hash depends on everything before it", "[prefix_cache]") {
    std::vector<int32_t> a = seq(64), b = a;
    b[3] = 99999; // differs in block 0 only
    auto ha = prefix_block_hashes(a), hb = prefix_block_hashes(b);
    REQUIRE(ha.size() == 4);
    for (size_t k = 0; k < 4; ++k) CHECK(ha[k] != hb[k]);
    CHECK(prefix_block_hashes(prefix(a, 47)).size() == 2);
    CHECK(prefix_block_hashes(prefix(a, 48)) == std::vector<uint64_t>(ha.begin(), ha.begin() + 3));
    CHECK(prefix_key(prefix(a, 40)) != prefix_key(prefix(a, 41)));
    CHECK(prefix_key(prefix(a, 32)) != ha[1]); // a whole-block key is not the bare block hash
    CHECK(prefix_key(a) == prefix_key(seq(64)));
    CHECK(prefix_key_hex(0x1234).size() == 16);
}

TEST_CASE("match returns the longest checkpoint that is a proper prefix of the prompt", "[prefix_cache]") {
    PrefixCache cache(options());
    auto now = Clock::now();
    std::vector<int32_t> conv = seq(200);
    for (size_t n : {10u, 40u, 70u, 130u}) REQUIRE(cache.insert(image_of(prefix(conv, n)), now));

    const LaneImage* hit = cache.match(conv, now);
    REQUIRE(hit != nullptr);
    CHECK(hit->tokens.size() == 130);

    std::vector<int32_t> diverged = conv;
    diverged[50] = -5; // shares 50 tokens: the 40-token checkpoint is the longest usable one
    hit = cache.match(diverged, now);
    REQUIRE(hit != nullptr);
    CHECK(hit->tokens.size() == 40);

    // A prompt equal to a checkpoint cannot reuse all of it (a token must be prefilled for logits).
    hit = cache.match(prefix(conv, 70), now);
    REQUIRE(hit != nullptr);
    CHECK(hit->tokens.size() == 40);

    CHECK(cache.match(seq(100, 5000), now) == nullptr); // nothing shared
    CHECK(cache.match(prefix(conv, 10), now) == nullptr);
    CHECK(cache.stats().hits == 3);
    CHECK(cache.stats().misses == 2);
}

TEST_CASE("a second conversation turn finds the first turn's assistant boundary", "[prefix_cache]") {
    PrefixCache cache(options());
    auto now = Clock::now();
    std::vector<int32_t> turn1 = seq(37);                 // prompt of turn 1
    std::vector<int32_t> reply = seq(12, 3000);           // the assistant's reply tokens
    std::vector<int32_t> boundary = turn1;
    boundary.insert(boundary.end(), reply.begin(), reply.end());
    REQUIRE(cache.insert(image_of(turn1), now));          // end of the prompt
    REQUIRE(cache.insert(image_of(boundary), now));       // assistant boundary
    std::vector<int32_t> turn2 = boundary;
    for (int32_t t : seq(20, 7000)) turn2.push_back(t);
    const LaneImage* hit = cache.match(turn2, now);
    REQUIRE(hit != nullptr);
    CHECK(hit->tokens == boundary);
}

TEST_CASE("re-inserting a sequence replaces it; evict by key, by age and all", "[prefix_cache]") {
    PrefixCache cache(options());
    Clock::time_point t0{};
    auto t1 = t0 + std::chrono::seconds(100);
    std::vector<int32_t> a = seq(50), b = seq(80, 400);
    REQUIRE(cache.insert(image_of(a), t0));
    REQUIRE(cache.insert(image_of(a), t0));
    CHECK(cache.store().list().size() == 1);
    REQUIRE(cache.insert(image_of(b), t1));

    CHECK(cache.evict_key("not-a-key").count == 0);
    CHECK(cache.evict_key(prefix_key_hex(12345)).count == 0);
    auto removed = cache.evict_older_than(50, t1);
    CHECK(removed.count == 1);
    CHECK(removed.bytes == SnapshotStore::image_bytes(image_of(a)));
    CHECK(cache.match(seq(60), t1) == nullptr);

    std::vector<int32_t> b_longer = b;
    b_longer.push_back(1);
    CHECK(cache.match(b_longer, t1) != nullptr);
    CHECK(cache.evict_key(prefix_key_hex(prefix_key(b))).count == 1);
    CHECK(cache.match(b_longer, t1) == nullptr);

    REQUIRE(cache.insert(image_of(a), t1));
    REQUIRE(cache.insert(image_of(b), t1));
    CHECK(cache.evict_all().count == 2);
    CHECK(cache.store().used_bytes() == 0);
}

TEST_CASE("entries the store evicts are gone from the index too", "[prefix_cache]") {
    SnapshotStoreOptions o = options();
    o.host_budget_bytes = 2 * SnapshotStore::image_bytes(image_of(seq(100)));
    PrefixCache cache(o);
    Clock::time_point t{};
    for (int32_t base = 0; base < 10; ++base) {
        t += std::chrono::seconds(1);
        REQUIRE(cache.insert(image_of(seq(100, base * 10000)), t));
        CHECK(cache.store().used_bytes() <= o.host_budget_bytes);
    }
    int found = 0;
    for (int32_t base = 0; base < 10; ++base) {
        std::vector<int32_t> p = seq(100, base * 10000);
        p.push_back(7);
        found += cache.match(p, t) != nullptr;
    }
    CHECK(found == 2);
}
