// ninfer tests - the scheduler with a prefix cache and slot ops: a later turn restores the
// checkpoint, reports cached tokens and produces the same tokens as without the cache.
#include "core/engine/prefix_cache.h"
#include "core/engine/scheduler.h"
#include "core/util/error.h"
#include "fake_backend.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::FakeBackend;
using ninfer::test::RecordingSink;

namespace {

std::vector<int32_t> tokens(size_t n, int32_t salt) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(int32_t((i * 11 + size_t(salt)) % 900));
    return t;
}

std::shared_ptr<RecordingSink> run(Scheduler& s, uint64_t id, std::vector<int32_t> prompt, uint32_t max_tokens = 6) {
    auto sink = std::make_shared<RecordingSink>();
    GenerationRequest r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.sink = sink;
    s.submit(std::move(r));
    for (int guard = 0; s.has_requests() && guard < 10000; ++guard) s.step();
    REQUIRE(sink->finished);
    return sink;
}

SnapshotStoreOptions cache_options() {
    SnapshotStoreOptions o;
    o.host_budget_bytes = 1 << 20;
    o.lock_memory = false;
    return o;
}

} // namespace

TEST_CASE("a second turn on a reused lane restores the first turn and generates the same tokens",
          "[prefix_cache_scheduler]") {
    std::vector<int32_t> turn1 = tokens(40, 1);
    std::vector<int32_t> other = tokens(30, 500);

    // Reference: no cache, the lane recomputes everything.
    FakeBackend plain_backend(1);
    EngineStats plain_stats;
    Scheduler plain(plain_backend, {.max_context = 512, .prefill_chunk = 16}, plain_stats);
    auto first = run(plain, 1, turn1);
    std::vector<int32_t> turn2 = turn1;
    turn2.insert(turn2.end(), first->tokens.begin(), first->tokens.end());
    for (int32_t t : tokens(9, 77)) turn2.push_back(t);
    run(plain, 2, other); // the only lane now holds another conversation
    auto reference = run(plain, 3, turn2);
    CHECK(reference->cached == 0);

    PrefixCache cache(cache_options());
    FakeBackend backend(1);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 512, .prefill_chunk = 16, .prefix_cache = &cache}, stats);
    run(s, 1, turn1);
    run(s, 2, other);
    auto cached = run(s, 3, turn2);
    // The assistant boundary: turn 1's prompt + its whole reply (the last sample is fed too).
    CHECK(cached->cached == turn1.size() + first->tokens.size());
    CHECK(cached->summary.cached_tokens == cached->cached);
    CHECK(cached->tokens == reference->tokens);
    CHECK(stats.n_prefix_cache_hits_total == 1);
    CHECK(stats.n_prompt_tokens_cached_total == cached->cached);
}

// The CUDA backend copies checkpoints on its own thread: the image reaches the cache from a later
// step, and the scheduler's results are those of a backend that saves at once.
TEST_CASE("checkpoints that land a step late give the same hits and tokens", "[prefix_cache_scheduler]") {
    std::vector<int32_t> turn1 = tokens(40, 1);
    std::vector<int32_t> other = tokens(30, 500);
    auto conversation = [&](bool async, PrefixCache& cache, EngineStats& stats) {
        FakeBackend backend(1);
        backend.async_saves = async;
        Scheduler s(backend, {.max_context = 512, .prefill_chunk = 16, .prefix_cache = &cache}, stats);
        auto first = run(s, 1, turn1);
        if (async) {
            CHECK(backend.saves_in_flight()); // the reply's checkpoint is still being copied
            REQUIRE(s.next_deadline().has_value()); // and the engine loop comes back for it
        }
        run(s, 2, other);
        std::vector<int32_t> turn2 = turn1;
        turn2.insert(turn2.end(), first->tokens.begin(), first->tokens.end());
        for (int32_t t : tokens(9, 77)) turn2.push_back(t);
        return run(s, 3, turn2);
    };
    PrefixCache sync_cache(cache_options()), async_cache(cache_options());
    EngineStats sync_stats, async_stats;
    auto at_once = conversation(false, sync_cache, sync_stats);
    auto late = conversation(true, async_cache, async_stats);
    CHECK(late->cached == at_once->cached);
    CHECK(late->cached > turn1.size());
    CHECK(late->tokens == at_once->tokens);
    CHECK(async_stats.n_prefix_cache_hits_total == sync_stats.n_prefix_cache_hits_total);
    // A scheduler that goes away hands its checkpoints in flight to the cache first.
    PrefixCache cache(cache_options());
    EngineStats stats;
    {
        FakeBackend backend(1);
        backend.async_saves = true;
        Scheduler s(backend, {.max_context = 512, .prefill_chunk = 16, .prefix_cache = &cache}, stats);
        run(s, 1, turn1);
        CHECK(backend.saves_in_flight());
    }
    CHECK(cache.match(tokens(40, 1), Scheduler::Clock::now()) == nullptr); // a proper prefix only
    std::vector<int32_t> longer = turn1;
    longer.push_back(5);
    CHECK(cache.match(longer, Scheduler::Clock::now()) != nullptr);
}

