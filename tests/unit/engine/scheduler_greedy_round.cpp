// ninfer tests - the scheduler's greedy rounds (Backend::verify_accept_greedy) on the CPU backend:
// when every lane of a round is on the greedy fast path the round is that one call, the MTP lanes'
// next drafts come back with it and are used only while the lane is as the round left it (checked
// against a fresh draft of the lane in every round), greedy output equals plain decoding over many
// prompts, K and batches, with an oracle drafter (everything accepted), an always-wrong one, stops
// inside the window (the lane rolled back further: its continuation equals plain decoding), forced
// ids, the gate's plain steps, K changing with the batch, and rounds mixed with lanes that read rows.
#include "core/engine/scheduler.h"
#include "fake_backend.h"
#include "forwarding_backend.h"
#include "truth_drafter.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <set>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::ForcingSink;
using ninfer::test::RecordingSink;

namespace {

constexpr uint32_t kContext = 192;

// Counts the scheduler's rounds and drafts; with a drafter, drafts with it (the round's default
// calls come back here), else forwards the round to the CPU backend and checks each window's drafts
// against a fresh draft of the lane (a stale carried draft would differ).
class RoundSpy final : public test::ForwardingBackend {
  public:
    using Drafter = std::function<std::vector<int32_t>(std::span<const int32_t>, int)>;
    RoundSpy(Backend& inner, Drafter drafter) : ForwardingBackend(inner), drafter_(std::move(drafter)) {}
    uint32_t rows_per_pass = 0;
    bool one_call = true; // greedy_rounds_in_one_call: false takes the separate calls (NINFER_CUDA_FUSED_ROUNDS=0)
    bool drop_drafts = false; // a round gives no next drafts (the CUDA backend near max-context)
    size_t greedy_rounds = 0, row_rounds = 0, draft_calls = 0, lanes_drafted = 0, lane_rounds = 0, shrinks = 0;
    size_t fresh_checked = 0;
    uint32_t verify_rows_per_pass() const override { return rows_per_pass; }
    bool greedy_rounds_in_one_call() const override { return one_call; }
    std::vector<std::vector<int32_t>> draft_mtp(std::span<const DraftRequest> requests,
                                                std::vector<std::vector<float>>* logits) override {
        if (in_round_) return draft_with(requests, logits);
        ++draft_calls;
        lanes_drafted += requests.size();
        return draft_with(requests, logits);
    }
    void verify_greedy(std::span<const VerifyStep> steps, std::span<const uint8_t> want_rows, std::vector<float>& logits,
                       std::vector<int32_t>& ids) override {
        if (!in_round_) ++row_rounds, lane_rounds += steps.size();
        b_.verify_greedy(steps, want_rows, logits, ids);
    }
    void verify_accept_greedy(std::span<const GreedyRoundStep> steps, GreedyRoundResult& result) override {
        ++greedy_rounds;
        lane_rounds += steps.size();
        if (!drafter_)
            for (const GreedyRoundStep& st : steps) check_fresh(st);
        in_round_ = true;
        if (drafter_)
            Backend::verify_accept_greedy(steps, result); // its calls come back to this wrapper
        else
            b_.verify_accept_greedy(steps, result);
        in_round_ = false;
        for (size_t i = 0; i < steps.size(); ++i) kept_[steps[i].lane] = result.n_keep[i];
        if (drop_drafts)
            for (std::vector<int32_t>& d : result.drafts) d.clear();
    }
    void accept_verified(int lane, uint32_t n_keep) override {
        if (!in_round_ && kept_.count(lane) && n_keep < kept_[lane]) ++shrinks;
        kept_.erase(lane);
        b_.accept_verified(lane, n_keep);
    }

