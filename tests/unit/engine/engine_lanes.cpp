// ninfer tests - the engine's lane-state operations: slot save / restore / erase through its I/O
// worker, --persist-slots' persist_all / restore_all, the prefix cache it owns (list, evict),
// Unavailable from an engine that failed to load, and persist_checkpoints after a backend failure.
#include "core/engine/engine.h"
#include "core/engine/slot_file.h"
#include "core/util/error.h"
#include "temp_dir.h"
#include "fake_backend.h"
#include "waiting_sink.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

using namespace ninfer;
using namespace ninfer::core;
using namespace ninfer::test;

namespace {

struct Warnings {
    std::mutex mutex;
    std::vector<std::string> lines;
    std::string all() {
        std::lock_guard lock(mutex);
        std::string s;
        for (const std::string& l : lines) s += l + "\n";
        return s;
    }
};

LaneStateOptions lane_options(const std::string& dir, uint64_t cache_bytes, Warnings* warnings) {
    LaneStateOptions o;
    o.host_cache_bytes = cache_bytes;
    o.identity.artifact_id = artifact_id_from_hex("00112233445566778899aabbccddeeff");
    o.identity.model_id = "fake";
    o.identity.kv_bytes_per_token = 4;
    o.identity.gdn_bytes = 32;
    o.identity.max_context = 100000;
    o.slots_dir = dir + "/slots";
    o.lanes_dir = dir + "/lanes";
    o.warn = [warnings](const std::string& m) {
        std::lock_guard lock(warnings->mutex);
        warnings->lines.push_back(m);
    };
    return o;
}

std::unique_ptr<Backend> fake_backend() {
    auto b = std::make_unique<FakeBackend>(2);
    b->kv_bytes_per_token = 4;
    b->gdn_bytes = 32;
    return b;
}

void start(Engine& engine) {
    std::promise<EngineState> state;
    engine.start(fake_backend, [&](EngineState s, const std::string&) { state.set_value(s); });
    REQUIRE(state.get_future().get() == EngineState::Ready);
}

// Calls op(done) and waits for done's result (it arrives on the engine or I/O thread).
template <typename Result, typename Op> Result call(Op op) {
    auto promise = std::make_shared<std::promise<Result>>();
    op([promise](Result r) { promise->set_value(std::move(r)); });
    auto f = promise->get_future();
    REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    return f.get();
}

LaneOpResult save(Engine& e, int lane, const std::string& name) {
    return call<LaneOpResult>([&](Engine::LaneDone d) { e.save_lane(lane, name, std::move(d)); });
}
LaneOpResult restore(Engine& e, int lane, const std::string& name) {
    return call<LaneOpResult>([&](Engine::LaneDone d) { e.restore_lane(lane, name, std::move(d)); });
}
LanesSummary persist(Engine& e) {
    return call<LanesSummary>([&](auto d) { e.persist_all(std::move(d)); });
}
LanesSummary restore_all(Engine& e) {
    return call<LanesSummary>([&](auto d) { e.restore_all(std::move(d)); });
}

void run_one(Engine& engine, uint64_t id) {
    auto sink = std::make_shared<WaitingSink>();
    engine.submit(request(id, 5, sink));
    REQUIRE(wait(sink) == "finished:1:5");
}

} // namespace

TEST_CASE("slot save, restore and erase run engine -> I/O -> result inside the engine", "[engine_lanes]") {
    TempDir dir;
    Warnings warnings;
    Engine engine({.max_context = 1000, .prefill_chunk = 4}, lane_options(dir.path, 0, &warnings));
    start(engine);
    run_one(engine, 1); // lane 0: the 5 prompt ids and the 5 samples (every sample is fed)

    LaneOpResult saved = save(engine, 0, "conv");
    REQUIRE_FALSE(saved.error);
    CHECK(saved.n_tokens == 10);
    CHECK(saved.bytes == std::filesystem::file_size(dir.path + "/slots/conv.nslot"));
    CHECK(saved.bytes == kSlotHeaderBytes + 10 * 4 + 10 * 4 + 32);

    LaneOpResult restored = restore(engine, 1, "conv");
    REQUIRE_FALSE(restored.error);
    CHECK(restored.n_tokens == 10);
    CHECK(restored.lane == 1);
    CHECK(save(engine, 1, "copy").n_tokens == 10); // lane 1 now holds the saved sequence

    LaneOpResult missing = restore(engine, 1, "missing");
    REQUIRE(missing.error);
    CHECK(missing.error->kind == Errc::NotFound);
    CHECK(missing.error->message == "no saved slot named 'missing'");
    CHECK(save(engine, 7, "x").error->kind == Errc::NotFound); // no lane 7

    std::ofstream(dir.path + "/slots/bad.nslot") << "not a slot file at all";
    LaneOpResult bad = restore(engine, 0, "bad");
    REQUIRE(bad.error);
    CHECK_THAT(bad.error->message, Catch::Contains("truncated"));

    LaneOpResult erased = call<LaneOpResult>([&](Engine::LaneDone d) { engine.erase_lane(1, std::move(d)); });
    CHECK_FALSE(erased.error);
    LaneOpResult empty = save(engine, 1, "empty");
    REQUIRE(empty.error);
    CHECK(empty.error->kind == Errc::NotFound);
    CHECK_FALSE(std::filesystem::exists(dir.path + "/slots/empty.nslot"));
    CHECK(warnings.all().empty());
}

