// ninfer tests - snapshot store: the eviction order the value formula fixes, budgets never exceeded,
// eviction drops (there is no disk tier), images come back intact, the unlocked-memory warning, page locking under a raised LimitMEMLOCK.
#include "core/engine/snapshot_store.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <random>
#include <sys/resource.h>
#include <unistd.h>

using namespace ninfer::core;
using Clock = SnapshotStore::Clock;

namespace {

// kv 1 KiB per token + 64 KiB of GDN state, so bytes = 4n + 1024n + 65536.
LaneImage image(uint32_t n, uint32_t seed = 1) {
    LaneImage img;
    for (uint32_t i = 0; i < n; ++i) img.tokens.push_back(int32_t(seed * 7919 + i));
    for (uint8_t& b : img.add_section(LaneSectionTag::Kv, size_t(n) * 1024)) b = uint8_t(seed);
    for (uint8_t& b : img.add_section(LaneSectionTag::Gdn, 65536)) b = uint8_t(seed + 1);
    return img;
}
uint64_t bytes_of(uint32_t n) { return 4ull * n + 1024ull * n + 65536; }

SnapshotStoreOptions options(uint64_t host_budget) {
    SnapshotStoreOptions o;
    o.host_budget_bytes = host_budget;
    o.lock_memory = false;
    return o;
}

} // namespace

TEST_CASE("the value formula fixes the eviction order", "[snapshot_store]") {
    // rebuild rate 1000 tok/s; value = rebuild_ms / MiB / (1 + idle_s / 600):
    //   1: n=64   at t=1200 -> 64 ms / 0.1252 MiB = 511.0
    //   2: n=512  at t=1200 -> 512 ms / 0.5645 MiB = 907.1
    //   3: n=512  at t=0    -> 907.1 / (1 + 1200/600) = 302.4
    //   4: n=2048 at t=1200 -> 2048 ms / 2.0703 MiB = 989.2
    // so the order is 3, 1, 2, 4.
    Clock::time_point t0{};
    Clock::time_point now = t0 + std::chrono::seconds(1200);
    uint64_t budget = bytes_of(64) + 2 * bytes_of(512) + bytes_of(2048);
    SnapshotStore store(options(budget));
    store.set_rebuild_tokens_per_s(1000);
    REQUIRE(store.put(3, image(512, 3), t0));
    REQUIRE(store.put(1, image(64, 1), now));
    REQUIRE(store.put(2, image(512, 2), now));
    REQUIRE(store.put(4, image(2048, 4), now));
    CHECK(store.used_bytes() == budget);
    auto value = [&](uint64_t id) { return store.value(*store.info(id), now); };
    CHECK(value(1) == Approx(511.0).epsilon(0.001));
    CHECK(value(4) == Approx(989.2).epsilon(0.001));
    CHECK(value(3) == Approx(value(2) / 3));

    REQUIRE(store.put(9, image(2048, 9), now)); // needs every byte: all four leave, in value order
    CHECK(store.take_dropped() == std::vector<uint64_t>{3, 1, 2, 4});
    CHECK(store.used_bytes() == bytes_of(2048));
}

TEST_CASE("using an entry makes it recent again", "[snapshot_store]") {
    Clock::time_point t0{};
    Clock::time_point now = t0 + std::chrono::seconds(1200);
    SnapshotStore store(options(bytes_of(512) + bytes_of(64)));
    store.set_rebuild_tokens_per_s(1000);
    REQUIRE(store.put(1, image(512, 1), t0));
    REQUIRE(store.put(2, image(64, 2), now));
    REQUIRE(store.get(1, now) != nullptr); // idle 0 now: 907k beats 511k
    REQUIRE(store.put(3, image(64, 3), now));
    CHECK(store.take_dropped() == std::vector<uint64_t>{2});
    CHECK(store.info(1)->hits == 1);
}

TEST_CASE("the host tier never exceeds its budget and refuses what cannot fit", "[snapshot_store]") {
    const uint64_t budget = 3 * bytes_of(300);
    SnapshotStore store(options(budget));
    CHECK_FALSE(store.put(1, image(3000), Clock::now())); // bigger than the whole budget
    CHECK(store.list().empty());
    std::mt19937 rng(5);
    Clock::time_point t{};
    for (uint64_t id = 10; id < 400; ++id) {
        t += std::chrono::milliseconds(rng() % 5000);
        uint32_t n = 1 + rng() % 700;
        bool stored = store.put(id, image(n, uint32_t(id)), t);
        CHECK(stored == (bytes_of(n) <= budget));
        if (rng() % 3 == 0 && !store.list().empty()) store.get(store.list().front().id, t);
        uint64_t sum = 0;
        for (const SnapshotInfo& s : store.list()) sum += s.bytes;
        REQUIRE(store.used_bytes() <= budget);
        REQUIRE(sum == store.used_bytes());
    }
}

