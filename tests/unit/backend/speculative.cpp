// ninfer tests - draft acceptance (core/backend/speculative.h): sampling_candidates is exactly the
// distribution sample_token draws from; greedy acceptance keeps the argmax prefix; speculative
// sampling gives tokens distributed as plain sampling (chi-square over many seeds, at the first
// position and at the second given the first draft was taken).
#include "core/backend/speculative.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>

using namespace ninfer::core;

namespace {

std::vector<float> random_logits(size_t n, std::mt19937_64& rng, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v)
        x = normal(rng);
    return v;
}

// Pearson chi-square of observed counts against the expected probabilities (prob / total).
double chi_square(const std::map<int32_t, int>& seen, const SamplingCandidates& c, int n) {
    double chi = 0;
    for (size_t i = 0; i < c.ids.size(); ++i) {
        const double expected = n * c.prob[i] / c.total;
        const auto it = seen.find(c.ids[i]);
        const double o = it == seen.end() ? 0 : it->second;
        chi += (o - expected) * (o - expected) / expected;
    }
    return chi;
}

// The chi-square quantile at p = 0.001 for 1..7 degrees of freedom.
double chi_critical(size_t df) {
    static const double q[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
    return q[std::min<size_t>(df, 7)];
}

} // namespace

TEST_CASE("speculative: sampling_candidates is the distribution sample_token draws from", "[speculative]") {
    std::mt19937_64 rng(5);
    for (int iter = 0; iter < 400; ++iter) {
        const size_t V = iter % 3 == 0 ? 5 : iter % 3 == 1 ? 60 : 1500;
        const auto logits = random_logits(V, rng, iter % 2 ? 1.0f : 4.0f);
        SamplingParams p;
        p.temperature = iter % 5 == 0 ? 0.0f : 0.5f + float(iter % 4) * 0.4f;
        p.top_k = int32_t(iter % 4 == 0 ? 0 : iter % 4 == 1 ? 3 : 40);
        p.top_p = iter % 3 == 0 ? 1.0f : 0.85f;
        p.min_p = iter % 7 == 0 ? 0.05f : 0.0f;
        p.presence_penalty = iter % 2 ? 0.3f : 0.0f;
        p.seed = rng();
        p.step = iter;
        const std::vector<int32_t> generated{1, 2, 2, int32_t(V - 1)};
        std::vector<float> a = logits, b = logits;
        const SamplingCandidates c = sampling_candidates(a, p, generated);
        REQUIRE(!c.ids.empty());
        CHECK(a == [&] { std::vector<float> x = logits; sample_token(x, p, generated); return x; }());
        const double at = sampling_uniform(p.seed, p.step) * c.total;
        double cum = 0;
        int32_t pick = c.ids.back();
        for (size_t i = 0; i < c.ids.size(); ++i)
            if (at < (cum += c.prob[i])) {
                pick = c.ids[i];
                break;
            }
        INFO("iteration " << iter);
        CHECK(pick == sample_token(b, p, generated));
    }
}

TEST_CASE("speculative: greedy keeps the drafts equal to the argmax before them", "[speculative]") {
    std::mt19937_64 rng(6);
    const size_t V = 50, K = 4;
    std::vector<float> rows;
    std::vector<int32_t> argmax;
    for (size_t j = 0; j <= K; ++j) {
        const auto r = random_logits(V, rng, 3.0f);
        rows.insert(rows.end(), r.begin(), r.end());
        argmax.push_back(int32_t(std::max_element(r.begin(), r.end()) - r.begin()));
    }
    const SamplingParams greedy;
    std::vector<int32_t> drafts(argmax.begin(), argmax.begin() + K);
    std::vector<float> work = rows;
    DraftAcceptance all = accept_drafts(work, V, drafts, greedy, {});
    CHECK(all.accepted == K);
    CHECK(all.next_token == argmax[K]); // the bonus
    drafts[2] = (drafts[2] + 1) % int32_t(V);
    work = rows;
    DraftAcceptance some = accept_drafts(work, V, drafts, greedy, {});
    CHECK(some.accepted == 2);
    CHECK(some.next_token == argmax[2]); // the correction
    work = rows;
    CHECK(accept_drafts(std::span(work).first(V), V, {}, greedy, {}).next_token == argmax[0]);
    work = rows;
    CHECK_THROWS_WITH(accept_drafts(work, V, std::vector<int32_t>{1}, greedy, {}),
                      Catch::Contains("speculative: 250 logits for 1 drafts"));
}

