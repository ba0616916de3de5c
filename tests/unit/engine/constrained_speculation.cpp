// ninfer tests - constrained lanes speculate (issue 32 item 5) on the CPU backend (a tiny random
// model): n-gram drafts checked against the grammar on the host, verify rows sampled under the
// masks after the drafts before them. Greedy output equals plain constrained decoding token for
// token, for ngram:1..5 and batch 1..4 beside free and free-speculating lanes, and with mtp:K
// configured (a constrained lane drafts by n-gram with the same K); seeded sampling is
// reproducible and keeps the grammar; real n-gram drafts are accepted where the grammar repeats
// a pattern of the prompt; an oracle drafter is accepted whole, an always-wrong one never; drafts
// the grammar refuses never reach the verify (counted). check_drafts leaves the constraint as it
// was; accept_masked_drafts samples each row's masked distribution (chi-square).
#include "core/engine/constrained_drafts.h"
#include "core/engine/scheduler.h"
#include "fake_backend.h"
#include "forwarding_backend.h"
#include "set_grammar.h"
#include "constrained_fixture.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <sstream>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::RecordingSink;
using ninfer::test::kDigits;
using ninfer::test::kEnd;
using ninfer::test::kSeparator;
using ninfer::test::kThinkEnd;
using ninfer::test::SetGrammar;