TEST_CASE("evicted checkpoints are gone and kept ones come back intact", "[snapshot_store]") {
    SnapshotStore store(options(2 * bytes_of(100) + 10));
    Clock::time_point t{};
    for (uint64_t id = 1; id <= 4; ++id) REQUIRE(store.put(id, image(100, uint32_t(id)), t + std::chrono::seconds(id)));
    // Room for two: the least recent (equal value otherwise) leave first and are not kept anywhere.
    CHECK(store.take_dropped() == std::vector<uint64_t>{1, 2});
    CHECK(store.get(1, t + std::chrono::seconds(10)) == nullptr);
    CHECK_FALSE(store.contains(2));
    const LaneImage* back = store.get(3, t + std::chrono::seconds(10));
    REQUIRE(back != nullptr);
    CHECK(*back == image(100, 3));
    CHECK(store.info(3)->hits == 1);
    CHECK(store.used_bytes() == 2 * bytes_of(100));
}

TEST_CASE("a refused page lock warns once and the store keeps working", "[snapshot_store]") {
    if (::geteuid() == 0) return; // root locks regardless of RLIMIT_MEMLOCK
    rlimit saved{};
    ::getrlimit(RLIMIT_MEMLOCK, &saved);
    rlimit none = saved;
    none.rlim_cur = 0;
    REQUIRE(::setrlimit(RLIMIT_MEMLOCK, &none) == 0);
    std::vector<std::string> warnings;
    {
        SnapshotStoreOptions o = options(10 * bytes_of(10));
        o.lock_memory = true;
        o.warn = [&](const std::string& m) { warnings.push_back(m); };
        SnapshotStore store(o);
        CHECK(store.put(1, image(10), Clock::now()));
        CHECK(store.put(2, image(10), Clock::now()));
        CHECK_FALSE(store.memory_locked());
        CHECK(store.get(2, Clock::now()) != nullptr);
    }
    ::setrlimit(RLIMIT_MEMLOCK, &saved);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("page-lock"));
}

namespace {

uint64_t locked_kib() { // VmLck of this process
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t kib = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmLck: %lu kB", &kib) == 1) break;
    std::fclose(f);
    return kib;
}

} // namespace

TEST_CASE("with LimitMEMLOCK raised the host tier is page-locked", "[snapshot_store]") {
    // What systemd's LimitMEMLOCK=infinity gives the daemon: raise the soft limit as far as this
    // process may (infinity for root or an unlimited hard limit, else the hard limit).
    rlimit saved{};
    REQUIRE(::getrlimit(RLIMIT_MEMLOCK, &saved) == 0);
    rlimit raised{RLIM_INFINITY, RLIM_INFINITY}; // needs CAP_SYS_RESOURCE unless the hard limit is already that
    if (::setrlimit(RLIMIT_MEMLOCK, &raised) != 0) {
        raised = {saved.rlim_max, saved.rlim_max};
        REQUIRE(::setrlimit(RLIMIT_MEMLOCK, &raised) == 0);
    }
    const uint64_t n_tokens = 256; // 256 KiB of KV + 64 KiB of GDN state: under any default limit
    if (raised.rlim_cur != RLIM_INFINITY && raised.rlim_cur < 2 * bytes_of(n_tokens) + (1 << 20)) {
        ::setrlimit(RLIMIT_MEMLOCK, &saved);
        WARN("RLIMIT_MEMLOCK hard limit " << raised.rlim_cur << " too low to lock a test image");
        return;
    }
    std::vector<std::string> warnings;
    {
        SnapshotStoreOptions o = options(4 * bytes_of(n_tokens));
        o.lock_memory = true;
        o.warn = [&](const std::string& m) { warnings.push_back(m); };
        SnapshotStore store(o);
        uint64_t before = locked_kib();
        REQUIRE(store.put(1, image(n_tokens), Clock::now()));
        CHECK(store.memory_locked());
        // The kernel counts the locked pages: at least the KV and GDN bytes (page rounding adds).
        CHECK(locked_kib() - before >= (n_tokens * 1024 + 65536) / 1024);
        REQUIRE(store.put(2, image(n_tokens, 2), Clock::now()));
        CHECK(store.memory_locked());
        CHECK(store.erase(1));
        CHECK(store.erase(2));
        CHECK(locked_kib() <= before); // dropped entries are unlocked
    }
    ::setrlimit(RLIMIT_MEMLOCK, &saved);
    CHECK(warnings.empty());
}
