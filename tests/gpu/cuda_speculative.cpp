// ninfer tests (GPU) - speculation through the scheduler on the CUDA backend (issue 28): greedy
// output with n-gram drafts (ngram:1, 3, 5: prompt lookup, else the truth with one wrong draft at
// a cycling position) equals the output without speculation, token for token, at batch 1, 3 and 8 with lanes that do not speculate mixed in (pipelined decode steps
// between the rounds), and so does the GPU's MTP head (mtp:1, 3, 5; random heads on the kernel
// fixtures' shapes, whose checkpoints carry none); a drafter told the target's own tokens accepts
// every draft and an always-wrong one none, both with the plain output; the bench's rounds keep
// what the forced acceptance says. Where a run leaves the plain tokens, the plain run's top-2
// logprob gap at that token must be under 0.01 (a near tie; speculative_util.h).
#include "core/cuda/cuda_backend.h"
#include "core/cuda/speculative_bench.h"
#include "core/engine/ngram_drafter.h"
#include "core/engine/scheduler.h"
#include "core/model/random_model.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/speculative_util.h"
#include "tests/unit/engine/truth_drafter.h"

#include <cstdio>
#include <map>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

struct Sink final : GenerationSink {
    std::vector<int32_t> tokens;
    std::vector<float> gaps; // top-2 logprob gap of each token's row (plain runs ask for 2 top logprobs)
    GenerationSummary summary;
    bool finished = false;
    TokenVerdict on_token(const DecodeResult& r) override {
        tokens.push_back(r.token);
        gaps.push_back(r.top_logprobs.size() >= 2 ? r.top_logprobs[0].second - r.top_logprobs[1].second : 1e9f);
        return TokenVerdict::Continue;
    }
    void on_finished(const GenerationSummary& s) override { finished = true, summary = s; }
    void on_rejected(RejectReason, const std::string& why) override { FAIL("rejected: " << why); }
};

struct Job {
    uint64_t id;
    size_t offset, prompt_len;
    uint32_t max_tokens;
    bool speculates;
};

// Up to 8 requests at once; ids 3 and 6 never speculate; 5 asks for a single token.
const std::vector<Job> kJobs = {{1, 0, 9, 28, true},    {2, 13, 40, 24, true}, {3, 5, 17, 20, false},
                                {4, 21, 64, 26, true},  {5, 30, 11, 1, true},  {6, 2, 33, 22, false},
                                {7, 40, 90, 30, true},  {8, 7, 5, 27, true}};

struct Outcome {
    std::map<uint64_t, std::shared_ptr<Sink>> sinks;
    EngineStats stats;
};

// A kernel fixture in q4 with its plan of 5-draft verify windows and its perplexity ids (prompts).
struct SpecFixture {
    std::unique_ptr<Model> m;
    MemoryPlan plan;
    std::vector<int32_t> ids;
};
SpecFixture spec_fixture(const std::string& fixture) {
    auto m = load(fixture, "q4");
    const MemoryPlan plan = spec_plan(*m, kMaxDraftTokens);
    return {std::move(m), plan, read_refs(fixture).ppl_ids};
}

using Drafter = std::function<std::vector<int32_t>(std::span<const int32_t>, int)>;

// The first n_jobs jobs on a fresh backend, all submitted at once (batch n_jobs). fused: greedy
// rounds through verify_accept_greedy (CudaBackendOptions::fused_rounds), else the separate calls.
void run_jobs(const ModelWeights& w, const MemoryPlan& plan, const std::vector<int32_t>& ids, size_t n_jobs,
              SpeculativeConfig spec, Outcome& out, const Drafter& drafter = {}, bool fused = true) {
    CudaBackendOptions options;
    options.fused_rounds = fused;
    auto gpu = make_cuda_backend(w, plan, options);
    SchedulerOptions o;
    o.max_context = plan.max_context;
    o.kv_capacity_tokens = plan.kv_capacity_tokens;
    o.prefill_chunk = 64;
    o.speculative = spec;
    o.test_drafter = drafter;
    Scheduler s(*gpu, o, out.stats);
    for (size_t i = 0; i < n_jobs; ++i) {
        const Job& j = kJobs[i];
        GenerationRequest r;
        r.id = j.id;
        r.prompt.assign(ids.begin() + long(j.offset), ids.begin() + long(j.offset + j.prompt_len));
        r.max_tokens = j.max_tokens;
        r.n_top_logprobs = spec.on() ? 0 : 2;
        if (!j.speculates) r.speculative = SpeculativeConfig{};
        auto sink = std::make_shared<Sink>();
        r.sink = out.sinks[j.id] = sink;
        s.submit(std::move(r));
    }
    for (int guard = 0; guard < 100000 && s.has_work(); ++guard) s.step();
    REQUIRE_FALSE(s.has_requests());
}