  private:
    std::vector<std::vector<int32_t>> draft_with(std::span<const DraftRequest> requests,
                                                 std::vector<std::vector<float>>* logits) {
        if (!drafter_) return b_.draft_mtp(requests, logits);
        std::vector<std::vector<int32_t>> out;
        for (const DraftRequest& r : requests) {
            std::vector<int32_t> seq = b_.save_lane(r.lane).tokens;
            seq.push_back(r.next_token);
            out.push_back(drafter_(seq, r.k));
        }
        return out;
    }
    // The MTP head's drafts for this window, made now, are the window's drafts.
    void check_fresh(const GreedyRoundStep& st) {
        if (st.tokens.size() < 2) return;
        const int k = int(st.tokens.size()) - 1;
        const auto fresh = b_.draft_mtp(std::vector<DraftRequest>{{st.lane, st.tokens[0], k}}, nullptr)[0];
        INFO("lane " << st.lane);
        CHECK(std::equal(st.tokens.begin() + 1, st.tokens.end(), fresh.begin(), fresh.end()));
        ++fresh_checked;
    }
    Drafter drafter_;
    bool in_round_ = false;
    std::map<int, uint32_t> kept_; // lanes of the last greedy round, until their accept
};

struct Job {
    uint64_t id;
    size_t prompt_len;
    uint32_t max_tokens;
};
// 2: a stop token, 3: a Stop verdict, 4: forced ids, 5: logprobs (its rounds read rows), 6: max_tokens 1.
const std::vector<Job> kJobs = {{1, 9, 28}, {2, 30, 26}, {3, 14, 28}, {4, 21, 28}, {5, 17, 20}, {6, 11, 1}, {7, 40, 24}};

struct Outcome {
    std::unique_ptr<Backend> cpu;
    std::unique_ptr<RoundSpy> spy;
    std::map<uint64_t, std::shared_ptr<RecordingSink>> sinks;
    std::map<uint64_t, std::vector<int32_t>> followups; // each sequence continued by a second request
    EngineStats stats;
};

struct Setup {
    int lanes = 4;
    SpeculativeConfig spec{};
    SpeculationPolicy policy{};
    uint32_t rows_per_pass = 0;
    RoundSpy::Drafter drafter{};
    bool one_call = true;
    bool drop_drafts = false;
};

// Runs the jobs; probe (the plain run's tokens) places the stops; then each finished sequence is
// continued on its lane (prefix reuse) by a request of 6 more tokens.
void run_jobs(const ModelWeights& w, const Setup& st, const std::map<uint64_t, std::vector<int32_t>>* probe,
              Outcome& out) {
    const ModelConfig& c = w.config;
    out.cpu = make_cpu_backend(w, test::tiny_speculative_plan(c, st.lanes, kMaxSpeculativeK, true, KvDtype::F32, kContext));
    out.spy = std::make_unique<RoundSpy>(*out.cpu, st.drafter);
    RoundSpy* spy = out.spy.get();
    spy->rows_per_pass = st.rows_per_pass;
    spy->one_call = st.one_call;
    spy->drop_drafts = st.drop_drafts;
    SchedulerOptions o{.max_context = kContext, .prefill_chunk = 32};
    o.speculative = st.spec;
    o.speculation_policy = st.policy;
    Scheduler s(*spy, o, out.stats);
    std::map<uint64_t, std::vector<int32_t>> prompts;
    for (const Job& j : kJobs) {
        std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();
        if (probe && j.id == 4) {
            auto f = std::make_shared<ForcingSink>();
            f->trigger = probe->at(4)[3];
            f->ids = {11, 12, 13};
            sink = f;
        }
        GenerationRequest r;
        r.id = j.id;
        r.prompt = prompts[j.id] = test::random_tokens(j.prompt_len, c.vocab_size, 700 + j.id);
        r.max_tokens = j.max_tokens;
        r.logprobs = j.id == 5;
        if (probe && j.id == 2) r.stop_token_ids = {probe->at(2)[7]};
        if (probe && j.id == 3) sink->stop_after_token = probe->at(3)[5];
        r.sink = out.sinks[j.id] = sink;
        s.submit(std::move(r));
    }
    for (int guard = 0; guard < 100000 && s.has_work(); ++guard) s.step();
    REQUIRE_FALSE(s.has_requests());
    for (const Job& j : kJobs) { // one at a time: each takes the lane that holds its sequence
        GenerationRequest r;
        r.id = 100 + j.id;
        r.prompt = prompts[j.id];
        r.prompt.insert(r.prompt.end(), out.sinks[j.id]->tokens.begin(), out.sinks[j.id]->tokens.end());
        r.prompt.push_back(int32_t(j.id));
        r.max_tokens = 6;
        auto sink = std::make_shared<RecordingSink>();
        r.sink = sink;
        s.submit(std::move(r));
        for (int guard = 0; guard < 100000 && s.has_work(); ++guard) s.step();
        REQUIRE(sink->finished);
        out.followups[j.id] = sink->tokens;
    }
}

std::map<uint64_t, std::vector<int32_t>> probe_of(const ModelWeights& w) {
    Outcome o;
    run_jobs(w, {}, nullptr, o);
    std::map<uint64_t, std::vector<int32_t>> probe;
    for (const auto& [id, sink] : o.sinks) probe[id] = sink->tokens;
    return probe;
}

void check_same(const Outcome& plain, const Outcome& spec) {
    for (const auto& [id, a] : plain.sinks) {
        INFO("request " << id);
        const auto& b = spec.sinks.at(id);
        REQUIRE(b->finished);
        CHECK(a->tokens == b->tokens);
        CHECK(a->summary.reason == b->summary.reason);
        CHECK(plain.followups.at(id) == spec.followups.at(id));
    }
}

} // namespace

