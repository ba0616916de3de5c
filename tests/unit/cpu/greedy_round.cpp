// ninfer tests - Backend::verify_accept_greedy on the CPU backend (backend.h): one greedy round
// gives the ids, kept counts and next drafts of verify_greedy + accept_greedy_ids + accept_verified
// + draft_mtp, and leaves every lane as those calls do; a smaller keep afterwards (a stop inside the
// window) leaves the lane exactly as keeping that many straight after the verify: the same lane
// image, drafts and next decode, for every smaller keep.
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

constexpr uint32_t kK = 4;
constexpr int kLanes = 3;

void check_same_image(const LaneImage& a, const LaneImage& b) {
    CHECK(a.tokens == b.tokens);
    REQUIRE(a.sections.size() == b.sections.size());
    for (size_t i = 0; i < a.sections.size(); ++i) {
        INFO("section " << i);
        CHECK(a.sections[i].tag == b.sections[i].tag);
        CHECK(a.sections[i].bytes == b.sections[i].bytes);
    }
}

// Lane l's window: the true greedy continuation with its draft `wrong_at` replaced (kK + 1: none).
std::vector<int32_t> window_of(const std::vector<int32_t>& truth, uint32_t wrong_at, uint32_t vocab) {
    std::vector<int32_t> w(truth.begin(), truth.begin() + kK + 1);
    if (wrong_at <= kK) w[wrong_at] = (w[wrong_at] + 1) % int32_t(vocab);
    return w;
}

struct Lanes {
    std::unique_ptr<Backend> b;
    std::vector<std::vector<int32_t>> windows;
};

// A backend whose lanes hold their prompts; truths: each lane's greedy continuation (kK + 3 ids).
Lanes prefilled(const ModelWeights& w, const MemoryPlan& plan, std::vector<std::vector<int32_t>>* truths) {
    Lanes out{make_cpu_backend(w, plan), {}};
    const uint32_t V = w.config.vocab_size;
    for (int l = 0; l < kLanes; ++l) {
        const auto prompt = random_tokens(20 + 7 * size_t(l), V, 300 + uint64_t(l));
        out.b->prefill(l, prompt, LogitsOut::Last, nullptr);
        if (!truths) continue;
        std::vector<int32_t> t{out.b->sample_after_prefill(l, {}, {}, 0).token};
        auto plain = make_cpu_backend(w, plan);
        plain->prefill(0, prompt, LogitsOut::Last, nullptr);
        while (t.size() < kK + 3) {
            DecodeStep s;
            s.token = t.back();
            t.push_back(plain->decode(std::span(&s, 1))[0].token);
        }
        truths->push_back(t);
    }
    return out;
}

} // namespace