// Every request gives the plain tokens, or leaves them only at a near tie of the plain run.
size_t check_same(const Outcome& plain, const Outcome& spec) {
    size_t near_ties = 0;
    for (const auto& [id, a] : plain.sinks) {
        INFO("request " << id);
        const Sink& b = *spec.sinks.at(id);
        REQUIRE(b.finished);
        size_t d = 0;
        while (d < a->tokens.size() && d < b.tokens.size() && a->tokens[d] == b.tokens[d]) ++d;
        if (d == a->tokens.size() && d == b.tokens.size()) continue;
        INFO("first differing token " << d << ", plain top-2 gap " << a->gaps.at(std::min(d, a->gaps.size() - 1)));
        REQUIRE(d < a->tokens.size());
        CHECK(a->gaps[d] < 0.01f);
        ++near_ties;
    }
    return near_ties;
}

} // namespace

// The true continuation of each of the first n_jobs jobs: its prompt, then its plain tokens.
std::vector<std::vector<int32_t>> truths_of(const std::vector<int32_t>& ids, const Outcome& plain, size_t n_jobs) {
    std::vector<std::vector<int32_t>> truths;
    for (size_t i = 0; i < n_jobs; ++i) {
        const Job& j = kJobs[i];
        std::vector<int32_t> t(ids.begin() + long(j.offset), ids.begin() + long(j.offset + j.prompt_len));
        t.insert(t.end(), plain.sinks.at(j.id)->tokens.begin(), plain.sinks.at(j.id)->tokens.end());
        truths.push_back(std::move(t));
    }
    return truths;
}

// Prompt lookup (the real n-gram drafter over the lane's tokens) where it finds a match; else the
// true continuation with one token wrong at a position that cycles with the sequence's length
// (none wrong one round in k + 1), so rounds keep every count of drafts from 0 to k. The perplexity
// slices and the random fixtures' outputs seldom repeat an n-gram: prompt lookup alone drafted
// nothing in the GPU run of 63d070f, which would compare plain decoding with itself.
std::vector<int32_t> lookup_or_partly_true(const std::vector<std::vector<int32_t>>& truths, int32_t vocab,
                                           std::span<const int32_t> seq, int k) {
    NgramDrafter lookup{NgramOptions{}};
    lookup.append(seq);
    std::vector<int32_t> d = lookup.draft(k);
    if (!d.empty()) return d;
    d = truth_draft(truths, true, vocab, seq, k);
    const size_t wrong = seq.size() % size_t(k + 1);
    if (wrong < d.size()) d[wrong] = (d[wrong] + 1) % vocab;
    return d;
}

TEST_CASE("cuda_speculative: greedy n-gram speculation equals plain decoding at batch 1, 3 and 8",
          "[cuda_speculative]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        const auto [m, plan, ids] = spec_fixture(fixture);
        const int32_t V = int32_t(m->weights.config.vocab_size);
        for (size_t batch : {size_t(1), size_t(3), size_t(8)}) {
            Outcome plain;
            run_jobs(m->weights, plan, ids, batch, {}, plain);
            const auto truths = truths_of(ids, plain, batch);
            const Drafter drafter = [&truths, V](std::span<const int32_t> seq, int k) {
                return lookup_or_partly_true(truths, V, seq, k);
            };
            for (int k : {1, 3, 5})
            for (bool fused : {false, true}) {
                INFO(fixture << " batch " << batch << " ngram:" << k << (fused ? " fused" : " split"));
                Outcome spec;
                run_jobs(m->weights, plan, ids, batch, {SpeculativeKind::Ngram, k}, spec, drafter, fused);
                const size_t ties = check_same(plain, spec);
                CHECK(spec.stats.n_spec_rounds_total > 0);
                REQUIRE(spec.stats.n_spec_draft_tokens_total > 0);
                // Some rounds keep drafts and some drop them: every rollback length is exercised.
                CHECK(spec.stats.n_spec_accepted_tokens_total > 0);
                CHECK(spec.stats.n_spec_accepted_tokens_total < spec.stats.n_spec_draft_tokens_total);
                if (batch >= 3) CHECK(spec.sinks.at(3)->summary.draft_n == 0); // speculation off for it
                std::printf("RESULT %s batch %zu ngram:%d %s rounds %llu drafted %llu accepted %llu near_tie_departures %zu\n",
                            fixture.c_str(), batch, k, fused ? "fused" : "split", (unsigned long long)spec.stats.n_spec_rounds_total.load(),
                            (unsigned long long)spec.stats.n_spec_draft_tokens_total.load(),
                            (unsigned long long)spec.stats.n_spec_accepted_tokens_total.load(), ties);
            }
        }
    }
}

