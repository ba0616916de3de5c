// ninfer tests - allowed-token bitsets in the reference sampler (core/backend/token_constraint.h):
// disallowed ids are never drawn, greedy or sampled; the mask applies before logit_bias, penalties,
// temperature and top-k/top-p, so a bias cannot revive a disallowed id and top_k counts allowed
// ids only; an all-allowed mask changes nothing; sampling_candidates keeps the same support.
#include "core/backend/sampling.h"
#include "core/backend/token_constraint.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace ninfer::core;

namespace {

std::vector<float> random_logits(size_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.f, 3.f);
    std::vector<float> l(vocab);
    for (float& x : l) x = d(rng);
    return l;
}

std::vector<uint32_t> mask_of(uint32_t vocab, const std::vector<int32_t>& ids) {
    std::vector<uint32_t> m(token_mask_words(vocab), 0u);
    for (int32_t id : ids) token_mask_set(m, id, true);
    return m;
}

int32_t draw(std::vector<float> logits, const SamplingParams& p, std::span<const int32_t> generated = {}) {
    return sample_token(logits, p, generated);
}

} // namespace

TEST_CASE("token masks: set, test, count and apply", "[token_constraint]") {
    const uint32_t vocab = 70; // not a multiple of 32: the last word is partial
    std::vector<uint32_t> m = mask_of(vocab, {0, 31, 32, 69});
    CHECK(m.size() == 3);
    CHECK(token_mask_count(m, vocab) == 4);
    CHECK(token_mask_test(m, 31));
    CHECK_FALSE(token_mask_test(m, 30));
    CHECK_FALSE(token_mask_test(m, -1));
    CHECK_FALSE(token_mask_test(m, 96)); // past the bitset
    m[2] |= 0xffff0000u;                 // bits past the vocabulary are not counted
    CHECK(token_mask_count(m, vocab) == 4);
    token_mask_set(m, 31, false);
    CHECK(token_mask_count(m, vocab) == 3);
    std::vector<float> logits(vocab, 1.f);
    apply_token_mask(logits, m);
    for (uint32_t t = 0; t < vocab; ++t) CHECK((logits[t] == 1.f) == (t == 0 || t == 32 || t == 69));
    std::vector<float> longer(100, 1.f); // ids past the bitset are disallowed
    apply_token_mask(longer, mask_of(64, {3}));
    CHECK(std::isinf(longer[99]));
    CHECK(longer[3] == 1.f);
}

TEST_CASE("sampling draws only allowed tokens, greedy and sampled, with every option", "[token_constraint]") {
    const uint32_t vocab = 1000;
    const std::vector<int32_t> allowed = {5, 17, 400, 401, 999};
    const std::vector<uint32_t> m = mask_of(vocab, allowed);
    for (uint64_t seed = 0; seed < 200; ++seed) {
        std::vector<float> l = random_logits(vocab, seed);
        SamplingParams p;
        p.allowed_tokens = m;
        p.seed = seed;
        p.step = seed * 3;
        p.temperature = seed % 4 == 0 ? 0.f : 0.3f + float(seed % 5);
        p.top_k = int32_t(seed % 3) * 2;
        p.top_p = seed % 2 ? 0.9f : 1.f;
        p.min_p = seed % 7 == 0 ? 0.05f : 0.f;
        p.presence_penalty = seed % 3 == 0 ? 1.f : 0.f;
        p.repetition_penalty = seed % 5 == 0 ? 1.3f : 1.f;
        const std::vector<int32_t> generated = {17, 17, 400};
        const int32_t t = draw(l, p, generated);
        INFO("seed " << seed);
        CHECK(token_mask_test(m, t));
        // The greedy choice is the best allowed logit after bias and penalties.
        if (p.is_greedy() && p.presence_penalty == 0 && p.repetition_penalty == 1.f) {
            int32_t best = allowed[0];
            for (int32_t a : allowed) best = l[size_t(a)] > l[size_t(best)] ? a : best;
            CHECK(t == best);
        }
    }
}

TEST_CASE("the mask applies before logit_bias and top_k", "[token_constraint]") {
    const uint32_t vocab = 300;
    std::vector<float> l(vocab, 0.f);
    l[7] = 5.f;   // allowed
    l[8] = 9.f;   // allowed, the best
    l[100] = 50.f; // disallowed, the model's favourite
    const std::vector<uint32_t> m = mask_of(vocab, {7, 8});
    SamplingParams p;
    p.allowed_tokens = m;
    CHECK(draw(l, p) == 8);
    p.logit_bias = {{100, 100.f}}; // a bias cannot revive a disallowed id
    CHECK(draw(l, p) == 8);
    p.logit_bias = {{7, 10.f}}; // a bias among allowed ids still counts
    CHECK(draw(l, p) == 7);
    p.logit_bias.clear();
    p.temperature = 1.f;
    p.top_k = 1; // top_k counts allowed ids: the best allowed, not the disallowed favourite
    for (uint64_t seed = 0; seed < 20; ++seed) {
        p.seed = seed;
        CHECK(draw(l, p) == 8);
    }
    p.top_k = 0;
    int n7 = 0;
    for (uint64_t seed = 0; seed < 400; ++seed) {
        p.seed = seed;
        const int32_t t = draw(l, p);
        CHECK((t == 7 || t == 8));
        n7 += t == 7;
    }
    CHECK(n7 > 0); // e^-4 of the mass: about 7 of 400
    CHECK(n7 < 40);
}

TEST_CASE("an all-allowed mask changes no draw; candidates keep the mask's support", "[token_constraint]") {
    const uint32_t vocab = 517;
    std::vector<uint32_t> all(token_mask_words(vocab), ~0u);
    const std::vector<uint32_t> some = mask_of(vocab, {1, 2, 3, 200, 516});
    for (uint64_t seed = 0; seed < 50; ++seed) {
        const std::vector<float> l = random_logits(vocab, 1000 + seed);
        SamplingParams p;
        p.temperature = 0.7f;
        p.top_p = 0.95f;
        p.seed = seed;
        const int32_t free = draw(l, p);
        p.allowed_tokens = all;
        CHECK(draw(l, p) == free);
        p.allowed_tokens = some;
        std::vector<float> work = l;
        const SamplingCandidates c = sampling_candidates(work, p, {});
        REQUIRE_FALSE(c.ids.empty());
        for (int32_t id : c.ids) CHECK(token_mask_test(some, id));
    }
}
