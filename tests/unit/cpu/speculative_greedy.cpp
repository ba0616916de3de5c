// ninfer tests - draft -> verify -> accept rounds on the CPU backend give exactly the plain greedy
// tokens, whatever the drafts: an oracle drafter told the true tokens (everything accepted), an
// always-wrong one (nothing accepted), one right for a prefix of its drafts, and the MTP head, on
// dense and MoE models, K = 1..5, with lanes mixing speculating and plain steps.
#include "tests/unit/cpu/speculative_loop.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;


TEST_CASE("speculative_greedy: any drafts give the plain greedy tokens", "[speculative_greedy]") {
    for (bool moe : {false, true}) {
        const ModelConfig c = tiny_config(moe);
        auto model = InMemoryModel::random(c, {.seed = 51, .with_mtp = true});
        const ModelWeights w = model->weights();
        const size_t n = 40;
        auto b = make_cpu_backend(w, tiny_speculative_plan(c, 1, kMaxDraftTokens, true));
        REQUIRE(b->has_mtp());
        for (uint64_t p = 0; p < 3; ++p) {
            const auto prompt = random_tokens(5 + 31 * p, c.vocab_size, 60 + p);
            const std::vector<int32_t> want = plain_greedy(*b, 0, prompt, n);
            auto truth = [&](const std::vector<int32_t>& out, int k, int right) {
                std::vector<int32_t> d;
                for (int i = 0; i < k && out.size() + i < want.size(); ++i)
                    d.push_back(i < right ? want[out.size() + i]
                                          : (want[out.size() + i] + 1) % int32_t(c.vocab_size));
                return d;
            };
            for (int k = 1; k <= int(kMaxDraftTokens); ++k) {
                INFO("moe " << moe << " prompt " << p << " k " << k);
                RoundStats oracle, wrong, half, mtp;
                CHECK(speculative_greedy(*b, 0, prompt, n, k,
                                         [&](auto& out, int kk) { return truth(out, kk, kk); }, oracle) == want);
                CHECK(oracle.accepted == oracle.drafted); // the oracle is always right
                CHECK(oracle.rounds < n / 2 + 1);
                CHECK(speculative_greedy(*b, 0, prompt, n, k,
                                         [&](auto& out, int kk) { return truth(out, kk, 0); }, wrong) == want);
                CHECK(wrong.accepted == 0);
                CHECK(speculative_greedy(*b, 0, prompt, n, k,
                                         [&](auto& out, int kk) { return truth(out, kk, kk / 2); }, half) == want);
                CHECK((half.accepted > 0) == (k >= 2));
                CHECK(speculative_greedy(*b, 0, prompt, n, k, mtp_drafter(*b, 0), mtp) == want);
                CHECK(mtp.drafted > 0);
            }
        }
    }
}

TEST_CASE("speculative_greedy: lanes speculate beside plain lanes in one backend", "[speculative_greedy]") {
    const ModelConfig c = tiny_config(true);
    auto model = InMemoryModel::random(c, {.seed = 52, .with_mtp = true});
    const ModelWeights w = model->weights();
    const size_t n = 24;
    auto alone = make_cpu_backend(w, tiny_speculative_plan(c, 1, 3, true));
    auto shared = make_cpu_backend(w, tiny_speculative_plan(c, 3, 3, true));
    const auto p0 = random_tokens(40, c.vocab_size, 1), p1 = random_tokens(70, c.vocab_size, 2),
               p2 = random_tokens(9, c.vocab_size, 3);
    const auto want0 = plain_greedy(*alone, 0, p0, n), want1 = plain_greedy(*alone, 0, p1, n),
               want2 = plain_greedy(*alone, 0, p2, n);
    // Lanes 0 and 2 speculate with the MTP head in batched draft and verify steps, lane 1 decodes
    // plainly in between; every step's batch mixes them.
    std::vector<std::vector<int32_t>> out(3);
    const std::vector<std::span<const int32_t>> prompts{p0, p1, p2};
    for (int l = 0; l < 3; ++l) {
        shared->prefill(l, prompts[size_t(l)], LogitsOut::Last, nullptr);
        out[size_t(l)].push_back(shared->sample_after_prefill(l, {}, {}, 0).token);
    }
    const size_t V = c.vocab_size;
    while (out[0].size() < n || out[1].size() < n || out[2].size() < n) {
        const std::vector<DraftRequest> requests{{0, out[0].back(), 3}, {2, out[2].back(), 2}};
        const auto drafts = shared->draft_mtp(requests, nullptr);
        std::vector<std::vector<int32_t>> windows(2);
        std::vector<VerifyStep> steps;
        for (size_t i = 0; i < 2; ++i) {
            windows[i] = {requests[i].next_token};
            windows[i].insert(windows[i].end(), drafts[i].begin(), drafts[i].end());
        }
        steps = {{0, windows[0]}, {2, windows[1]}};
        std::vector<float> rows;
        shared->verify(steps, rows);
        size_t row = 0;
        for (size_t i = 0; i < 2; ++i) {
            const int lane = steps[i].lane;
            size_t m = 0;
            while (m < drafts[i].size() && argmax_row(rows.data() + (row + m) * V, V) == drafts[i][m])
                ++m;
            row += windows[i].size();
            shared->accept_verified(lane, uint32_t(m + 1));
            auto& o = out[size_t(lane)];
            o.insert(o.end(), drafts[i].begin(), drafts[i].begin() + long(m));
            o.push_back(shared->sample_after_prefill(lane, {}, {}, 0).token);
        }
        DecodeStep plain;
        plain.lane = 1;
        plain.token = out[1].back();
        out[1].push_back(shared->decode(std::span(&plain, 1))[0].token);
    }
    for (auto& o : out)
        o.resize(n);
    CHECK(out[0] == want0);
    CHECK(out[1] == want1);
    CHECK(out[2] == want2);
}