namespace {


// A record like {"k":D,"j":D} over ids ('{' 1, '}' 2, k 20, ':' 21, ',' 22, j 23, D a digit),
// three of them: mostly forced tokens, the shape of a JSON reply; finished after the last '}'.
std::vector<std::vector<int32_t>> record_sets(int n = 3) {
    std::vector<std::vector<int32_t>> sets;
    for (int r = 0; r < n; ++r)
        for (const std::vector<int32_t>& s : std::vector<std::vector<int32_t>>{{1}, {20}, {21}, kDigits, {22}, {23}, {21}, kDigits, {2}})
            sets.push_back(s);
    return sets;
}
// "[" digit{5} "]": drafts from the prompt's random tokens rarely fit it.
std::vector<std::vector<int32_t>> bracket_sets() {
    std::vector<std::vector<int32_t>> sets = {{1}};
    for (int i = 0; i < 5; ++i) sets.push_back(kDigits);
    sets.push_back({2});
    return sets;
}

// Whether t is a string of the sets (complete: all of them), or a prefix of one.
bool follows(const std::vector<std::vector<int32_t>>& sets, std::span<const int32_t> t, bool complete) {
    if (t.size() > sets.size() || (complete && t.size() != sets.size())) return false;
    for (size_t i = 0; i < t.size(); ++i)
        if (std::find(sets[i].begin(), sets[i].end(), t[i]) == sets[i].end()) return false;
    return true;
}

enum class Kind { Records, Bracket, Thinking, DeadEnd, Free, FreeNoSpec };

struct Job {
    uint64_t id;
    Kind kind;
    float temperature = 0.f;
    std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();
};

std::vector<int32_t> prompt_of(const Job& j) {
    std::vector<int32_t> p = test::random_tokens(7 + j.id, 211, 300 + j.id);
    if (j.kind == Kind::Records || j.kind == Kind::Thinking) // two records the reply can echo
        for (int32_t t : {1, 20, 21, 14, 22, 23, 21, 17, 2, 1, 20, 21, 12, 22, 23, 21, 16, 2}) p.push_back(t);
    p.push_back(int32_t(30 + j.id));
    return p;
}

GenerationRequest request_of(const Job& j) {
    GenerationRequest r;
    r.id = j.id;
    r.prompt = prompt_of(j);
    r.max_tokens = 40;
    r.sampling.temperature = j.temperature;
    r.sampling.seed = 91 + j.id;
    r.stop_token_ids = {kEnd};
    r.sink = j.sink;
    if (j.kind == Kind::FreeNoSpec) r.speculative = SpeculativeConfig{};
    if (j.kind == Kind::Free) r.sampling.logit_bias = {{40, 8.f}, {41, 8.f}, {42, 8.f}}; // repeats: n-gram drafts match
    if (j.kind == Kind::Free || j.kind == Kind::FreeNoSpec) return r;
    ConstraintSpec c;
    c.grammar = std::make_unique<SetGrammar>(j.kind == Kind::Bracket ? bracket_sets() : record_sets(),
                                             j.kind == Kind::Bracket ? 7 : 27);
    c.end_tokens = {kEnd};
    if (j.kind == Kind::DeadEnd) // its first token, then nothing
        c.grammar = std::make_unique<SetGrammar>(std::vector<std::vector<int32_t>>{{5}, {}}, 9);
    if (j.kind == Kind::Thinking) { // free reasoning, which the bias ends soon, then the records
        c.after_reasoning = true;
        c.think_end_token = kThinkEnd;
        c.separator_tokens = {kSeparator};
        r.sampling.logit_bias = {{kThinkEnd, 6.f}};
    }
    r.constraint = std::move(c);
    return r;
}

// Forwards to the CPU backend and records every verify window's drafts (tokens 1..).
class VerifyRecorder final : public test::ForwardingBackend {
  public:
    using ForwardingBackend::ForwardingBackend;
    void verify(std::span<const VerifyStep> steps, std::vector<float>& logits) override {
        for (const VerifyStep& s : steps) verified.insert(verified.end(), s.tokens.begin() + 1, s.tokens.end());
        b_.verify(steps, logits);
    }
    std::vector<int32_t> verified; // every verified draft
};

struct Outcome {
    EngineStats stats;
    std::vector<int32_t> verified;
};

void run(std::vector<Job>& jobs, int lanes, SpeculativeConfig speculative, Outcome& out,
         std::function<std::vector<int32_t>(std::span<const int32_t>, int)> drafter = {}) {
    auto cpu = make_cpu_backend(test::constrained_model().weights, test::tiny_speculative_plan(test::constrained_model().config, lanes, kMaxSpeculativeK, true));
    VerifyRecorder backend(*cpu);
    SchedulerOptions o{.max_context = 512, .prefill_chunk = 16};
    o.speculative = speculative;
    o.test_drafter = std::move(drafter);
    Scheduler s(backend, o, out.stats);
    for (const Job& j : jobs) s.submit(request_of(j));
    for (int guard = 0; guard < 10000 && s.has_requests(); ++guard) s.step();
    REQUIRE_FALSE(s.has_requests());
    out.verified = std::move(backend.verified);
}

// A constrained reply holds its grammar: complete when it ended Stop, else a prefix.
void check_grammar(const Job& j) {
    if (j.kind == Kind::Free || j.kind == Kind::FreeNoSpec) return;
    std::span<const int32_t> t = j.sink->tokens;
    if (j.kind == Kind::DeadEnd) {
        CHECK(j.sink->tokens == std::vector<int32_t>{5});
        CHECK(j.sink->summary.reason == FinishReason::ConstraintFailed);
        return;
    }
    const bool stop = j.sink->summary.reason == FinishReason::Stop;
    if (j.kind == Kind::Thinking) {
        const auto end = std::find(t.begin(), t.end(), kThinkEnd);
        CHECK(std::find(t.begin(), end, kEnd) == end); // the reasoning never ends the reply
        if (end == t.end()) {
            CHECK_FALSE(stop);
            return;
        }
        t = t.subspan(size_t(end - t.begin()) + 1);
        if (!t.empty() && t[0] == kSeparator) t = t.subspan(1);
    }
    CHECK(follows(j.kind == Kind::Bracket ? bracket_sets() : record_sets(), t, stop));
}

// The speculative run's replies are the plain run's, and each keeps its grammar.
void check_same(const std::vector<Job>& got, const std::vector<Job>& plain) {
    REQUIRE(got.size() == plain.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("request " << got[i].id);
        CHECK(got[i].sink->tokens == plain[i].sink->tokens);
        CHECK(got[i].sink->summary.reason == plain[i].sink->summary.reason);
        CHECK(got[i].sink->summary.draft_n_accepted <= got[i].sink->summary.draft_n);
        check_grammar(got[i]);
    }
}

std::vector<Job> mixed_jobs(float temperature) {
    return {{1, Kind::Records, temperature},  {2, Kind::Free, 0.f},       {3, Kind::Bracket, temperature},
            {4, Kind::FreeNoSpec, 0.f},       {5, Kind::Thinking, temperature}, {6, Kind::Records, temperature}};
}

// Drafts verified (or accepted) over the constrained or the free lanes.
uint32_t drafts_of(const std::vector<Job>& jobs, bool constrained, bool accepted) {
    uint32_t n = 0;
    for (const Job& j : jobs)
        if ((j.kind != Kind::Free && j.kind != Kind::FreeNoSpec) == constrained)
            n += accepted ? j.sink->summary.draft_n_accepted : j.sink->summary.draft_n;
    return n;
}
uint32_t accepted_of(const std::vector<Job>& jobs, bool constrained) { return drafts_of(jobs, constrained, true); }
uint32_t drafted_of(const std::vector<Job>& jobs, bool constrained) { return drafts_of(jobs, constrained, false); }

} // namespace