// A checkpoint that would wait for a copy slot is skipped (the GPU measured 1.5 s engine stalls
// behind 32K-token images): the request still gets the same tokens, nothing reaches the cache
// from it, and the skip is counted.
TEST_CASE("a checkpoint is skipped, not waited for, when every copy slot is busy", "[prefix_cache_scheduler]") {
    std::vector<int32_t> turn1 = tokens(40, 1);
    auto conversation = [&](size_t slots, PrefixCache& cache, EngineStats& stats) {
        FakeBackend backend(1);
        backend.async_saves = true;
        backend.save_slots = slots;
        Scheduler s(backend, {.max_context = 512, .prefill_chunk = 16, .prefix_cache = &cache}, stats);
        return run(s, 1, turn1)->tokens;
    };
    PrefixCache free_cache(cache_options()), busy_cache(cache_options());
    EngineStats free_stats, busy_stats;
    auto with_slots = conversation(SIZE_MAX, free_cache, free_stats);
    auto no_slot = conversation(0, busy_cache, busy_stats);
    CHECK(no_slot == with_slots);
    CHECK(free_stats.n_prefix_cache_checkpoints_total == 2); // prompt end, reply end
    CHECK(free_stats.n_prefix_cache_checkpoints_skipped_total == 0);
    CHECK(free_cache.stats().inserts == 2);
    CHECK(busy_stats.n_prefix_cache_checkpoints_total == 0);
    CHECK(busy_stats.n_prefix_cache_checkpoints_skipped_total == 2);
    CHECK(busy_cache.stats().inserts == 0);
}

TEST_CASE("slot save, erase and restore round-trip a lane; empty and busy lanes are refused",
          "[prefix_cache_scheduler]") {
    FakeBackend backend(2);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 512, .prefill_chunk = 16}, stats);
    CHECK_THROWS_WITH(s.slot_save(1), "slot 1 is empty");
    CHECK_THROWS_WITH(s.slot_save(7), Catch::Contains("slot 7 does not exist"));
    std::vector<int32_t> p = tokens(25, 3);
    auto a = run(s, 1, p);
    int lane = a->lane;
    CHECK(stats.lane_tokens[size_t(lane)] == p.size() + a->tokens.size());
    CHECK(stats.lane_phase[size_t(lane)] == 0);
    LaneImage saved = s.slot_save(lane);
    CHECK(saved.tokens.size() == stats.lane_tokens[size_t(lane)]);

    std::vector<int32_t> next = saved.tokens;
    next.push_back(5);
    next.push_back(6);
    FakeBackend ref_backend(2);
    EngineStats ref_stats;
    Scheduler ref(ref_backend, {.max_context = 512, .prefill_chunk = 16}, ref_stats);
    auto uninterrupted = run(ref, 1, next);

    s.slot_erase(lane);
    CHECK(stats.lane_tokens[size_t(lane)] == 0);
    CHECK_THROWS_WITH(s.slot_save(lane), "slot " + std::to_string(lane) + " is empty");
    s.slot_restore(lane, saved);
    auto after = run(s, 2, next);
    CHECK(after->lane == lane);
    CHECK(after->cached == saved.tokens.size());
    CHECK(after->tokens == uninterrupted->tokens);

    // A lane in use cannot be restored over or erased.
    auto sink = std::make_shared<RecordingSink>();
    GenerationRequest r;
    r.id = 9;
    r.prompt = tokens(40, 9);
    r.max_tokens = 50;
    r.sink = sink;
    s.submit(std::move(r));
    s.step();
    REQUIRE(sink->admitted);
    CHECK_THROWS_WITH(s.slot_erase(sink->lane), Catch::Contains("is busy"));
    CHECK_THROWS_WITH(s.slot_restore(sink->lane, saved), Catch::Contains("is busy"));
    CHECK_NOTHROW(s.slot_save(sink->lane)); // saved as it stands at this step boundary
}

TEST_CASE("the assistant-boundary checkpoint serves the next turn whose template drops the reasoning",
          "[prefix_cache_scheduler]") {
    const std::vector<int32_t> marker = {950, 951, 952}; // "<|im_start|>assistant\n"
    std::vector<int32_t> history = tokens(30, 4);
    history.insert(history.end(), marker.begin(), marker.end());
    std::vector<int32_t> turn1 = history;
    turn1.push_back(960); // "<think>\n": the next turn's rendering does not repeat it
    std::vector<int32_t> turn2 = history;
    for (int32_t t : tokens(12, 300)) turn2.push_back(t); // reply + next user message

    PrefixCache cache(cache_options());
    FakeBackend backend(1);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 512, .prefill_chunk = 8, .prefix_cache = &cache}, stats);
    s.set_assistant_marker(marker);
    run(s, 1, turn1);
    run(s, 2, tokens(20, 700)); // the lane moves on
    auto second = run(s, 3, turn2);
    CHECK(second->cached == history.size());

    FakeBackend ref_backend(1);
    EngineStats ref_stats;
    Scheduler ref(ref_backend, {.max_context = 512, .prefill_chunk = 8}, ref_stats);
    CHECK(run(ref, 3, turn2)->tokens == second->tokens);
}
