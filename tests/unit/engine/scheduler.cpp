// ninfer tests - scheduler: batching equals solo, prefill/decode interleaving, queue limits, cancel.
#include "core/engine/scheduler.h"
#include "fake_backend.h"

#include <catch2/catch.hpp>

#include <memory>
#include <thread>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::FakeBackend;
using ninfer::test::RecordingSink;

namespace {

GenerationRequest make_request(uint64_t id, size_t prompt_len, uint32_t max_tokens, std::shared_ptr<RecordingSink> sink,
                               int32_t salt = 0) {
    GenerationRequest r;
    r.id = id;
    for (size_t i = 0; i < prompt_len; ++i) r.prompt.push_back(int32_t((i * 7 + id * 13 + salt) % 997));
    r.max_tokens = max_tokens;
    r.sink = std::move(sink);
    return r;
}

void run_until_idle(Scheduler& s) {
    for (int guard = 0; s.has_requests() && guard < 100000; ++guard) s.step();
}

} // namespace

TEST_CASE("greedy output of each request is identical alone or batched with seven others", "[scheduler]") {
    std::vector<std::vector<int32_t>> solo;
    for (uint64_t id = 0; id < 8; ++id) {
        FakeBackend backend(4);
        EngineStats stats;
        Scheduler s(backend, {.max_context = 512, .prefill_chunk = 16}, stats);
        auto sink = std::make_shared<RecordingSink>();
        s.submit(make_request(id, 20 + id * 9, 12 + uint32_t(id), sink));
        run_until_idle(s);
        REQUIRE(sink->finished);
        solo.push_back(sink->tokens);
    }
    FakeBackend backend(4);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 512, .prefill_chunk = 16}, stats);
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (uint64_t id = 0; id < 8; ++id) {
        sinks.push_back(std::make_shared<RecordingSink>());
        s.submit(make_request(id, 20 + id * 9, 12 + uint32_t(id), sinks.back()));
    }
    run_until_idle(s);
    bool saw_batch = false;
    for (const auto& c : backend.calls) saw_batch = saw_batch || (c.kind == "decode" && c.n > 1);
    CHECK(saw_batch);
    for (size_t i = 0; i < 8; ++i) {
        CHECK(sinks[i]->tokens == solo[i]);
        CHECK(sinks[i]->summary.reason == FinishReason::Length);
        CHECK(sinks[i]->summary.completion_tokens == 12 + i);
    }
    CHECK(stats.n_requests_finished_total == 8);
    CHECK(stats.n_requests_running == 0);
}

TEST_CASE("a long prefill runs in chunks with a decode step between every two chunks", "[scheduler]") {
    FakeBackend backend(2);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 4096, .prefill_chunk = 64}, stats);
    auto decoding = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 10, 200, decoding));
    for (int i = 0; i < 3; ++i) s.step(); // request 1 now decodes
    backend.calls.clear();
    auto long_prompt = std::make_shared<RecordingSink>();
    s.submit(make_request(2, 1000, 4, long_prompt));
    for (int i = 0; i < 40; ++i) s.step();
    REQUIRE(long_prompt->finished);
    int prefills_since_decode = 0;
    size_t n_prefill_calls = 0;
    for (const auto& c : backend.calls) {
        if (c.kind == "prefill") {
            CHECK(c.n <= 64);
            ++n_prefill_calls;
            CHECK(++prefills_since_decode <= 1);
        } else {
            prefills_since_decode = 0;
        }
    }
    CHECK(n_prefill_calls == (1000 + 63) / 64);
}

TEST_CASE("prefill-chunk-decoding bounds the chunk while a lane decodes, not on an idle engine", "[scheduler]") {
    FakeBackend backend(2);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 4096, .prefill_chunk = 64, .prefill_chunk_decoding = 16}, stats);
    auto alone = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 200, 40, alone)); // nothing decodes: chunks of 64
    for (int i = 0; i < 4; ++i) s.step();
    std::vector<size_t> idle_chunks;
    for (const auto& c : backend.calls)
        if (c.kind == "prefill") idle_chunks.push_back(c.n);
    CHECK(idle_chunks == std::vector<size_t>{64, 64, 64, 8});
    backend.calls.clear();
    auto long_prompt = std::make_shared<RecordingSink>(); // request 1 decodes meanwhile: chunks of 16
    s.submit(make_request(2, 100, 4, long_prompt));
    for (int i = 0; i < 10; ++i) s.step();
    std::vector<size_t> busy_chunks;
    for (const auto& c : backend.calls)
        if (c.kind == "prefill") busy_chunks.push_back(c.n);
    CHECK(busy_chunks == std::vector<size_t>{16, 16, 16, 16, 16, 16, 4});
    run_until_idle(s);
    CHECK(alone->tokens.size() == 40);
    CHECK(long_prompt->tokens.size() == 4);
}

