// ninfer tests - the verify step (the token to append plus K drafts of a lane in one forward) and
// its rollback: every window row's logits equal token-by-token decode, and keeping the first j + 1
// tokens leaves the lane as a fresh run of those tokens (GDN conv + recurrent state from the
// per-token snapshots, the KV length rewound), for every j.
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

std::vector<float> as_floats(std::span<const uint8_t> bytes) {
    std::vector<float> f(bytes.size() / sizeof(float));
    std::memcpy(f.data(), bytes.data(), f.size() * sizeof(float));
    return f;
}

// Feeds tokens one decode step at a time; returns each step's logits.
std::vector<std::vector<float>> decode_each(Backend& b, int lane, std::span<const int32_t> tokens) {
    std::vector<std::vector<float>> out;
    for (int32_t t : tokens) {
        DecodeStep step;
        step.lane = lane;
        step.token = t;
        b.decode(std::span(&step, 1));
        out.push_back(b.last_logits(lane));
    }
    return out;
}

} // namespace

TEST_CASE("verify_rollback: window rows equal decode, keeping j+1 equals a fresh run to j", "[verify_rollback]") {
    for (bool moe : {false, true}) {
        const ModelConfig c = tiny_config(moe);
        auto model = InMemoryModel::random(c, {.seed = 41});
        const ModelWeights w = model->weights();
        const uint32_t K = 4, V = c.vocab_size;
        // f32 KV, so the lane images compare as floats. The prompt ends at 62: the window crosses
        // a KV page (64 tokens) and a GDN chunk boundary.
        const MemoryPlan plan = tiny_speculative_plan(c, 2, K, false);
        auto spec = make_cpu_backend(w, plan);
        auto fresh = make_cpu_backend(w, plan);
        const auto prompt = random_tokens(62, V, 3);
        const auto window = random_tokens(K + 1, V, 4);
        const auto after = random_tokens(3, V, 5);
        for (uint32_t keep = 1; keep <= K + 1; ++keep) {
            INFO("moe " << moe << " keep " << keep);
            spec->reset_lane(0);
            fresh->reset_lane(1);
            spec->prefill(0, prompt, LogitsOut::None, nullptr);
            fresh->prefill(1, prompt, LogitsOut::None, nullptr);
            std::vector<float> rows;
            spec->verify(std::vector<VerifyStep>{{0, window}}, rows);
            REQUIRE(rows.size() == size_t(K + 1) * V);
            CHECK(spec->lane_length(0) == prompt.size() + K + 1);
            const auto decoded = decode_each(*fresh, 1, std::span(window).first(keep));
            for (uint32_t j = 0; j < keep; ++j) {
                const std::vector<float> row(rows.begin() + long(j) * V, rows.begin() + long(j + 1) * V);
                CHECK(relative_error(row, decoded[j]) < 1e-5);
            }
            spec->accept_verified(0, keep);
            CHECK(spec->lane_length(0) == prompt.size() + keep);
            CHECK(relative_error(spec->last_logits(0), fresh->last_logits(1)) < 1e-5);
            const LaneImage a = spec->save_lane(0), b = fresh->save_lane(1);
            CHECK(a.tokens == b.tokens);
            CHECK(relative_error(as_floats(a.gdn()), as_floats(b.gdn())) < 1e-5);
            CHECK(relative_error(as_floats(a.kv()), as_floats(b.kv())) < 1e-5);
            // Both go on alike: the dropped tokens left nothing behind.
            const auto next_a = decode_each(*spec, 0, after), next_b = decode_each(*fresh, 1, after);
            for (size_t i = 0; i < after.size(); ++i)
                CHECK(relative_error(next_a[i], next_b[i]) < 1e-5);
        }
    }
}

TEST_CASE("verify_rollback: the rollback is the snapshot of the kept token, not a neighbour", "[verify_rollback]") {
    // Guards the test above against a tolerance loose enough to hide an off-by-one snapshot: the
    // GDN states after consecutive window tokens differ by far more than 1e-5.
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c, {.seed = 41});
    const ModelWeights w = model->weights();
    auto b = make_cpu_backend(w, tiny_speculative_plan(c, 1, 2, false));
    const auto prompt = random_tokens(20, c.vocab_size, 3);
    const auto window = random_tokens(3, c.vocab_size, 4);
    std::vector<std::vector<float>> states;
    for (uint32_t keep = 1; keep <= 3; ++keep) {
        b->reset_lane(0);
        b->prefill(0, prompt, LogitsOut::None, nullptr);
        std::vector<float> rows;
        b->verify(std::vector<VerifyStep>{{0, window}}, rows);
        b->accept_verified(0, keep);
        states.push_back(as_floats(b->save_lane(0).gdn()));
    }
    CHECK(relative_error(states[0], states[1]) > 1e-3);
    CHECK(relative_error(states[1], states[2]) > 1e-3);
}

TEST_CASE("verify_rollback: bad windows and accepts are refused", "[verify_rollback]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c);
    const ModelWeights w = model->weights();
    const auto tokens = random_tokens(4, c.vocab_size, 1);
    std::vector<float> rows;
    auto plain = make_cpu_backend(w, tiny_plan(c, 1));
    CHECK_THROWS_WITH(plain->verify(std::vector<VerifyStep>{{0, tokens}}, rows),
                      Catch::Contains("does not verify"));
    CHECK_FALSE(plain->has_mtp());
    CHECK_THROWS_WITH(plain->draft_mtp(std::vector<DraftRequest>{{0, 1, 1}}, nullptr),
                      Catch::Contains("no MTP head"));

    auto b = make_cpu_backend(w, tiny_speculative_plan(c, 2, 2, false));
    b->prefill(0, tokens, LogitsOut::None, nullptr);
    CHECK_THROWS_WITH(b->accept_verified(0, 1), Catch::Contains("no open verify window"));
    CHECK_THROWS_WITH(b->verify(std::vector<VerifyStep>{{0, tokens}}, rows), Catch::Contains("allows 1..3"));
    CHECK_THROWS_WITH(b->verify(std::vector<VerifyStep>{{0, std::span(tokens).first(2)}, {0, std::span(tokens).first(1)}}, rows),
                      Catch::Contains("appears twice"));
    b->verify(std::vector<VerifyStep>{{0, std::span(tokens).first(3)}}, rows);
    CHECK_THROWS_WITH(b->accept_verified(0, 0), Catch::Contains("1..3"));
    CHECK_THROWS_WITH(b->accept_verified(0, 4), Catch::Contains("1..3"));
    // The next step that changes the lane keeps the whole window.
    DecodeStep step;
    step.token = 5;
    b->decode(std::span(&step, 1));
    CHECK(b->lane_length(0) == 4 + 3 + 1);
    CHECK_THROWS_WITH(b->accept_verified(0, 1), Catch::Contains("no open verify window"));
}