TEST_CASE("scheduler_greedy_round: greedy rounds equal plain decoding and carry only drafts that are still valid",
          "[scheduler_greedy_round]") {
    for (bool moe : {false, true}) {
        const ModelConfig c = test::tiny_config(moe);
        const auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
        const ModelWeights w = model->weights();
        const auto probe = probe_of(w);
        for (int lanes : {1, 4}) {
            Setup plain_setup;
            plain_setup.lanes = lanes;
            Outcome plain;
            run_jobs(w, plain_setup, &probe, plain);
            CHECK(plain.sinks.at(2)->summary.reason == FinishReason::Stop);
            CHECK(plain.sinks.at(3)->summary.reason == FinishReason::Stop);
            for (int k = 1; k <= kMaxSpeculativeK; ++k) {
                // 0: every lane speculates; 1: K follows the batch (8 rows a pass); 2: the gate
                // pauses lanes whose drafts fail (plain steps between their rounds).
                for (int variant = 0; variant < 3; ++variant) {
                    INFO("moe " << moe << " lanes " << lanes << " mtp:" << k << " variant " << variant);
                    Setup st;
                    st.lanes = lanes;
                    st.spec = {SpeculativeKind::Mtp, k};
                    if (variant == 1) st.rows_per_pass = 8, st.policy.fit_one_pass = true;
                    if (variant == 2) st.policy.min_acceptance = 0.5f;
                    Outcome spec;
                    run_jobs(w, st, &probe, spec);
                    const RoundSpy* spy = spec.spy.get();
                    check_same(plain, spec);
                    CHECK(spy->greedy_rounds > 0);
                    CHECK(spy->fresh_checked > 0);
                    // The rounds after a greedy round take its drafts: far fewer lanes drafted
                    // than rounds taken.
                    CHECK(spy->lanes_drafted < spy->lane_rounds);
                    CHECK(spy->row_rounds > 0); // request 5 reads logprobs: its rounds take rows
                }
            }
        }
    }
}

