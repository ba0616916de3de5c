// ninfer tests - the reference sampler: argmax ties, penalties, top-k/top-p/min-p cuts, seeded draws.
#include "core/backend/sampling.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <vector>

using namespace ninfer::core;

static int32_t draw(std::vector<float> logits, const SamplingParams& p,
                    std::vector<int32_t> generated = {}) {
    return sample_token(logits, p, generated);
}

TEST_CASE("sampling: greedy is argmax with ties to the lower id", "[sampling]") {
    SamplingParams p; // temperature 0
    CHECK(draw({0.f, 3.f, 1.f, 3.f}, p) == 1);
    CHECK(draw({-5.f, -4.f}, p) == 1);
    p.logit_bias = {{0, 10.f}};
    CHECK(draw({0.f, 3.f}, p) == 0);
}

TEST_CASE("sampling: penalties apply to generated ids", "[sampling]") {
    SamplingParams p;
    p.presence_penalty = 1.5f;
    CHECK(draw({2.f, 1.f}, p, {0}) == 1); // 2 - 1.5 < 1
    p.presence_penalty = 0;
    p.frequency_penalty = 0.4f;
    CHECK(draw({2.f, 1.f}, p, {0, 0}) == 0);   // 2 - 0.8 > 1
    CHECK(draw({2.f, 1.f}, p, {0, 0, 0}) == 1); // 2 - 1.2 < 1
    p.frequency_penalty = 0;
    p.repetition_penalty = 2.5f;
    CHECK(draw({2.f, 1.f}, p, {0}) == 1); // 2 / 2.5 < 1
}

TEST_CASE("sampling: same seed and step draw the same token; draws follow the probabilities", "[sampling]") {
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = 42;
    std::map<int32_t, int> counts;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
        p.step = uint64_t(i);
        const int32_t t = draw(logits, p);
        CHECK(t == draw(logits, p));
        ++counts[t];
    }
    CHECK(counts[0] / double(n) == Approx(0.5).margin(0.02));
    CHECK(counts[1] / double(n) == Approx(0.3).margin(0.02));
    CHECK(counts[2] / double(n) == Approx(0.2).margin(0.02));
    for (uint64_t s = 0; s < 1000; ++s) {
        const double u = sampling_uniform(7, s);
        CHECK(u >= 0.0);
        CHECK(u < 1.0);
    }
}

TEST_CASE("sampling: top-k, top-p and min-p cut the candidates", "[sampling]") {
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
    SamplingParams p;
    p.temperature = 1.0f;
    auto support = [&](SamplingParams q) {
        std::map<int32_t, int> seen;
        for (uint64_t s = 0; s < 3000; ++s) {
            q.step = s;
            ++seen[draw(logits, q)];
        }
        return seen.size();
    };
    CHECK(support(p) == 4);
    SamplingParams k = p;
    k.top_k = 1;
    CHECK(support(k) == 1);
    k.top_k = 2;
    CHECK(support(k) == 2);
    SamplingParams tp = p;
    tp.top_p = 0.75f; // 0.5 + 0.3 reaches it
    CHECK(support(tp) == 2);
    SamplingParams mp = p;
    mp.min_p = 0.25f; // keeps p >= 0.125
    CHECK(support(mp) == 3);
}