TEST_CASE("persist_all saves every lane that holds a sequence; restore_all brings them back", "[engine_lanes]") {
    TempDir dir;
    Warnings warnings;
    std::filesystem::create_directories(dir.path + "/lanes");
    std::ofstream(dir.path + "/lanes/lane-1.nslot") << "an old run's lane 1";
    {
        Engine engine({.max_context = 1000, .prefill_chunk = 4}, lane_options(dir.path, 0, &warnings));
        start(engine);
        run_one(engine, 1);
        LanesSummary s = persist(engine);
        CHECK(s.n_done == 1);
        CHECK(s.n_failed == 0);
        CHECK(s.bytes == std::filesystem::file_size(dir.path + "/lanes/lane-0.nslot"));
        CHECK_FALSE(std::filesystem::exists(dir.path + "/lanes/lane-1.nslot")); // lane 1 held nothing
        CHECK_THAT(s.describe("saved"), Catch::StartsWith("slots, saved 1 lane(s), "));
    }
    {
        Engine engine({.max_context = 1000, .prefill_chunk = 4}, lane_options(dir.path, 0, &warnings));
        start(engine);
        LanesSummary s = restore_all(engine);
        CHECK(s.n_done == 1);
        CHECK(s.n_failed == 0);
        CHECK(save(engine, 0, "after-restart").n_tokens == 10);
        CHECK(save(engine, 1, "other").error); // still empty
    }
    std::filesystem::resize_file(dir.path + "/lanes/lane-0.nslot", 100); // cut short
    {
        Engine engine({.max_context = 1000, .prefill_chunk = 4}, lane_options(dir.path, 0, &warnings));
        start(engine);
        LanesSummary s = restore_all(engine);
        CHECK(s.n_done == 0);
        CHECK(s.n_failed == 1);
        CHECK_THAT(warnings.all(), Catch::Contains("slots, lane 0 starts empty: slot file"));
        CHECK(save(engine, 0, "x").error->kind == Errc::NotFound); // the lane stayed empty and usable
        run_one(engine, 2);
    }
}

TEST_CASE("the engine builds and owns the prefix cache from its options", "[engine_lanes]") {
    TempDir dir;
    Warnings warnings;
    Engine engine({.max_context = 1000, .prefill_chunk = 4}, lane_options(dir.path, 1 << 20, &warnings));
    start(engine);
    run_one(engine, 1); // checkpoints at the prompt's end and the reply's end
    CacheListing listing = call<CacheListing>([&](auto d) { engine.list_cache(std::move(d)); });
    REQUIRE_FALSE(listing.error);
    CHECK(listing.budget_bytes == 1 << 20);
    REQUIRE(!listing.entries.empty());
    uint64_t sum = 0;
    for (const SnapshotInfo& i : listing.entries) sum += i.bytes;
    CHECK(listing.used_bytes == sum);
    // The gauges /metrics and /monitor read without a round trip agree with the listing.
    CHECK(engine.stats().host_cache_used_bytes == sum);
    CHECK(engine.stats().host_cache_budget_bytes == 1 << 20);
    CHECK(engine.stats().host_cache_entries == listing.entries.size());

    CacheEvictRequest absent{CacheEvictRequest::Mode::Key, 0, "0000000000000000"};
    CacheEvictResult none = call<CacheEvictResult>([&](auto d) { engine.evict(absent, std::move(d)); });
    REQUIRE(none.error);
    CHECK(none.error->kind == Errc::NotFound);
    CacheEvictResult all = call<CacheEvictResult>([&](auto d) { engine.evict({}, std::move(d)); });
    CHECK(all.count == listing.entries.size());
    CHECK(all.bytes == sum);
    CHECK(call<CacheListing>([&](auto d) { engine.list_cache(std::move(d)); }).used_bytes == 0);
    CHECK(engine.stats().host_cache_used_bytes == 0); // published by the eviction itself
    CHECK(engine.stats().host_cache_entries == 0);
}