TEST_CASE("scheduler_greedy_round: an oracle accepts every draft, stops inside the window roll the lane back, "
          "an always-wrong drafter accepts nothing",
          "[scheduler_greedy_round]") {
    const ModelConfig c = test::tiny_config(true);
    const auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
    const ModelWeights w = model->weights();
    const auto probe = probe_of(w);
    Setup plain_setup;
    plain_setup.lanes = int(kJobs.size());
    Outcome plain;
    run_jobs(w, plain_setup, &probe, plain);
    std::vector<std::vector<int32_t>> truths;
    for (const Job& j : kJobs) {
        std::vector<int32_t> t = test::random_tokens(j.prompt_len, c.vocab_size, 700 + j.id);
        t.insert(t.end(), plain.sinks.at(j.id)->tokens.begin(), plain.sinks.at(j.id)->tokens.end());
        t.push_back(int32_t(j.id)); // the follow-up's prompt, then its reply
        t.insert(t.end(), plain.followups.at(j.id).begin(), plain.followups.at(j.id).end());
        truths.push_back(t);
    }
    size_t shrinks = 0;
    for (bool right : {true, false}) {
        for (int k : {2, 3, 4, 5}) {
            INFO((right ? "oracle" : "always wrong") << " mtp:" << k);
            Setup st;
            st.lanes = int(kJobs.size());
            st.spec = {SpeculativeKind::Mtp, k};
            st.drafter = [&truths, right, V = int32_t(c.vocab_size)](std::span<const int32_t> seq, int n) {
                return test::truth_draft(truths, right, V, seq, n);
            };
            Outcome spec;
            run_jobs(w, st, &probe, spec);
            const RoundSpy* spy = spec.spy.get();
            check_same(plain, spec);
            CHECK(spy->greedy_rounds > 0);
            if (right) {
                CHECK(spec.stats.n_spec_accepted_tokens_total > 0);
                shrinks += spy->shrinks;
                CHECK(spy->lanes_drafted < spy->lane_rounds);
            } else {
                CHECK(spec.stats.n_spec_accepted_tokens_total == 0);
            }
        }
    }
    CHECK(shrinks > 0); // stops inside accepted windows rolled lanes back further
}

TEST_CASE("scheduler_greedy_round: a backend without the one-call round takes the separate calls, same tokens",
          "[scheduler_greedy_round]") {
    // The CUDA backend with NINFER_CUDA_FUSED_ROUNDS=0 (CudaBackendOptions::fused_rounds off).
    const ModelConfig c = test::tiny_config(false);
    const auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
    const ModelWeights w = model->weights();
    const auto probe = probe_of(w);
    Setup plain_setup;
    plain_setup.lanes = 4;
    Outcome plain;
    run_jobs(w, plain_setup, &probe, plain);
    for (int k : {1, 3, 5}) {
        INFO("mtp:" << k);
        Setup st;
        st.lanes = 4;
        st.spec = {SpeculativeKind::Mtp, k};
        st.one_call = false;
        Outcome spec;
        run_jobs(w, st, &probe, spec);
        const RoundSpy* spy = spec.spy.get();
        check_same(plain, spec);
        CHECK(spy->greedy_rounds == 0);
        CHECK(spy->row_rounds > 0);
        CHECK(spy->draft_calls > 0);
        CHECK(spy->lanes_drafted == spy->lane_rounds); // no drafts carried between rounds
    }
}

TEST_CASE("scheduler_greedy_round: a round that gives no next drafts is followed by a fresh draft, same tokens",
          "[scheduler_greedy_round]") {
    // Backend::verify_accept_greedy may give fewer drafts than asked, or none (the CUDA backend sizes
    // them for the whole window's keep, near max-context): an empty list is never carried.
    const ModelConfig c = test::tiny_config(false);
    const auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
    const ModelWeights w = model->weights();
    const auto probe = probe_of(w);
    Outcome plain;
    run_jobs(w, {}, &probe, plain);
    Setup st;
    st.spec = {SpeculativeKind::Mtp, 3};
    st.drop_drafts = true;
    Outcome spec;
    run_jobs(w, st, &probe, spec);
    const RoundSpy* spy = spec.spy.get();
    check_same(plain, spec);
    CHECK(spy->greedy_rounds > 0);
    CHECK(spy->lanes_drafted == spy->lane_rounds); // every round drafted anew: nothing carried
    CHECK(spec.stats.n_spec_draft_tokens_total > spy->lane_rounds); // the fresh drafts were used (K = 3)
}