TEST_CASE("a short prompt admitted during a long prefill is prefilled next, not after it", "[scheduler]") {
    FakeBackend backend(3);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 8192, .prefill_chunk = 64}, stats);
    auto long_prompt = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 4000, 4, long_prompt));
    for (int i = 0; i < 5; ++i) s.step(); // five of its 63 chunks
    auto short_a = std::make_shared<RecordingSink>(), short_b = std::make_shared<RecordingSink>();
    s.submit(make_request(2, 100, 4, short_a));
    s.submit(make_request(3, 30, 4, short_b));
    backend.calls.clear();
    s.step(); // the 30-token prompt: fewest left
    s.step(); // the 100-token prompt's first chunk (64 tokens)
    s.step(); // its last 36
    REQUIRE(backend.calls.size() >= 3);
    std::vector<std::pair<int, size_t>> prefills;
    for (const auto& c : backend.calls)
        if (c.kind == "prefill") prefills.push_back({c.lane, c.n});
    for (const auto& [lane, n] : prefills) UNSCOPED_INFO("prefill lane " << lane << " n " << n);
    REQUIRE(prefills.size() == 3);
    CHECK(prefills[0] == std::pair<int, size_t>(short_b->lane, 30));
    CHECK(prefills[1] == std::pair<int, size_t>(short_a->lane, 64));
    CHECK(prefills[2] == std::pair<int, size_t>(short_a->lane, 36));
    CHECK(short_b->tokens.size() >= 1);
    CHECK(short_a->tokens.size() >= 1);
    CHECK(long_prompt->tokens.empty());
    run_until_idle(s);
    // Order changes nothing in what each request gets: the long prompt's tokens equal a solo run's.
    FakeBackend solo_backend(1);
    EngineStats solo_stats;
    Scheduler solo(solo_backend, {.max_context = 8192, .prefill_chunk = 64}, solo_stats);
    auto alone = std::make_shared<RecordingSink>();
    solo.submit(make_request(1, 4000, 4, alone));
    run_until_idle(solo);
    CHECK(long_prompt->tokens == alone->tokens);
}

TEST_CASE("queue bound, context check and pending timeout reject with the right reason", "[scheduler]") {
    FakeBackend backend(1);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 100, .prefill_chunk = 8, .max_pending = 1, .pending_timeout_ms = 30}, stats);
    auto too_long = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 90, 20, too_long));
    CHECK(too_long->rejected);
    CHECK(too_long->reject_reason == RejectReason::ContextExceeded);

    auto running = std::make_shared<RecordingSink>(), waiting = std::make_shared<RecordingSink>(),
         overflow = std::make_shared<RecordingSink>();
    s.submit(make_request(2, 10, 50, running));
    s.step(); // admits 2
    s.submit(make_request(3, 10, 5, waiting));
    s.submit(make_request(4, 10, 5, overflow));
    CHECK(overflow->rejected);
    CHECK(overflow->reject_reason == RejectReason::QueueFull);
    CHECK_FALSE(waiting->rejected);
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    s.step();
    CHECK(waiting->rejected);
    CHECK(waiting->reject_reason == RejectReason::QueueTimeout);
    CHECK(stats.n_requests_rejected_total == 3);
}

TEST_CASE("cancel frees the lane before the next step and the queue head takes it", "[scheduler]") {
    FakeBackend backend(1);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 1000, .prefill_chunk = 8}, stats);
    auto first = std::make_shared<RecordingSink>(), second = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 10, 500, first));
    s.submit(make_request(2, 10, 3, second));
    for (int i = 0; i < 5; ++i) s.step();
    CHECK_FALSE(second->admitted);
    s.cancel(1);
    CHECK(first->finished);
    CHECK(first->summary.reason == FinishReason::Cancelled);
    s.step();
    CHECK(second->admitted);
    run_until_idle(s);
    CHECK(second->tokens.size() == 3);
    CHECK(stats.n_requests_cancelled_total == 1);
}

