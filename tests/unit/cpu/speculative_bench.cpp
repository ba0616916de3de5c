// ninfer tests - what a speculative round costs on the CPU backend, as multiples of a plain decode
// step (a benchmark, not an assert: it prints thread CPU time per call, one thread, at 512 tokens of
// context, and checks only that a fully accepted verify leaves the lane as long as it should be).
// Run: test_cpu "[speculative_bench]".
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <ctime>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

double thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

ModelConfig bench_config(bool moe) {
    ModelConfig c = tiny_config(moe);
    c.vocab_size = 4096;
    c.hidden_size = 256;
    c.head_dim = 128;
    c.mrope_section = {6, 5, 5}; // 32 rotary dims
    c.linear_key_head_dim = 64;
    c.linear_value_head_dim = 64;
    if (moe) {
        c.num_experts = 16;
        c.num_experts_per_tok = 4;
        c.moe_intermediate_size = 128;
        c.shared_expert_intermediate_size = 256;
    } else {
        c.intermediate_size = 768;
    }
    return c;
}

} // namespace

TEST_CASE("speculative round cost on the CPU backend", "[speculative_bench][!benchmark]") {
    for (bool moe : {false, true}) {
        const ModelConfig c = bench_config(moe);
        auto model = InMemoryModel::random(c, {.seed = 81, .with_mtp = true});
        const ModelWeights w = model->weights();
        auto b = make_cpu_backend(w, tiny_speculative_plan(c, 1, kMaxDraftTokens, true), {.threads = 1});
        const auto prompt = random_tokens(512, c.vocab_size, 1);
        b->prefill(0, prompt, LogitsOut::None, nullptr);
        const int reps = 4;
        DecodeStep step;
        double t0 = thread_cpu_us();
        for (int i = 0; i < reps; ++i) {
            step.token = int32_t(i + 1);
            b->decode(std::span(&step, 1));
        }
        const double decode_us = (thread_cpu_us() - t0) / reps;
        std::printf("%s, hidden %u, vocab %u, context 512: plain decode step %.0f us\n", moe ? "MoE" : "dense",
                    c.hidden_size, c.vocab_size, decode_us);
        std::printf("  K  draft(K)  verify(K+1)  round = draft + verify   (multiples of a plain step)\n");
        for (int k = 1; k <= int(kMaxDraftTokens); ++k) {
            double draft_us = 0, verify_us = 0;
            for (int i = 0; i < reps; ++i) {
                const uint32_t before = b->lane_length(0);
                t0 = thread_cpu_us();
                const auto drafts = b->draft_mtp(std::vector<DraftRequest>{{0, int32_t(i + 7), k}}, nullptr)[0];
                const double t1 = thread_cpu_us();
                std::vector<int32_t> window{int32_t(i + 7)};
                window.insert(window.end(), drafts.begin(), drafts.end());
                std::vector<float> rows;
                b->verify(std::vector<VerifyStep>{{0, window}}, rows);
                b->accept_verified(0, uint32_t(window.size())); // as if every draft were right
                verify_us += thread_cpu_us() - t1;
                draft_us += t1 - t0;
                REQUIRE(b->lane_length(0) == before + window.size());
            }
            draft_us /= reps, verify_us /= reps;
            std::printf("  %d  %8.2f  %11.2f  %9.2f\n", k, draft_us / decode_us, verify_us / decode_us,
                        (draft_us + verify_us) / decode_us);
        }
    }
}
