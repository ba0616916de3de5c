// ninfer tests - the engine side of a thinking budget: ids a sink returns from forced_tokens()
// replace the next samples, go through on_token like sampled ones and count as completion
// tokens; the sampled ids they replace are dropped.
#include "core/engine/scheduler.h"
#include "core/engine/script_backend.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;

namespace {

struct BudgetSink final : GenerationSink {
    size_t force_after;            // force once this many tokens were seen
    std::vector<int32_t> close;    // what to force
    std::vector<int32_t> seen;
    bool forced = false;
    GenerationSummary summary;
    BudgetSink(size_t after, std::vector<int32_t> ids) : force_after(after), close(std::move(ids)) {}
    TokenVerdict on_token(const DecodeResult& r) override {
        seen.push_back(r.token);
        return TokenVerdict::Continue;
    }
    std::vector<int32_t> forced_tokens() override {
        if (forced || seen.size() < force_after) return {};
        forced = true;
        return close;
    }
    void on_finished(const GenerationSummary& s) override { summary = s; }
    void on_rejected(RejectReason, const std::string&) override { FAIL("rejected"); }
};

std::vector<int32_t> run(std::shared_ptr<BudgetSink> sink, uint32_t max_tokens) {
    ScriptBackend backend({{10, 11, 12, 13, 14, 15, 16, 17, 99}}, 1, 200, 64);
    EngineStats stats;
    SchedulerOptions options;
    options.max_context = 64;
    Scheduler scheduler(backend, options, stats);
    GenerationRequest r;
    r.id = 1;
    r.prompt = {1, 2, 3};
    r.max_tokens = max_tokens;
    r.stop_token_ids = {99};
    r.sink = sink;
    scheduler.submit(std::move(r));
    for (int i = 0; i < 100 && scheduler.has_requests(); ++i) scheduler.step();
    return sink->seen;
}

} // namespace

TEST_CASE("forced ids replace the next samples and count as completion tokens", "[anthropic_budget]") {
    auto sink = std::make_shared<BudgetSink>(2, std::vector<int32_t>{50, 51, 52});
    std::vector<int32_t> seen = run(sink, 20);
    // 10, 11 sampled; 50..52 forced in place of 12..14; sampling resumes with 15.
    CHECK(seen == std::vector<int32_t>{10, 11, 50, 51, 52, 15, 16, 17, 99});
    CHECK(sink->summary.completion_tokens == seen.size());
    CHECK(sink->summary.reason == FinishReason::Stop);
}

TEST_CASE("max_tokens still bounds a generation with forced ids", "[anthropic_budget]") {
    auto sink = std::make_shared<BudgetSink>(1, std::vector<int32_t>{50, 51, 52});
    std::vector<int32_t> seen = run(sink, 3);
    CHECK(seen == std::vector<int32_t>{10, 50, 51});
    CHECK(sink->summary.reason == FinishReason::Length);
}

TEST_CASE("a sink that forces nothing leaves the samples alone", "[anthropic_budget]") {
    auto sink = std::make_shared<BudgetSink>(1000, std::vector<int32_t>{50});
    CHECK(run(sink, 20) == std::vector<int32_t>{10, 11, 12, 13, 14, 15, 16, 17, 99});
}