TEST_CASE("a stop token or a Stop verdict ends the generation with reason stop", "[scheduler]") {
    FakeBackend backend(1);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 1000, .prefill_chunk = 8}, stats);
    auto probe = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 10, 6, probe));
    run_until_idle(s);
    REQUIRE(probe->tokens.size() == 6);

    auto by_id = std::make_shared<RecordingSink>();
    GenerationRequest r = make_request(1, 10, 6, by_id);
    r.stop_token_ids = {probe->tokens[2]};
    s.submit(std::move(r));
    run_until_idle(s);
    CHECK(by_id->summary.reason == FinishReason::Stop);
    CHECK(by_id->summary.completion_tokens == 3);

    auto by_verdict = std::make_shared<RecordingSink>();
    by_verdict->stop_after_token = probe->tokens[1];
    s.submit(make_request(1, 10, 6, by_verdict));
    run_until_idle(s);
    CHECK(by_verdict->tokens.size() == 2);
    CHECK(by_verdict->summary.reason == FinishReason::Stop);
}

TEST_CASE("a prompt that extends a lane's previous sequence reuses it as cached tokens", "[scheduler]") {
    FakeBackend backend(1);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 1000, .prefill_chunk = 8}, stats);
    auto first = std::make_shared<RecordingSink>();
    GenerationRequest r1 = make_request(1, 20, 4, first);
    std::vector<int32_t> prompt = r1.prompt;
    s.submit(std::move(r1));
    run_until_idle(s);
    // History = prompt + the four generated tokens, every one fed back (the last one too).
    std::vector<int32_t> follow = prompt;
    follow.insert(follow.end(), first->tokens.begin(), first->tokens.end());
    follow.insert(follow.end(), {5, 6, 7});
    auto second = std::make_shared<RecordingSink>();
    GenerationRequest r2 = make_request(2, 0, 4, second);
    r2.prompt = follow;
    s.submit(std::move(r2));
    run_until_idle(s);
    CHECK(second->cached == 24);
    CHECK(second->summary.cached_tokens == 24);

    // The reused lane gives the same tokens as a fresh one.
    FakeBackend fresh_backend(1);
    EngineStats fresh_stats;
    Scheduler fresh(fresh_backend, {.max_context = 1000, .prefill_chunk = 8}, fresh_stats);
    auto third = std::make_shared<RecordingSink>();
    GenerationRequest r3 = make_request(3, 0, 4, third);
    r3.prompt = follow;
    fresh.submit(std::move(r3));
    run_until_idle(fresh);
    CHECK(third->cached == 0);
    CHECK(third->tokens == second->tokens);
}

TEST_CASE("a new request takes the free lane with the longest matching prefix, else the lowest-numbered",
          "[scheduler]") {
    FakeBackend backend(3);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 1000, .prefill_chunk = 64}, stats);
    auto a = std::make_shared<RecordingSink>(), b = std::make_shared<RecordingSink>();
    GenerationRequest ra = make_request(1, 12, 3, a), rb = make_request(2, 20, 3, b);
    std::vector<int32_t> prompt_b = rb.prompt;
    s.submit(std::move(ra));
    s.submit(std::move(rb));
    run_until_idle(s);
    REQUIRE(a->lane == 0);
    REQUIRE(b->lane == 1); // lanes 0 and 1 keep their sequences, lane 2 is empty
    LaneImage image_b = s.slot_save(1);

    // Extending B's sequence: lane 1, whatever its number, with B's tokens cached.
    std::vector<int32_t> follow = prompt_b;
    follow.insert(follow.end(), b->tokens.begin(), b->tokens.end());
    follow.push_back(5);
    auto c = std::make_shared<RecordingSink>();
    GenerationRequest rc = make_request(3, 0, 2, c);
    rc.prompt = follow;
    s.submit(std::move(rc));
    run_until_idle(s);
    CHECK(c->lane == 1);
    CHECK(c->cached == prompt_b.size() + b->tokens.size());

    // Matching no lane: the lowest-numbered free lane (0), not the empty lane 2.
    auto d = std::make_shared<RecordingSink>();
    s.submit(make_request(4, 9, 2, d, 500));
    run_until_idle(s);
    CHECK(d->lane == 0);
    CHECK(d->cached == 0);

    // Two matching lanes: lane 0 gets B's sequence back, lane 1 holds B's extended by C; the
    // longer prefix wins over the lower number.
    s.slot_restore(0, image_b);
    std::vector<int32_t> longer = follow;
    longer.insert(longer.end(), c->tokens.begin(), c->tokens.end());
    longer.insert(longer.end(), {8, 9});
    auto e = std::make_shared<RecordingSink>();
    GenerationRequest re = make_request(5, 0, 2, e);
    re.prompt = longer;
    s.submit(std::move(re));
    run_until_idle(s);
    CHECK(e->lane == 1);
    CHECK(e->cached == follow.size() + c->tokens.size());
}
