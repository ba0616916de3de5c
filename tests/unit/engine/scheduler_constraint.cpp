// ninfer tests - constrained lanes in the scheduler on the CPU backend (a tiny random model, whose
// free output is noise): every token a constrained lane reports is one its grammar allowed, in a
// batch with free lanes that the masks do not touch (greedy and sampled outputs equal the lanes
// run alone), pipelined or not; end tokens only when the grammar accepts; free reasoning up to
// </think> and the grammar after it; a finished grammar ends with Stop; a grammar that allows
// nothing, or refuses a forced id, ends only its request (ConstraintFailed); speculating
// constrained lanes give the same output (constrained_speculation.cpp tests them in depth).
#include "core/backend/token_constraint.h"
#include "core/engine/scheduler.h"
#include "fake_backend.h"
#include "forwarding_backend.h"
#include "set_grammar.h"
#include "constrained_fixture.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::ForcingSink;
using ninfer::test::RecordingSink;
using ninfer::test::kDigits;
using ninfer::test::kEnd;
using ninfer::test::kSeparator;
using ninfer::test::kThinkEnd;
using ninfer::test::SetGrammar;

namespace {


struct Job {
    uint64_t id;
    bool constrained;
    float temperature;
    std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();
    std::function<void(GenerationRequest&)> edit = {};
};

// "[" digit{5} "]" over ids: '[' = 1, digits 10..19, ']' = 2; accepting (and finished) at the ']'.
std::unique_ptr<TokenConstraint> bracket_digits() {
    std::vector<std::vector<int32_t>> sets = {{1}};
    for (int i = 0; i < 5; ++i) sets.push_back(kDigits);
    sets.push_back({2});
    return std::make_unique<SetGrammar>(sets, sets.size());
}

GenerationRequest request_of(Job& j, uint32_t max_tokens = 24) {
    GenerationRequest r;
    r.id = j.id;
    r.prompt = test::random_tokens(9 + j.id * 3, 211, 40 + j.id);
    r.max_tokens = max_tokens;
    r.sampling.temperature = j.temperature;
    r.sampling.seed = 77 + j.id;
    r.stop_token_ids = {kEnd};
    if (j.constrained) {
        ConstraintSpec c;
        c.grammar = bracket_digits();
        c.end_tokens = {kEnd};
        r.constraint = std::move(c);
    }
    r.sink = j.sink;
    if (j.edit) j.edit(r);
    return r;
}

// How a run's decode steps overlapped: the most steps begun and not yet ended at once, and the
// calls of the deferred-sampling pair.
struct Overlap {
    int max_outstanding = 0, n_forward_only = 0, n_sampled_later = 0;
};

// Forwards to the CPU backend and records its decode steps' overlap.
class OverlapRecorder final : public test::ForwardingBackend {
  public:
    OverlapRecorder(Backend& inner, Overlap& seen) : ForwardingBackend(inner), seen_(seen) {}
    void decode_begin(std::span<const DecodeStep> steps) override {
        b_.decode_begin(steps);
        seen_.max_outstanding = std::max(seen_.max_outstanding, ++outstanding_);
    }
    void decode_begin_forward(std::span<const DecodeStep> steps) override {
        b_.decode_begin_forward(steps);
        seen_.max_outstanding = std::max(seen_.max_outstanding, ++outstanding_);
        ++seen_.n_forward_only;
    }
    void decode_sample(std::span<const DecodeStep> steps) override {
        b_.decode_sample(steps);
        ++seen_.n_sampled_later;
    }
    std::vector<DecodeResult> decode_end() override {
        --outstanding_;
        return b_.decode_end();
    }

  private:
    Overlap& seen_;
    int outstanding_ = 0;
};

void run(std::vector<Job>& jobs, int lanes, bool pipelined, SpeculativeConfig speculative = {},
         uint32_t max_tokens = 24, Overlap* overlap = nullptr) {
    auto cpu = make_cpu_backend(test::constrained_model().weights, test::tiny_speculative_plan(test::constrained_model().config, lanes, 4, false));
    std::optional<OverlapRecorder> recorder;
    Backend* backend = cpu.get();
    if (overlap) backend = &recorder.emplace(*cpu, *overlap);
    EngineStats stats;
    SchedulerOptions o{.max_context = 512, .prefill_chunk = 16};
    o.pipeline_decode = pipelined;
    o.speculative = speculative;
    Scheduler s(*backend, o, stats);
    for (Job& j : jobs) s.submit(request_of(j, max_tokens));
    for (int guard = 0; guard < 10000 && s.has_requests(); ++guard) s.step();
    REQUIRE_FALSE(s.has_requests());
}

bool follows_bracket_digits(const std::vector<int32_t>& t) {
    if (t.size() != 7 || t[0] != 1 || t[6] != 2) return false;
    return std::all_of(t.begin() + 1, t.end() - 1,
                       [](int32_t x) { return std::find(kDigits.begin(), kDigits.end(), x) != kDigits.end(); });
}

} // namespace