TEST_CASE("constrained lanes speculate: greedy output equals plain constrained decoding for ngram:1..5, batch 1..4",
          "[constrained_speculation]") {
    std::ostringstream figures;
    for (int lanes = 1; lanes <= 4; ++lanes) {
        std::vector<Job> plain = mixed_jobs(0.f);
        Outcome none;
        run(plain, lanes, {}, none);
        CHECK(plain[0].sink->summary.reason == FinishReason::Stop); // the records were written whole
        CHECK(plain[4].sink->summary.reason == FinishReason::Stop); // after a short reasoning
        for (int k = 1; k <= kMaxSpeculativeK; ++k) {
            INFO("lanes " << lanes << " ngram:" << k);
            std::vector<Job> spec = mixed_jobs(0.f);
            Outcome o;
            run(spec, lanes, {SpeculativeKind::Ngram, k}, o);
            check_same(spec, plain);
            CHECK(spec[3].sink->summary.draft_n == 0); // speculation off for this request
            CHECK(spec[1].sink->summary.draft_n > 0);  // the free lane beside them speculates
            // Prompt lookup finds the records' forced tokens: drafts the grammar keeps and the model takes.
            CHECK(spec[0].sink->summary.draft_n_accepted > 0);
            CHECK(spec[5].sink->summary.draft_n_accepted > 0);
            figures << "\nlanes " << lanes << " ngram:" << k << ": constrained lanes " << accepted_of(spec, true) << " of "
                    << drafted_of(spec, true) << " drafts accepted, " << o.stats.n_spec_draft_tokens_refused_total
                    << " cut by the grammar; free lanes " << accepted_of(spec, false) << " of " << drafted_of(spec, false);
        }
    }
    WARN(figures.str());
}

TEST_CASE("constrained lanes speculate under mtp:K with n-gram drafts of the same K", "[constrained_speculation]") {
    std::vector<Job> plain = mixed_jobs(0.f), spec = mixed_jobs(0.f);
    Outcome none, o;
    run(plain, 3, {}, none);
    run(spec, 3, {SpeculativeKind::Mtp, 3}, o);
    check_same(spec, plain);
    CHECK(spec[0].sink->summary.draft_n_accepted > 0); // n-gram drafts of the records
    CHECK(spec[1].sink->summary.draft_n > 0);          // the free lane drafts with the head
}

TEST_CASE("a speculating constrained lane whose grammar allows nothing ends ConstraintFailed, alone",
          "[constrained_speculation]") {
    auto make = [] { return std::vector<Job>{{7, Kind::DeadEnd}, {1, Kind::Records}, {8, Kind::DeadEnd}, {2, Kind::Free}}; };
    std::vector<Job> plain = make(), spec = make();
    Outcome none, o;
    run(plain, 2, {}, none);
    run(spec, 2, {SpeculativeKind::Ngram, 3}, o);
    check_same(spec, plain);
    CHECK(o.stats.n_spec_rounds_total > 0);
}

