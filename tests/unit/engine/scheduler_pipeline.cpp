// ninfer tests - the pipelined decode order (step k+1 begun before step k is reported) equals the
// unpipelined one: tokens, usage, finish reasons, lane images and prefix-cache checkpoints, after
// stop tokens, Stop verdicts, max_tokens, first-token finishes, forced ids and cancels.
#include "core/engine/prefix_cache.h"
#include "core/engine/scheduler.h"
#include "fake_backend.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::FakeBackend;
using ninfer::test::ForcingSink;
using ninfer::test::RecordingSink;

namespace {

struct Plan {
    uint64_t id;
    size_t prompt_len;
    uint32_t max_tokens;
    int32_t salt;
};

std::vector<int32_t> prompt_of(const Plan& p) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < p.prompt_len; ++i) t.push_back(int32_t((i * 7 + p.id * 13 + size_t(p.salt)) % 997));
    return t;
}

struct Outcome {
    std::map<uint64_t, std::shared_ptr<RecordingSink>> sinks;
    std::vector<LaneImage> lanes;        // every lane at the end (empty lanes: no tokens)
    std::vector<std::vector<int32_t>> checkpoints; // the prefix cache's images, by their tokens
};

// A workload whose finishes come from every source; `probe` gives each request's free-running
// tokens so that stops can name a token that will really come.
Outcome run_workload(bool pipelined, const std::map<uint64_t, std::vector<int32_t>>& probe) {
    SnapshotStoreOptions so;
    so.host_budget_bytes = 64 << 20;
    so.lock_memory = false;
    PrefixCache cache(so);
    FakeBackend backend(3);
    EngineStats stats;
    SchedulerOptions o{.max_context = 4096, .prefill_chunk = 16, .prefix_cache = &cache};
    o.pipeline_decode = pipelined;
    Scheduler s(backend, o, stats);
    Outcome out;
    const std::vector<Plan> plans = {{1, 40, 12, 0}, {2, 25, 1, 3},  {3, 33, 9, 5},  {4, 70, 14, 7},
                                     {5, 18, 10, 9}, {6, 50, 11, 2}, {7, 20, 8, 4}};
    size_t next = 0;
    auto submit = [&](const Plan& p) {
        std::shared_ptr<RecordingSink> sink;
        if (p.id == 6) {
            auto f = std::make_shared<ForcingSink>();
            f->trigger = probe.at(6)[3];
            f->ids = {11, 12, 13};
            sink = f;
        } else {
            sink = std::make_shared<RecordingSink>();
        }
        if (p.id == 5) sink->stop_after_token = probe.at(5)[4]; // a stop string: the Stop verdict
        GenerationRequest r;
        r.id = p.id;
        r.prompt = prompt_of(p);
        r.max_tokens = p.max_tokens;
        if (p.id == 3) r.stop_token_ids = {probe.at(3)[5]};
        r.sink = sink;
        out.sinks[p.id] = sink;
        s.submit(std::move(r));
    };
    // Two at once, then one more whenever a request has produced three tokens; request 4 is
    // cancelled once it has six.
    submit(plans[next++]);
    submit(plans[next++]);
    for (int guard = 0; guard < 100000 && (s.has_work() || next < plans.size()); ++guard) {
        s.step();
        if (next < plans.size() &&
            std::any_of(out.sinks.begin(), out.sinks.end(), [&](const auto& e) { return e.second->tokens.size() == 3; }))
            submit(plans[next++]);
        if (out.sinks.count(4) && out.sinks[4]->tokens.size() >= 6 && !out.sinks[4]->finished) s.cancel(4);
    }
    REQUIRE_FALSE(s.has_work());
    for (int lane = 0; lane < backend.n_lanes(); ++lane) out.lanes.push_back(backend.save_lane(lane));
    for (const auto& [id, sink] : out.sinks) {
        std::vector<int32_t> longer = prompt_of(plans[size_t(id - 1)]);
        longer.insert(longer.end(), sink->tokens.begin(), sink->tokens.end());
        longer.push_back(999);
        const LaneImage* hit = cache.match(longer, Scheduler::Clock::now());
        out.checkpoints.push_back(hit ? hit->tokens : std::vector<int32_t>{});
    }
    return out;
}

} // namespace

TEST_CASE("pipelined decode equals the unpipelined order in everything a user or admin sees",
          "[scheduler_pipeline]") {
    // Free-running tokens of each request (no stops), to choose stops that really occur.
    std::map<uint64_t, std::vector<int32_t>> probe;
    for (uint64_t id : {3, 5, 6}) {
        FakeBackend backend(1);
        EngineStats stats;
        Scheduler s(backend, {.max_context = 4096, .prefill_chunk = 16}, stats);
        auto sink = std::make_shared<RecordingSink>();
        const std::map<uint64_t, Plan> plans = {{3, {3, 33, 9, 5}}, {5, {5, 18, 10, 9}}, {6, {6, 50, 11, 2}}};
        GenerationRequest r;
        r.id = id;
        r.prompt = prompt_of(plans.at(id));
        r.max_tokens = 12;
        r.sink = sink;
        s.submit(std::move(r));
        for (int g = 0; g < 1000 && s.has_requests(); ++g) s.step();
        REQUIRE(sink->tokens.size() == 12);
        probe[id] = sink->tokens;
    }
    const Outcome plain = run_workload(false, probe);
    const Outcome piped = run_workload(true, probe);
    REQUIRE(plain.sinks.size() == 7);
    for (const auto& [id, a] : plain.sinks) {
        INFO("request " << id);
        const auto& b = piped.sinks.at(id);
        CHECK(a->finished);
        CHECK(b->finished);
        CHECK(a->tokens == b->tokens);
        CHECK(a->summary.reason == b->summary.reason);
        CHECK(a->summary.completion_tokens == b->summary.completion_tokens);
        CHECK(a->summary.cached_tokens == b->summary.cached_tokens);
        CHECK(a->lane == b->lane);
    }
    // The workload reached every kind of finish it was built for.
    CHECK(plain.sinks.at(2)->tokens.size() == 1);                              // max_tokens 1
    CHECK(plain.sinks.at(3)->summary.reason == FinishReason::Stop);           // a stop token
    CHECK(plain.sinks.at(3)->tokens.size() == 6);
    CHECK(plain.sinks.at(5)->summary.reason == FinishReason::Stop);           // a Stop verdict
    CHECK(plain.sinks.at(4)->summary.reason == FinishReason::Cancelled);      // a cancel
    const auto& forced = plain.sinks.at(6)->tokens;                            // forced ids
    REQUIRE(forced.size() >= 7);
    CHECK(std::vector<int32_t>(forced.begin() + 4, forced.begin() + 7) == std::vector<int32_t>{11, 12, 13});
    for (size_t lane = 0; lane < plain.lanes.size(); ++lane) {
        INFO("lane " << lane);
        CHECK(plain.lanes[lane].tokens == piped.lanes[lane].tokens);
    }
    CHECK(plain.checkpoints == piped.checkpoints);
    // Replies' checkpoints hold the whole reply: the last sample is fed before the lane is free.
    size_t with_reply = 0;
    for (const auto& c : plain.checkpoints) with_reply += c.empty() ? 0 : 1;
    CHECK(with_reply >= 4);
}