TEST_CASE("constrained and free lanes in one batch: masks apply to their own lanes only", "[scheduler_constraint]") {
    auto make = [] {
        return std::vector<Job>{{1, false, 0.f}, {2, true, 1.f}, {3, false, 0.8f}, {4, true, 0.f}, {5, true, 1.5f}};
    };
    std::vector<Job> piped = make(), plain = make();
    run(piped, 4, true);
    run(plain, 4, false);
    for (size_t i = 0; i < piped.size(); ++i) {
        std::vector<Job> alone = {make()[i]};
        run(alone, 1, true);
        INFO("request " << piped[i].id);
        const auto& got = piped[i].sink->tokens;
        CHECK(got == alone[0].sink->tokens);
        CHECK(got == plain[i].sink->tokens);
        CHECK(piped[i].sink->summary.reason == plain[i].sink->summary.reason);
        if (piped[i].constrained) {
            CHECK(follows_bracket_digits(got));
            CHECK(got.back() == 2); // the grammar finished: Stop at its last token
            CHECK(piped[i].sink->summary.reason == FinishReason::Stop);
        } else {
            CHECK_FALSE(follows_bracket_digits(got)); // noise: the model alone does not write it
        }
    }
}

TEST_CASE("constrained rounds stay pipelined: the next forward pass runs while masks are filled",
          "[scheduler_constraint]") {
    auto make = [] { return std::vector<Job>{{21, true, 0.f}, {22, true, 0.9f}, {23, true, 1.3f}}; };
    std::vector<Job> piped = make(), plain = make();
    Overlap piped_calls;
    run(piped, 3, true, {}, 24, &piped_calls);
    run(plain, 3, false);
    // A constrained lane's step begins before the step holding its previous sample has ended.
    CHECK(piped_calls.max_outstanding == 2);
    CHECK(piped_calls.n_forward_only > 0);
    CHECK(piped_calls.n_sampled_later == piped_calls.n_forward_only);
    for (size_t i = 0; i < piped.size(); ++i) {
        INFO("request " << piped[i].id);
        CHECK(piped[i].sink->tokens == plain[i].sink->tokens);
        CHECK(piped[i].sink->summary.reason == plain[i].sink->summary.reason);
        if (piped[i].constrained) CHECK(follows_bracket_digits(piped[i].sink->tokens));
    }
}

TEST_CASE("deferred sampling: the backend's default keeps the order and samples masked rows again",
          "[scheduler_constraint]") {
    auto b = make_cpu_backend(test::constrained_model().weights, test::tiny_speculative_plan(test::constrained_model().config, 2, 4, false));
    const std::vector<int32_t> prompt = test::random_tokens(12, 211, 3);
    std::vector<float> logits;
    b->prefill(0, prompt, LogitsOut::Last, &logits);
    const int32_t first = b->sample_after_prefill(0, {}, {}, 0).token;
    std::vector<DecodeStep> st(1);
    st[0].lane = 0;
    st[0].token = first;
    b->decode_begin_forward(st);
    CHECK_THROWS_WITH(b->decode_end(), Catch::Contains("before decode_sample"));
    CHECK_THROWS_WITH(b->decode_begin(st), Catch::Contains("before decode_sample"));
    std::vector<DecodeStep> other = st;
    other[0].lane = 1;
    CHECK_THROWS_WITH(b->decode_sample(other), Catch::Contains("not the lanes of the step begun"));
    // The mask allows one id that greedy decoding would not pick: the sample is that id.
    const std::vector<float> raw = b->last_logits(0);
    const int32_t argmax = int32_t(std::max_element(raw.begin(), raw.end()) - raw.begin());
    const int32_t only = argmax == 5 ? 6 : 5;
    std::vector<uint32_t> mask(token_mask_words(b->vocab_size()), 0u);
    token_mask_set(mask, only, true);
    st[0].sampling.allowed_tokens = mask;
    b->decode_sample(st);
    CHECK_THROWS_WITH(b->decode_sample(st), Catch::Contains("no step begun by decode_begin_forward"));
    const std::vector<DecodeResult> r = b->decode_end();
    REQUIRE(r.size() == 1);
    CHECK(r[0].token == only);
    CHECK(b->lane_length(0) == prompt.size() + 1); // the step's token was fed at decode_begin_forward
}