TEST_CASE("speculative: sampled tokens follow the plain sampler's distribution", "[speculative]") {
    const size_t V = 6;
    const std::vector<float> row0{2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -1.0f}, row1{0.2f, -0.5f, 1.2f, 0.9f, 0.1f, 0.4f};
    const std::vector<float> row2{0.0f, 0.3f, -0.2f, 0.8f, 1.1f, 0.5f}; // the bonus row
    std::vector<float> rows = row0;
    rows.insert(rows.end(), row1.begin(), row1.end());
    rows.insert(rows.end(), row2.begin(), row2.end());
    struct Case {
        const char* name;
        SamplingParams p;
        std::vector<int32_t> drafts;
    };
    std::vector<Case> cases(3);
    cases[0] = {"T=1, likely drafts", {}, {0, 2}};
    cases[0].p.temperature = 1.0f;
    cases[1] = {"T=0.8 top_k=4 top_p=0.95, second draft cut away", {}, {2, 5}};
    cases[1].p.temperature = 0.8f, cases[1].p.top_k = 4, cases[1].p.top_p = 0.95f;
    cases[2] = {"T=1.3 presence penalty, unlikely first draft", {}, {4, 2}};
    cases[2].p.temperature = 1.3f, cases[2].p.presence_penalty = 0.7f;
    const std::vector<int32_t> generated{2, 3};
    for (const Case& tc : cases) {
        INFO(tc.name);
        const int n = 20000;
        std::map<int32_t, int> first, second;
        int second_n = 0;
        for (int s = 0; s < n; ++s) {
            SamplingParams p = tc.p;
            p.seed = uint64_t(s) * 7919 + 13;
            p.step = 3;
            std::vector<float> work = rows;
            const DraftAcceptance a = accept_drafts(work, V, tc.drafts, p, generated);
            ++first[a.accepted >= 1 ? tc.drafts[0] : a.next_token];
            if (a.accepted >= 1) { // the second token, given the first draft was taken
                ++second[a.accepted >= 2 ? tc.drafts[1] : a.next_token];
                ++second_n;
            }
        }
        std::vector<float> r0 = row0, r1 = row1;
        const SamplingCandidates p0 = sampling_candidates(r0, tc.p, generated);
        std::vector<int32_t> then = generated;
        then.push_back(tc.drafts[0]);
        const SamplingCandidates p1 = sampling_candidates(r1, tc.p, then);
        const double chi0 = chi_square(first, p0, n);
        CHECK(chi0 < chi_critical(p0.ids.size() - 1));
        REQUIRE(second_n > 1000);
        const double chi1 = chi_square(second, p1, second_n);
        CHECK(chi1 < chi_critical(p1.ids.size() - 1));
        for (const auto& [id, count] : first) // nothing outside the kept candidates
            CHECK(std::find(p0.ids.begin(), p0.ids.end(), id) != p0.ids.end());
        WARN(tc.name << ": chi-square " << chi0 << " (first), " << chi1 << " (second, " << second_n << " draws)");
    }
}

TEST_CASE("speculative: greedy acceptance from the rows' ids equals accept_drafts on the rows", "[speculative]") {
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<int> small(-2, 2); // integer logits: ties everywhere
    size_t all = 0, none = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        const size_t V = iter % 2 ? 7 : 40, K = 1 + size_t(iter % 5);
        std::vector<float> rows((K + 1) * V);
        for (float& x : rows) x = iter % 3 ? float(small(rng)) : std::normal_distribution<float>(0, 1)(rng);
        if (iter % 11 == 0) rows[V] = std::nanf(""); // a NaN first value of row 1 is its greedy pick
        if (iter % 13 == 0) rows[2 * V - 1] = std::nanf("");
        const std::vector<int32_t> ids = greedy_argmax_rows(rows, V);
        REQUIRE(ids.size() == K + 1);
        // Drafts: the greedy picks up to a random point (all, none or some), then a wrong id.
        const size_t right = size_t(iter) % (K + 1);
        std::vector<int32_t> drafts;
        for (size_t j = 0; j < K; ++j) drafts.push_back(j < right ? ids[j] : (ids[j] + 1 + iter % 3) % int32_t(V));
        std::vector<float> work = rows;
        const DraftAcceptance want = accept_drafts(work, V, drafts, {}, {});
        const DraftAcceptance got = accept_greedy_ids(ids, drafts);
        INFO("iter " << iter << " V " << V << " K " << K);
        CHECK(got.accepted == want.accepted);
        CHECK(got.next_token == want.next_token);
        CHECK(got.accepted == right);
        all += got.accepted == K;
        none += got.accepted == 0;
    }
    CHECK(all > 100);
    CHECK(none > 100);
    // The greedy pick is argmax_token: the lowest id of the maximum; a NaN first value wins.
    const std::vector<float> tie{1, 3, 3, 2, std::nanf(""), 0, 3, -1};
    CHECK(greedy_argmax_rows(tie, 4) == std::vector<int32_t>{1, 0});
    CHECK(argmax_token(tie) == 1);
    CHECK(argmax_token(std::vector<float>{std::nanf(""), 5, 6}) == 0);
    CHECK_THROWS_WITH(greedy_argmax_rows(tie, 3), Catch::Contains("speculative: 8 logits are not rows"));
    CHECK_THROWS_WITH(accept_greedy_ids(std::vector<int32_t>{1, 2}, std::vector<int32_t>{1, 2}),
                      Catch::Contains("speculative: 2 greedy ids for 2 drafts"));
}

TEST_CASE("speculative: the greedy fast path is greedy with nothing else reading the rows", "[speculative]") {
    SamplingParams p;
    CHECK(greedy_fast_path(p, false, false, 0));
    CHECK_FALSE(greedy_fast_path(p, true, false, 0));  // a constraint masks the rows
    CHECK_FALSE(greedy_fast_path(p, false, true, 0));  // logprobs read them
    CHECK_FALSE(greedy_fast_path(p, false, false, 2)); // top logprobs too
    SamplingParams t = p, bias = p, pen = p, rep = p, freq = p;
    t.temperature = 0.7f;
    bias.logit_bias = {{3, 1.0f}};
    pen.presence_penalty = 0.2f;
    rep.repetition_penalty = 1.1f;
    freq.frequency_penalty = 0.1f;
    for (const SamplingParams& q : {t, bias, pen, rep, freq}) CHECK_FALSE(greedy_fast_path(q, false, false, 0));
}
