// ninfer tests - the fast sampler picks exactly the token of the original full-sort algorithm
// (kept in sampling_reference.h) over many random logits, parameters, penalties and seeds.
#include "core/backend/sampling.h"
#include "tests/unit/backend/sampling_reference.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace ninfer::core;

namespace {

// Logits with the shapes that stress the head/tail split: narrow (all candidates in the head),
// wide (most in the tail), quantized (many ties, +0 and -0), and banned (-inf) entries.
std::vector<float> random_logits(std::mt19937_64& rng, size_t vocab) {
    const double sigmas[] = {0.3, 2.0, 8.0, 40.0};
    const double sigma = sigmas[rng() % 4];
    std::normal_distribution<double> normal(0.0, sigma);
    const bool quantized = rng() % 3 == 0;
    std::vector<float> l(vocab);
    for (float& v : l) {
        v = float(normal(rng));
        if (quantized)
            v = std::round(v * 2.0f) / 2.0f;
        if (v == 0.0f && rng() % 2)
            v = -0.0f;
    }
    if (rng() % 4 == 0)
        for (int i = 0; i < 5; ++i)
            l[rng() % vocab] = -std::numeric_limits<float>::infinity();
    if (rng() % 8 == 0) // a heavy favourite, far above the rest
        l[rng() % vocab] = float(sigma * 60.0);
    return l;
}

SamplingParams random_params(std::mt19937_64& rng, size_t vocab) {
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    SamplingParams p;
    p.temperature = rng() % 10 == 0 ? 0.0f : 0.05f + 2.0f * unit(rng);
    const int32_t top_ks[] = {0, 0, 1, 2, 40, 1000, 3000, int32_t(vocab), int32_t(vocab) + 7};
    p.top_k = top_ks[rng() % 9];
    const float top_ps[] = {1.0f, 1.0f, 0.95f, 0.5f, 0.9999f, 1e-6f};
    p.top_p = rng() % 4 == 0 ? unit(rng) : top_ps[rng() % 6];
    const float min_ps[] = {0.0f, 0.0f, 0.05f, 1e-6f, 1e-30f, 0.9f};
    p.min_p = min_ps[rng() % 6];
    if (rng() % 2) {
        p.presence_penalty = unit(rng) * 2.0f - 0.5f;
        p.frequency_penalty = unit(rng) - 0.2f;
        p.repetition_penalty = rng() % 2 ? 1.0f : 0.5f + unit(rng) * 1.5f;
    }
    for (int i = int(rng() % 4); i > 0; --i) {
        const float biases[] = {5.0f, -3.0f, -std::numeric_limits<float>::infinity(), 100.0f};
        p.logit_bias.push_back({int32_t(rng() % (vocab + 2)) - 1, biases[rng() % 4]});
    }
    p.seed = rng();
    p.step = rng() % 100000;
    return p;
}

std::vector<int32_t> random_generated(std::mt19937_64& rng, size_t vocab) {
    std::vector<int32_t> g(rng() % 64);
    for (int32_t& id : g) // repeats, and a few ids outside the vocabulary
        id = rng() % 3 == 0 ? int32_t(rng() % 8) : int32_t(rng() % (vocab + 4)) - 2;
    return g;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_case(std::mt19937_64& rng, size_t vocab) {
    std::vector<float> fast = random_logits(rng, vocab);
    std::vector<float> slow = fast;
    const SamplingParams p = random_params(rng, vocab);
    const std::vector<int32_t> generated = random_generated(rng, vocab);
    const int32_t want = ninfer::test::reference_sample_token(slow, p, generated);
    const int32_t got = sample_token(fast, p, generated);
    INFO("vocab " << vocab << " T " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p
                  << " min_p " << p.min_p << " seed " << p.seed << " step " << p.step);
    REQUIRE(got == want);
    REQUIRE(same_bits(fast, slow)); // the in-place changes (bias, penalties, 1/T) are the same too
}

} // namespace

TEST_CASE("sampling_exact: small and medium vocabularies, random everything", "[sampling_exact]") {
    std::mt19937_64 rng(20240611);
    const size_t vocabs[] = {1, 2, 3, 17, 100, 2047, 2049, 5000, 20000};
    for (int i = 0; i < 4000; ++i)
        check_case(rng, vocabs[size_t(i) % 9]);
}

TEST_CASE("sampling_exact: the Qwen3 vocabulary (151,936)", "[sampling_exact]") {
    std::mt19937_64 rng(7);
    for (int i = 0; i < 60; ++i)
        check_case(rng, 151936);
}

TEST_CASE("sampling_exact: a flat distribution where top_p needs most of the vocabulary", "[sampling_exact]") {
    std::mt19937_64 rng(99);
    std::uniform_real_distribution<float> narrow(-0.05f, 0.05f);
    for (int i = 0; i < 20; ++i) {
        std::vector<float> fast(151936);
        for (float& v : fast)
            v = narrow(rng);
        std::vector<float> slow = fast;
        SamplingParams p;
        p.temperature = 0.7f;
        p.top_p = i % 2 ? 0.95f : 1.0f;
        p.min_p = i % 4 == 3 ? 0.99f : 0.0f;
        p.seed = uint64_t(i);
        p.step = uint64_t(i) * 31;
        CHECK(sample_token(fast, p, {}) == ninfer::test::reference_sample_token(slow, p, {}));
    }
}

TEST_CASE("sampling_exact: every candidate banned or all equal", "[sampling_exact]") {
    for (float fill : {-std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 3.0f}) {
        for (int32_t top_k : {0, 1, 5}) {
            std::vector<float> fast(4096, fill);
            std::vector<float> slow = fast;
            SamplingParams p;
            p.temperature = 0.8f;
            p.top_k = top_k;
            p.seed = 5;
            CHECK(sample_token(fast, p, {}) == ninfer::test::reference_sample_token(slow, p, {}));
        }
    }
}