TEST_CASE("without a prefix cache the cache ops report nothing; a failed engine reports Unavailable",
          "[engine_lanes]") {
    TempDir dir;
    Warnings warnings;
    {
        Engine engine({}, lane_options(dir.path, 0, &warnings));
        start(engine);
        CacheListing listing = call<CacheListing>([&](auto d) { engine.list_cache(std::move(d)); });
        CHECK_FALSE(listing.error);
        CHECK((listing.entries.empty() && listing.budget_bytes == 0));
    }
    Engine engine({}, lane_options(dir.path, 1 << 20, &warnings));
    std::promise<EngineState> state;
    engine.start([]() -> std::unique_ptr<Backend> { throw Error("backend: no memory"); },
                 [&](EngineState s, const std::string&) { state.set_value(s); });
    REQUIRE(state.get_future().get() == EngineState::Failed);
    LaneOpResult r = save(engine, 0, "x");
    REQUIRE(r.error);
    CHECK(r.error->kind == Errc::Unavailable);
    CHECK(call<CacheEvictResult>([&](auto d) { engine.evict({}, std::move(d)); }).error->kind == Errc::Unavailable);
    CHECK(persist(engine).n_done == 0); // no lanes: the pass ends at once
}

// A backend that fails on lane 0's fourth decode while its request (a prompt of 20 ids) runs; the
// engine reports Failed, then persist_checkpoints runs with `cache_bytes` of prefix cache.
LanesSummary persist_after_failure(const std::string& dir, uint64_t cache_bytes, Warnings& warnings,
                                   std::vector<std::string>& notes) {
    LaneStateOptions lanes = lane_options(dir, cache_bytes, &warnings);
    lanes.note = [&notes](const std::string& m) { notes.push_back(m); }; // engine thread; read after the pass
    Engine engine({.max_context = 1000, .prefill_chunk = 64}, lanes);
    std::promise<void> failed;
    engine.start([] {
        auto b = fake_backend();
        static_cast<FakeBackend&>(*b).decodes_before_failure = 3;
        return b;
    }, [&](EngineState s, const std::string&) {
        if (s == EngineState::Failed) failed.set_value();
    });
    auto sink = std::make_shared<WaitingSink>();
    GenerationRequest r = request(1, 500, sink);
    r.prompt.clear();
    for (int32_t id = 1; id <= 20; ++id) r.prompt.push_back(id);
    engine.submit(std::move(r));
    CHECK(wait(sink).rfind("finished:3:", 0) == 0); // FinishReason::Failed
    failed.get_future().wait();
    return call<LanesSummary>([&](auto d) { engine.persist_checkpoints(std::move(d)); });
}

TEST_CASE("after a backend failure a lane is saved from its prompt's host checkpoint, never from the device",
          "[engine_lanes]") {
    TempDir dir;
    Warnings warnings;
    std::vector<std::string> notes;
    LanesSummary s = persist_after_failure(dir.path, 1 << 20, warnings, notes);
    CHECK(s.n_done == 1); // lane 0; lane 1 held nothing: no file, no warning
    CHECK(s.n_failed == 0);
    CHECK(warnings.all().empty());
    LaneImage saved = slot_file_read(dir.path + "/lanes/lane-0.nslot", lane_options(dir.path, 0, &warnings).identity,
                                     file_io_mode_default());
    std::vector<int32_t> prompt(20);
    for (int32_t i = 0; i < 20; ++i) prompt[size_t(i)] = i + 1;
    CHECK(saved.tokens == prompt); // the running request went back to its prompt's checkpoint
    CHECK_FALSE(std::filesystem::exists(dir.path + "/lanes/lane-1.nslot"));
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Catch::Contains("lane 0 is saved from its host checkpoint of 20 of the ") &&
                             Catch::Contains("(the rest is lost)"));
}

TEST_CASE("after a backend failure a lane that held tokens without a host checkpoint is warned about and counted",
          "[engine_lanes]") {
    TempDir dir;
    Warnings warnings;
    std::vector<std::string> notes;
    std::filesystem::create_directories(dir.path + "/lanes");
    std::ofstream(dir.path + "/lanes/lane-0.nslot") << "an old run's lane 0";
    LanesSummary s = persist_after_failure(dir.path, 0, warnings, notes); // no prefix cache
    CHECK(s.n_done == 0);
    CHECK(s.n_failed == 1);
    CHECK_THAT(warnings.all(), Catch::Contains("cannot save lane 0 for the next start: lane 0 held ") &&
                                   Catch::Contains("but has no host checkpoint (the prefix cache is off); it starts empty"));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/lanes/lane-0.nslot")); // an older state never comes back
}
