// ninfer tests - layer-sliced prefill in the scheduler (--prefill-slice-layers, issue 27): while
// lanes decode, a chunk runs a few layers per round with the decode step between its slices; the
// tokens and finishes equal the unsliced run's; an idle engine runs chunks whole;
// cancelling the prefilling request, failing the engine or saving its slot mid-chunk is safe.
#include "core/engine/scheduler.h"
#include "fake_backend.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::FakeBackend;
using ninfer::test::RecordingSink;

namespace {

constexpr int kLayers = 8; // the fake model's layers

GenerationRequest make_request(uint64_t id, size_t prompt_len, uint32_t max_tokens, std::shared_ptr<RecordingSink> sink) {
    GenerationRequest r;
    r.id = id;
    for (size_t i = 0; i < prompt_len; ++i) r.prompt.push_back(int32_t((i * 11 + id * 17) % 991));
    r.max_tokens = max_tokens;
    r.sink = std::move(sink);
    return r;
}

void run_until_idle(Scheduler& s) {
    for (int guard = 0; s.has_requests() && guard < 100000; ++guard) s.step();
}

SchedulerOptions options(uint32_t slice_layers, bool pipelined = true) {
    SchedulerOptions o{.max_context = 4096, .prefill_chunk = 32, .prefill_slice_layers = slice_layers};
    o.pipeline_decode = pipelined;
    return o;
}

struct Outcome {
    std::map<uint64_t, std::shared_ptr<RecordingSink>> sinks;
    std::vector<FakeBackend::Call> calls;
    uint64_t slices = 0;
};

// Three decoders and three long prompts arriving while they decode, one cancelled mid-prompt.
Outcome run_workload(uint32_t slice_layers, bool pipelined) {
    FakeBackend backend(3);
    backend.layers = kLayers;
    EngineStats stats;
    Scheduler s(backend, options(slice_layers, pipelined), stats);
    Outcome out;
    auto submit = [&](uint64_t id, size_t prompt, uint32_t max_tokens) {
        out.sinks[id] = std::make_shared<RecordingSink>();
        s.submit(make_request(id, prompt, max_tokens, out.sinks[id]));
    };
    submit(1, 12, 60);
    submit(2, 20, 9);
    for (int i = 0; i < 3; ++i) s.step();
    submit(3, 150, 20);
    submit(4, 90, 6);
    submit(5, 70, 5);
    bool cancelled = false;
    for (int guard = 0; s.has_requests() && guard < 100000; ++guard) {
        s.step();
        // Request 4 is cancelled once 40 of its prompt tokens are in (mid-prompt, in either run).
        if (!cancelled && out.sinks[4]->admitted && backend.lane_length(out.sinks[4]->lane) >= 40) {
            s.cancel(4);
            cancelled = true;
        }
    }
    CHECK(cancelled);
    out.calls = backend.calls;
    out.slices = stats.n_prefill_slices_total;
    return out;
}

} // namespace

TEST_CASE("a sliced chunk runs a few layers per round, with the decode step between its slices", "[scheduler_sliced]") {
    FakeBackend backend(2);
    backend.layers = kLayers;
    EngineStats stats;
    Scheduler s(backend, options(3), stats);
    auto decoder = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 10, 200, decoder));
    for (int i = 0; i < 3; ++i) s.step(); // request 1 decodes now
    REQUIRE(decoder->tokens.size() >= 1);
    backend.calls.clear();
    auto prompt = std::make_shared<RecordingSink>();
    s.submit(make_request(2, 70, 4, prompt)); // chunks of 32, 32, 6 tokens; slices of 3, 3, 2 layers
    std::vector<std::pair<std::string, size_t>> order;
    for (int i = 0; i < 9; ++i) {
        const size_t before = backend.calls.size();
        s.step();
        for (size_t k = before; k < backend.calls.size(); ++k) order.push_back({backend.calls[k].kind, backend.calls[k].n});
    }
    const std::vector<std::pair<std::string, size_t>> chunk = {{"prefill_begin", 0}, {"slice", 3}, {"decode", 1},
                                                               {"slice", 3}, {"decode", 1},        {"slice", 2},
                                                               {"prefill", 0}, {"decode", 1}};
    std::vector<std::pair<std::string, size_t>> want;
    for (size_t tokens : {32, 32, 6})
        for (auto c : chunk) {
            if (c.first == "prefill_begin" || c.first == "prefill") c.second = tokens;
            want.push_back(c);
        }
    want.back() = {"decode", 2}; // after the last chunk the prompt's lane decodes too
    CHECK(order == want);
    CHECK(stats.n_prefill_slices_total == 9);
    CHECK(prompt->tokens.size() == 1); // its first token came with the last slice
    run_until_idle(s);
    CHECK(prompt->tokens.size() == 4);
    CHECK(decoder->tokens.size() == 200);
}

TEST_CASE("sliced and whole prefills give the same tokens and finishes", "[scheduler_sliced]") {
    for (bool pipelined : {true, false}) {
        INFO("pipelined " << pipelined);
        const Outcome whole = run_workload(0, pipelined);
        CHECK(whole.slices == 0);
        for (uint32_t layers : {1u, 3u, 8u, 20u}) {
            INFO("slice layers " << layers);
            const Outcome sliced = run_workload(layers, pipelined);
            CHECK(sliced.slices > 0);
            for (const auto& [id, sink] : whole.sinks) {
                INFO("request " << id);
                const RecordingSink& got = *sliced.sinks.at(id);
                CHECK(got.tokens == sink->tokens);
                CHECK(got.summary.reason == sink->summary.reason);
                CHECK(got.summary.completion_tokens == sink->summary.completion_tokens);
                CHECK(got.summary.prompt_tokens == sink->summary.prompt_tokens);
            }
            CHECK(sliced.sinks.at(4)->summary.reason == FinishReason::Cancelled);
            // Every chunk of the sliced run that decoders waited on had a decode step after each slice
            // but its last (and nothing else between its slices).
            for (size_t k = 0; k + 1 < sliced.calls.size(); ++k)
                if (sliced.calls[k].kind == "slice" && sliced.calls[k + 1].kind != "prefill")
                    CHECK(sliced.calls[k + 1].kind == "decode");
        }
    }
}

