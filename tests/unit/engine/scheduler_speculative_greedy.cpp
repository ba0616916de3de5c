// ninfer tests - the scheduler's greedy fast path of a speculative round (Backend::verify_greedy):
// a lane that is greedy with nothing else reading its rows is accepted from the rows' greedy ids
// alone (it asks for no rows), while lanes that read logprobs, sample or apply penalties get their
// rows, in the same round; the greedy lanes' output (and the logprobs) equal plain decoding.
#include "core/engine/scheduler.h"
#include "fake_backend.h"
#include "forwarding_backend.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <memory>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::RecordingSink;

namespace {

// Records, per verify_greedy call, each lane's want_rows flag.
class RowsSpy final : public test::ForwardingBackend {
  public:
    using ForwardingBackend::ForwardingBackend;
    std::vector<std::map<int, uint8_t>> rounds;
    void verify_greedy(std::span<const VerifyStep> steps, std::span<const uint8_t> want_rows,
                       std::vector<float>& logits, std::vector<int32_t>& ids) override {
        auto& r = rounds.emplace_back();
        for (size_t i = 0; i < steps.size(); ++i) r[steps[i].lane] = want_rows[i];
        b_.verify_greedy(steps, want_rows, logits, ids);
        size_t rows = 0, wanted = 0;
        for (size_t i = 0; i < steps.size(); ++i) {
            rows += steps[i].tokens.size();
            wanted += want_rows[i] ? steps[i].tokens.size() : 0;
        }
        CHECK(ids.size() == rows);
        CHECK(logits.size() == wanted * vocab_size());
    }
};

enum Kind { Greedy, GreedyLogprobs, Sampled, Penalised, kKinds };

struct Run {
    std::unique_ptr<Backend> cpu;
    std::unique_ptr<RowsSpy> spy;
    std::map<int, std::shared_ptr<RecordingSink>> sinks;
    EngineStats stats;
};

// One request of each kind on its own lane, all decoding together; with speculation (mtp:3) or not.
void run(const ModelWeights& w, const ModelConfig& c, bool speculate, Run& out) {
    out.cpu = make_cpu_backend(w, test::tiny_speculative_plan(c, kKinds, 3, true, KvDtype::F32, 256));
    out.spy = std::make_unique<RowsSpy>(*out.cpu);
    SchedulerOptions o{.max_context = 256, .prefill_chunk = 32};
    if (speculate) o.speculative = {SpeculativeKind::Mtp, 3};
    Scheduler s(*out.spy, o, out.stats);
    for (int k = 0; k < kKinds; ++k) {
        GenerationRequest r;
        r.id = uint64_t(k + 1);
        r.prompt = test::random_tokens(20 + 3 * size_t(k), c.vocab_size, 900 + uint64_t(k));
        r.max_tokens = 40;
        r.logprobs = k == GreedyLogprobs;
        r.sampling.temperature = k == Sampled ? 0.8f : 0.0f;
        r.sampling.seed = 77;
        r.sampling.presence_penalty = k == Penalised ? 0.5f : 0.0f;
        r.sink = out.sinks[k] = std::make_shared<RecordingSink>();
        s.submit(std::move(r));
    }
    for (int guard = 0; guard < 100000 && s.has_work(); ++guard) s.step();
    REQUIRE_FALSE(s.has_requests());
}

} // namespace

TEST_CASE("scheduler_speculative_greedy: greedy lanes take ids alone, the others their rows, in one round",
          "[scheduler_speculative_greedy]") {
    const ModelConfig c = test::tiny_config(false);
    const auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
    const ModelWeights w = model->weights();
    Run p, r;
    run(w, c, false, p);
    CHECK(p.spy->rounds.empty());
    run(w, c, true, r);
    const auto& plain = p.sinks;
    const auto& spec = r.sinks;
    REQUIRE(r.stats.n_spec_rounds_total > 0);
    REQUIRE_FALSE(r.spy->rounds.empty());
    size_t mixed = 0;
    for (const auto& round : r.spy->rounds) {
        bool fast = false, rows = false;
        for (const auto& [lane, want] : round) {
            const int kind = [&] {
                for (const auto& [k, sink] : spec)
                    if (sink->lane == lane) return k;
                return -1;
            }();
            INFO("lane " << lane << " kind " << kind);
            CHECK(want == (kind == Greedy ? 0 : 1));
            fast = fast || !want;
            rows = rows || want;
        }
        mixed += fast && rows;
    }
    CHECK(mixed > 0); // some rounds held a fast-path lane and lanes with rows together
    for (int k : {Greedy, GreedyLogprobs, Penalised}) {
        INFO("kind " << k);
        REQUIRE(spec.at(k)->finished);
        CHECK(spec.at(k)->tokens == plain.at(k)->tokens);
    }
    const auto& a = plain.at(GreedyLogprobs)->logprobs;
    const auto& b = spec.at(GreedyLogprobs)->logprobs;
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= 1e-4f);
    CHECK(spec.at(Sampled)->tokens.size() == 40);
}