TEST_CASE("end tokens come exactly when the grammar accepts", "[scheduler_constraint]") {
    // The model is pushed hard towards the end token; the grammar holds it back for 4 tokens.
    std::vector<Job> jobs = {{7, true, 1.f, std::make_shared<RecordingSink>(), [](GenerationRequest& r) {
                                  r.sampling.logit_bias = {{kEnd, 100.f}};
                                  r.constraint->grammar = std::make_unique<SetGrammar>(
                                      std::vector<std::vector<int32_t>>{kDigits}, 4, true);
                              }}};
    run(jobs, 2, true);
    const auto& t = jobs[0].sink->tokens;
    REQUIRE(t.size() == 5);
    for (size_t i = 0; i < 4; ++i) CHECK(std::find(kDigits.begin(), kDigits.end(), t[i]) != kDigits.end());
    CHECK(t[4] == kEnd);
    CHECK(jobs[0].sink->summary.reason == FinishReason::Stop);
}

TEST_CASE("thinking: free reasoning without end tokens, the grammar after </think>", "[scheduler_constraint]") {
    auto thinking = [](GenerationRequest& r) {
        r.constraint->after_reasoning = true;
        r.constraint->think_end_token = kThinkEnd;
        r.constraint->separator_tokens = {kSeparator};
    };
    // The reasoning cannot end the reply even when the model wants nothing else: it runs to the length.
    std::vector<Job> stuck = {{8, true, 1.f, std::make_shared<RecordingSink>(), [&](GenerationRequest& r) {
                                   thinking(r);
                                   r.sampling.logit_bias = {{kEnd, 100.f}, {kThinkEnd, -100.f}};
                               }}};
    run(stuck, 1, true);
    CHECK(stuck[0].sink->tokens.size() == 24);
    CHECK(std::count(stuck[0].sink->tokens.begin(), stuck[0].sink->tokens.end(), kEnd) == 0);
    CHECK(stuck[0].sink->summary.reason == FinishReason::Length);
    // Free tokens first (the same as without a grammar), then </think> + separator forced as a
    // thinking budget does, then the grammar.
    std::vector<Job> probe = {{9, false, 0.7f}};
    run(probe, 1, true);
    auto forcing = std::make_shared<ForcingSink>();
    forcing->trigger = probe[0].sink->tokens[2];
    forcing->ids = {kThinkEnd, kSeparator};
    std::vector<Job> jobs = {{9, true, 0.7f, forcing, thinking}};
    run(jobs, 1, true);
    const auto& t = forcing->tokens;
    REQUIRE(t.size() > 5);
    CHECK(std::equal(t.begin(), t.begin() + 3, probe[0].sink->tokens.begin()));
    CHECK(t[3] == kThinkEnd);
    CHECK(t[4] == kSeparator);
    CHECK(follows_bracket_digits({t.begin() + 5, t.end()}));
    CHECK(forcing->summary.reason == FinishReason::Stop);
}

TEST_CASE("a grammar that allows nothing, or refuses a forced id, ends only its request", "[scheduler_constraint]") {
    auto dead_end = [](GenerationRequest& r) {
        r.constraint->grammar = std::make_unique<SetGrammar>(std::vector<std::vector<int32_t>>{{5}, {}}, 9);
    };
    auto refusing = std::make_shared<ForcingSink>();
    refusing->trigger = 1; // the grammar's first token, then an id it does not allow
    refusing->ids = {3};
    std::vector<Job> jobs = {{10, true, 0.f, std::make_shared<RecordingSink>(), dead_end},
                             {11, false, 0.f},
                             {12, true, 0.f, refusing},
                             {13, true, 0.f}};
    run(jobs, 2, true); // 13 runs on a lane that 10 or 12 left
    CHECK(jobs[0].sink->tokens == std::vector<int32_t>{5});
    CHECK(jobs[0].sink->summary.reason == FinishReason::ConstraintFailed);
    CHECK(refusing->tokens == std::vector<int32_t>{1});
    CHECK(refusing->summary.reason == FinishReason::ConstraintFailed);
    CHECK(jobs[1].sink->finished); // the free lane beside them is untouched
    CHECK(follows_bracket_digits(jobs[3].sink->tokens));
    CHECK(jobs[3].sink->summary.reason == FinishReason::Stop);
}

TEST_CASE("constrained lanes speculate too; their output is the same", "[scheduler_constraint]") {
    // The prompt holds a bracket run, for prompt lookup to draft from once the reply starts one.
    auto with_run = [](GenerationRequest& r) { r.prompt.insert(r.prompt.end(), {1, 12, 12, 12, 12, 12, 2, 1}); };
    auto make = [&] { return std::vector<Job>{{14, true, 0.f, std::make_shared<RecordingSink>(), with_run}, {15, false, 0.f}}; };
    std::vector<Job> spec = make(), none = make();
    run(spec, 2, true, SpeculativeConfig{SpeculativeKind::Ngram, 3}, 40);
    run(none, 2, true, {}, 40);
    CHECK(spec[0].sink->summary.draft_n > 0); // verified drafts: the grammar kept them
    CHECK(spec[0].sink->tokens == none[0].sink->tokens);
    CHECK(spec[1].sink->tokens == none[1].sink->tokens);
    CHECK(follows_bracket_digits(spec[0].sink->tokens));
}