TEST_CASE("greedy_round: one round equals verify_greedy, accept_verified and draft_mtp; a smaller keep after it "
          "equals that keep at once",
          "[greedy_round]") {
    for (bool moe : {false, true}) {
        const ModelConfig c = tiny_config(moe);
        auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
        const ModelWeights w = model->weights();
        const MemoryPlan plan = tiny_speculative_plan(c, kLanes, kK, true);
        std::vector<std::vector<int32_t>> truths;
        prefilled(w, plan, &truths);
        // Lane 0 accepts every draft, lane 1 two of them, lane 2 none.
        const uint32_t wrong_at[kLanes] = {kK + 1, 3, 1};
        for (int next_k : {0, 3}) {
            INFO("moe " << moe << " next_k " << next_k);
            Lanes fused = prefilled(w, plan, nullptr), ref = prefilled(w, plan, nullptr);
            std::vector<GreedyRoundStep> steps;
            std::vector<VerifyStep> verify;
            std::vector<std::vector<int32_t>> windows;
            for (int l = 0; l < kLanes; ++l) windows.push_back(window_of(truths[size_t(l)], wrong_at[l], c.vocab_size));
            for (int l = 0; l < kLanes; ++l) {
                steps.push_back({l, windows[size_t(l)], next_k, 0});
                verify.push_back({l, windows[size_t(l)]});
            }
            GreedyRoundResult got;
            fused.b->verify_accept_greedy(steps, got);
            std::vector<float> rows;
            std::vector<int32_t> ids;
            ref.b->verify_greedy(verify, std::vector<uint8_t>(kLanes, 0), rows, ids);
            CHECK(got.ids == ids);
            REQUIRE(got.n_keep.size() == size_t(kLanes));
            REQUIRE(got.drafts.size() == size_t(kLanes));
            for (int l = 0; l < kLanes; ++l) {
                INFO("lane " << l);
                const std::span<const int32_t> lane_ids = std::span(ids).subspan(size_t(l) * (kK + 1), kK + 1);
                const DraftAcceptance a = accept_greedy_ids(lane_ids, std::span(windows[size_t(l)]).subspan(1));
                CHECK(got.n_keep[size_t(l)] == std::min(wrong_at[l], kK + 1));
                CHECK(got.n_keep[size_t(l)] == a.accepted + 1);
                ref.b->accept_verified(l, a.accepted + 1);
                std::vector<int32_t> want;
                if (next_k > 0) want = ref.b->draft_mtp(std::vector<DraftRequest>{{l, a.next_token, next_k}}, nullptr)[0];
                CHECK(got.drafts[size_t(l)] == want);
                CHECK(a.next_token == truths[size_t(l)][a.accepted + 1]);
                check_same_image(fused.b->save_lane(l), ref.b->save_lane(l));
                CHECK(fused.b->last_logits(l) == ref.b->last_logits(l));
            }
        }
        // Lane 0 kept every token: keeping fewer afterwards equals keeping them at once.
        for (uint32_t keep = 1; keep <= kK; ++keep) {
            INFO("moe " << moe << " keep " << keep);
            Lanes fused = prefilled(w, plan, nullptr), ref = prefilled(w, plan, nullptr);
            const std::vector<int32_t> window = window_of(truths[0], kK + 1, c.vocab_size);
            GreedyRoundResult got;
            fused.b->verify_accept_greedy(std::vector<GreedyRoundStep>{{0, window, 3, 0}}, got);
            REQUIRE(got.n_keep[0] == kK + 1);
            fused.b->accept_verified(0, keep);
            CHECK_THROWS(fused.b->accept_verified(0, keep + 1)); // the window holds `keep` tokens now
            std::vector<float> rows;
            ref.b->verify(std::vector<VerifyStep>{{0, window}}, rows);
            ref.b->accept_verified(0, keep);
            check_same_image(fused.b->save_lane(0), ref.b->save_lane(0));
            CHECK(fused.b->last_logits(0) == ref.b->last_logits(0));
            const int32_t next = truths[0][keep];
            const std::vector<DraftRequest> q{{0, next, 3}};
            CHECK(fused.b->draft_mtp(q, nullptr) == ref.b->draft_mtp(q, nullptr));
            DecodeStep s;
            s.token = next;
            CHECK(fused.b->decode(std::span(&s, 1))[0].token == ref.b->decode(std::span(&s, 1))[0].token);
            CHECK(fused.b->last_logits(0) == ref.b->last_logits(0));
        }
    }
}

TEST_CASE("greedy_round: forced keeps, and a keep past the window is refused", "[greedy_round]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
    const ModelWeights w = model->weights();
    const MemoryPlan plan = tiny_speculative_plan(c, kLanes, kK, true);
    Lanes a = prefilled(w, plan, nullptr);
    const auto window = random_tokens(kK + 1, c.vocab_size, 9);
    GreedyRoundResult got;
    a.b->verify_accept_greedy(std::vector<GreedyRoundStep>{{0, window, 2, 3}, {1, std::span(window).first(2), 0, 0}}, got);
    REQUIRE(got.n_keep.size() == 2);
    CHECK(got.n_keep[0] == 3); // forced, whatever the ids say
    CHECK(a.b->lane_length(0) == 20 + 3);
    CHECK(got.drafts[0].size() == 2);
    CHECK(got.drafts[1].empty());
    CHECK_THROWS_AS(a.b->verify_accept_greedy(std::vector<GreedyRoundStep>{{2, window, 0, kK + 2}}, got), ninfer::Error);
}