TEST_CASE("constrained sampled speculation is reproducible and keeps the grammar", "[constrained_speculation]") {
    for (int lanes : {1, 4}) {
        std::vector<Job> a = mixed_jobs(0.9f), b = mixed_jobs(0.9f);
        Outcome oa, ob;
        run(a, lanes, {SpeculativeKind::Ngram, 4}, oa);
        run(b, lanes, {SpeculativeKind::Ngram, 4}, ob);
        for (size_t i = 0; i < a.size(); ++i) {
            INFO("lanes " << lanes << " request " << a[i].id);
            CHECK(a[i].sink->tokens == b[i].sink->tokens);
            check_grammar(a[i]);
        }
        CHECK(accepted_of(a, true) > 0);
    }
}

TEST_CASE("constrained lanes: an oracle drafter is accepted whole, an always-wrong one never, refused drafts are "
          "never verified",
          "[constrained_speculation]") {
    auto make = [] { return std::vector<Job>{{1, Kind::Records}, {3, Kind::Bracket}, {5, Kind::Thinking}, {6, Kind::Records}}; };
    std::vector<Job> plain = make();
    Outcome none;
    run(plain, 2, {}, none);
    std::vector<std::vector<int32_t>> truths; // prompts followed by their plain replies
    for (const Job& j : plain) {
        truths.push_back(prompt_of(j));
        truths.back().insert(truths.back().end(), j.sink->tokens.begin(), j.sink->tokens.end());
    }
    size_t proposed = 0;
    // The true continuation, with token i of each run replaced by `wrong(i, token)` (none: the truth).
    auto drafter = [&](std::function<int32_t(size_t, int32_t)> wrong) {
        return [&truths, &proposed, wrong](std::span<const int32_t> seq, int k) {
            std::vector<int32_t> d;
            for (const auto& t : truths)
                if (t.size() > seq.size() && std::equal(seq.begin(), seq.end(), t.begin()))
                    for (size_t i = seq.size(); i < t.size() && d.size() < size_t(k); ++i)
                        d.push_back(wrong ? wrong(d.size(), t[i]) : t[i]);
            proposed += d.size();
            return d;
        };
    };
    SECTION("oracle") {
        std::vector<Job> got = make();
        Outcome o;
        run(got, 2, {SpeculativeKind::Ngram, 4}, o, drafter({}));
        check_same(got, plain);
        REQUIRE(o.stats.n_spec_draft_tokens_total > 0);
        CHECK(o.stats.n_spec_accepted_tokens_total == o.stats.n_spec_draft_tokens_total);
        CHECK(o.stats.n_spec_draft_tokens_refused_total == 0); // the true tokens all fit the grammar
        CHECK(o.stats.n_spec_accepted_per_pos[3] > 0);
        CHECK(proposed == o.stats.n_spec_draft_tokens_total);
    }
    SECTION("always wrong: the next id (a digit for a digit, else mostly refused)") {
        std::vector<Job> got = make();
        Outcome o;
        run(got, 2, {SpeculativeKind::Ngram, 4}, o, drafter([](size_t, int32_t t) { return (t + 1) % 211; }));
        check_same(got, plain);
        CHECK(o.stats.n_spec_draft_tokens_total > 0);       // wrong digits the grammar lets through
        CHECK(o.stats.n_spec_accepted_tokens_total == 0);   // the verify rejects them all
        CHECK(o.stats.n_spec_draft_tokens_refused_total > 0);
        CHECK(proposed == o.stats.n_spec_draft_tokens_total + o.stats.n_spec_draft_tokens_refused_total);
    }
    SECTION("the second draft of each run is an end token before the grammar accepts: cut with the rest") {
        std::vector<Job> got = make();
        Outcome o;
        run(got, 2, {SpeculativeKind::Ngram, 4}, o, drafter([](size_t i, int32_t t) { return i == 1 ? kEnd : t; }));
        check_same(got, plain);
        CHECK(std::count(o.verified.begin(), o.verified.end(), kEnd) == 0); // never verified
        CHECK(o.stats.n_spec_draft_tokens_refused_total > 0);
        CHECK(proposed == o.stats.n_spec_draft_tokens_total + o.stats.n_spec_draft_tokens_refused_total);
        CHECK(o.stats.n_spec_accepted_tokens_total == o.stats.n_spec_draft_tokens_total); // the first, the truth
        CHECK(o.verified.size() == o.stats.n_spec_draft_tokens_total);
    }
}