TEST_CASE("cuda_speculative: an oracle drafter accepts everything, an always-wrong one nothing",
          "[cuda_speculative]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        const auto [m, plan, ids] = spec_fixture(fixture);
        const int32_t V = int32_t(m->weights.config.vocab_size);
        Outcome plain;
        run_jobs(m->weights, plan, ids, kJobs.size(), {}, plain);
        const auto truths = truths_of(ids, plain, kJobs.size());
        for (bool right : {true, false}) {
            INFO(fixture << (right ? " oracle" : " always wrong"));
            const Drafter drafter = [&truths, right, V](std::span<const int32_t> seq, int k) {
                return truth_draft(truths, right, V, seq, k);
            };
            Outcome spec;
            run_jobs(m->weights, plan, ids, kJobs.size(), {SpeculativeKind::Ngram, 4}, spec, drafter);
            CHECK(check_same(plain, spec) == 0);
            REQUIRE(spec.stats.n_spec_draft_tokens_total > 0);
            if (right) {
                CHECK(spec.stats.n_spec_accepted_per_pos[3] > 0);
                for (const auto& [id, sink] : spec.sinks) {
                    INFO("request " << id);
                    CHECK(sink->summary.draft_n_accepted == sink->summary.draft_n);
                }
            } else {
                CHECK(spec.stats.n_spec_accepted_tokens_total == 0);
            }
            std::printf("RESULT %s %s drafted %llu accepted %llu\n", fixture.c_str(), right ? "oracle" : "always_wrong",
                        (unsigned long long)spec.stats.n_spec_draft_tokens_total.load(),
                        (unsigned long long)spec.stats.n_spec_accepted_tokens_total.load());
        }
    }
}

TEST_CASE("cuda_speculative: greedy MTP speculation equals plain decoding", "[cuda_speculative]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        const auto [m, fixture_plan, ids] = spec_fixture(fixture);
        RandomModelOptions o;
        o.seed = 91;
        o.matrix_format = TensorFormat::Q4G64Fp16;
        o.with_mtp = true;
        const auto model = InMemoryModel::random(m->weights.config, o);
        const ModelWeights w = model->weights();
        REQUIRE(w.mtp);
        MemoryRequest r;
        r.max_context = fixture_plan.max_context;
        r.max_concurrency = 8;
        r.prefill_chunk = fixture_plan.prefill_chunk;
        r.available_bytes = 1ull << 34;
        r.weight_bytes = w.stored_bytes();
        r.max_draft_tokens = kMaxDraftTokens;
        r.mtp = true;
        const MemoryPlan plan = MemoryPlan::make(w.config, r);
        for (size_t batch : {size_t(1), size_t(8)}) {
            Outcome plain;
            run_jobs(w, plan, ids, batch, {}, plain);
            for (int k : {1, 3, 5})
            for (bool fused : {false, true}) {
                INFO(fixture << " batch " << batch << " mtp:" << k << (fused ? " fused" : " split"));
                Outcome spec;
                run_jobs(w, plan, ids, batch, {SpeculativeKind::Mtp, k}, spec, {}, fused);
                const size_t ties = check_same(plain, spec);
                CHECK(spec.stats.n_spec_draft_tokens_total > 0);
                CHECK(spec.stats.n_spec_accepted_tokens_total <= spec.stats.n_spec_draft_tokens_total);
                std::printf("RESULT %s random-head batch %zu mtp:%d %s rounds %llu drafted %llu accepted %llu "
                            "near_tie_departures %zu\n",
                            fixture.c_str(), batch, k, fused ? "fused" : "split", (unsigned long long)spec.stats.n_spec_rounds_total.load(),
                            (unsigned long long)spec.stats.n_spec_draft_tokens_total.load(),
                            (unsigned long long)spec.stats.n_spec_accepted_tokens_total.load(), ties);
            }
        }
    }
}

// The bench's rounds (core/cuda/speculative_bench.h) keep what the forced acceptance says: K + 1
// tokens a round with every draft accepted, 0.75 K + 1 on average with the 75% pattern, in the
// split round, the fused one launched eagerly and the fused one as a graph.
TEST_CASE("cuda_speculative: the bench's rounds keep what the forced acceptance says", "[cuda_speculative]") {
    require_gpu();
    const auto [m, plan, ids] = spec_fixture(kKernelFixtures[1]);
    auto gpu = make_cuda_backend(m->weights, plan);
    gpu->prefill(0, std::span(ids).first(70), LogitsOut::None, nullptr);
    const LaneImage image = gpu->save_lane(0);
    std::vector<SpecBenchRow> rows;
    bench_speculative_rounds(*gpu, {3, false, 2, 70, 8, m->weights.config.vocab_size, &image, 1.0}, rows);
    REQUIRE(rows.size() == 6); // split, fused (eager), graph (verify_accept_greedy), each all then 75%
    for (size_t i = 0; i < rows.size(); ++i) {
        INFO("row " << i);
        CHECK(rows[i].round == std::vector<std::string>{"split", "fused", "graph"}[i / 2]);
        CHECK(rows[i].accept == (i % 2 ? "75%" : "all"));
        if (i % 2 == 0) CHECK(rows[i].tokens_per_round == 4.0);
        else CHECK(rows[i].tokens_per_round == Approx(0.75 * 3 + 1)); // 2, 2, 2, 3, 2, 2, 2, 3 accepted drafts
    }
    // Each row restores the image: the last row's lanes hold it, one plain step, the warm-up round
    // and the timed rounds' kept tokens.
    CHECK(gpu->lane_length(1) == 70 + 1 + 3 + 18 + 8);
    for (const SpecBenchRow& r : rows) CHECK(r.round_ms > 0);
}