TEST_CASE("an idle engine prefills whole chunks; once the decoders finish, the rest of a chunk runs at once",
          "[scheduler_sliced]") {
    FakeBackend backend(2);
    backend.layers = kLayers;
    EngineStats stats;
    Scheduler s(backend, options(2), stats);
    auto alone = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 100, 3, alone));
    run_until_idle(s);
    CHECK(stats.n_prefill_slices_total == 0);
    for (const auto& c : backend.calls) CHECK(c.kind != "slice");
    CHECK(alone->tokens.size() == 3);

    // A decoder with one token left: it finishes after the chunk's first slice; the second round
    // runs the chunk's other 6 layers in one slice.
    auto short_one = std::make_shared<RecordingSink>();
    s.submit(make_request(2, 10, 3, short_one));
    s.step();
    s.step();
    REQUIRE(short_one->tokens.size() == 2);
    backend.calls.clear();
    auto prompt = std::make_shared<RecordingSink>();
    s.submit(make_request(3, 20, 2, prompt));
    s.step(); // a slice of 2 layers, the decoder's last step
    REQUIRE(short_one->finished);
    s.step(); // nobody decodes: the rest at once
    std::vector<size_t> slices;
    for (const auto& c : backend.calls)
        if (c.kind == "slice") slices.push_back(c.n);
    CHECK(slices == std::vector<size_t>{2, 6});
    run_until_idle(s);
    CHECK(prompt->tokens.size() == 2);
}

TEST_CASE("cancelling the prefilling request or failing the engine mid-chunk is safe; its slot is busy meanwhile",
          "[scheduler_sliced]") {
    FakeBackend backend(2);
    backend.layers = kLayers;
    EngineStats stats;
    Scheduler s(backend, options(2), stats);
    auto decoder = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 10, 50, decoder));
    for (int i = 0; i < 3; ++i) s.step();
    auto prompt = std::make_shared<RecordingSink>();
    s.submit(make_request(2, 80, 5, prompt));
    s.step(); // its first chunk's first slice
    REQUIRE(backend.prefill_pending());
    REQUIRE(prompt->lane == 1);
    s.step(); // the second slice
    s.cancel(2);
    CHECK(prompt->summary.reason == FinishReason::Cancelled);
    CHECK_FALSE(backend.prefill_pending());
    CHECK(backend.lane_length(1) == 0);
    // The lane serves the next request; the decoder never noticed.
    auto next = std::make_shared<RecordingSink>();
    s.submit(make_request(3, 40, 4, next));
    run_until_idle(s);
    CHECK(next->tokens.size() == 4);
    CHECK(decoder->tokens.size() == 50);

    // A second prompt fails with the engine mid-chunk: no backend call follows.
    auto decoder2 = std::make_shared<RecordingSink>(), prompt2 = std::make_shared<RecordingSink>();
    s.submit(make_request(4, 10, 50, decoder2));
    for (int i = 0; i < 3; ++i) s.step();
    s.submit(make_request(5, 80, 5, prompt2));
    s.step();
    REQUIRE(backend.prefill_pending());
    const size_t calls = backend.calls.size();
    s.fail_all("test");
    CHECK(prompt2->summary.reason == FinishReason::Failed);
    CHECK(decoder2->summary.reason == FinishReason::Failed);
    CHECK(backend.calls.size() == calls);
}

TEST_CASE("slot_save of a lane whose chunk is half-way through its layers is refused as busy", "[scheduler_sliced]") {
    FakeBackend backend(2);
    backend.layers = kLayers;
    EngineStats stats;
    Scheduler s(backend, options(2), stats);
    auto first = std::make_shared<RecordingSink>(), decoder = std::make_shared<RecordingSink>();
    s.submit(make_request(1, 30, 2, first));    // lane 0: leaves its sequence there
    s.submit(make_request(2, 10, 50, decoder)); // lane 1
    for (int i = 0; i < 6; ++i) s.step();
    REQUIRE(first->finished);
    REQUIRE(decoder->lane == 1);
    auto prompt = std::make_shared<RecordingSink>();
    GenerationRequest r = make_request(1, 30, 2, prompt); // extends lane 0's history: it goes there
    r.prompt.insert(r.prompt.end(), first->tokens.begin(), first->tokens.end());
    for (int i = 0; i < 40; ++i) r.prompt.push_back(i);
    s.submit(std::move(r));
    s.step();
    REQUIRE(prompt->lane == 0);
    REQUIRE(backend.prefill_pending());
    try {
        (void)s.slot_save(0);
        FAIL("slot_save of a lane mid-chunk succeeded");
    } catch (const Error& e) {
        CHECK(e.kind() == Errc::Busy);
    }
    CHECK_NOTHROW(s.slot_save(1)); // the decoder's lane saves as usual
    run_until_idle(s);
    CHECK(s.slot_save(0).tokens.size() == backend.lane_length(0));
}
