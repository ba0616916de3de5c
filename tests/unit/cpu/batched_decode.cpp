// ninfer tests - a batched decode step over several lanes equals each lane decoded alone.
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("batched_decode: a batch of lanes equals single-lane decodes", "[batched_decode]") {
    for (bool moe : {false, true}) {
        const ModelConfig c = tiny_config(moe);
        auto model = InMemoryModel::random(c, {.seed = 21});
        const ModelWeights w = model->weights();
        const int lanes = 4;
        const MemoryPlan plan = tiny_plan(c, lanes);
        auto batched = make_cpu_backend(w, plan);
        auto single = make_cpu_backend(w, plan);
        // Different prompt lengths so lanes sit at different positions and page counts.
        const size_t lengths[lanes] = {5, 64, 70, 130};
        std::vector<int32_t> next(lanes);
        for (int l = 0; l < lanes; ++l) {
            const auto prompt = random_tokens(lengths[l], c.vocab_size, 100 + l);
            batched->prefill(l, prompt, LogitsOut::Last, nullptr);
            single->prefill(l, prompt, LogitsOut::Last, nullptr);
            next[l] = batched->sample_after_prefill(l, {}, {}, 0).token;
        }
        for (int step = 0; step < 6; ++step) {
            std::vector<DecodeStep> steps(lanes);
            for (int l = 0; l < lanes; ++l) {
                steps[l].lane = lanes - 1 - l; // order in the batch is not lane order
                steps[l].token = next[lanes - 1 - l];
                steps[l].n_top_logprobs = 3;
            }
            const std::vector<DecodeResult> got = batched->decode(steps);
            for (int l = 0; l < lanes; ++l) {
                const DecodeResult alone = single->decode(std::span(&steps[l], 1))[0];
                const int lane = steps[l].lane;
                INFO("moe " << moe << " step " << step << " lane " << lane);
                CHECK(relative_error(batched->last_logits(lane), single->last_logits(lane)) < 1e-5);
                CHECK(got[l].token == alone.token);
                CHECK(got[l].logprob == Approx(alone.logprob).margin(1e-4));
                REQUIRE(got[l].top_logprobs.size() == 3);
                CHECK(got[l].top_logprobs[0].first == got[l].token); // greedy picks the top one
                next[lane] = got[l].token;
            }
        }
    }
}

TEST_CASE("batched_decode: a lane twice in one step is refused", "[batched_decode]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c);
    const ModelWeights w = model->weights();
    auto backend = make_cpu_backend(w, tiny_plan(c, 2));
    std::vector<DecodeStep> steps(2);
    CHECK_THROWS_WITH(backend->decode(steps), Catch::Contains("appears twice"));
}
