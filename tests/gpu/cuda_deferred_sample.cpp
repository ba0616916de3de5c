// ninfer GPU tests - deferred sampling (Backend::decode_begin_forward + decode_sample, issue 32):
// the scheduler begins a constrained lane's step before the step holding its previous sample has
// ended, and gives the allowed-token masks once that sample is known. The ids, logprobs and lane
// state must equal decode() one step at a time with the same masks, for greedy and seeded rows,
// a penalised row (its id comes from the host) and a free row in the same batch.
#include "core/backend/token_constraint.h"
#include "core/cuda/cuda_backend.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::core;
using namespace ninfer::test;

namespace {

constexpr int kRows = 4, kSteps = 10;

// Rows 0..2 are constrained: the next id must share the previous id's residue mod 4 (a mask that
// needs the previous sample). Row 3 is free.
std::vector<uint32_t> mask_after(int row, int32_t previous, uint32_t vocab) {
    if (row == 3) return {};
    std::vector<uint32_t> words(token_mask_words(vocab), 0u);
    for (int32_t id = 0; id < int32_t(vocab); ++id)
        if (id % 4 == previous % 4) token_mask_set(words, id, true);
    return words;
}

} // namespace

TEST_CASE("cuda backend: deferred sampling equals one step at a time with the same masks",
          "[cuda_deferred_sample]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        INFO(fixture);
        auto m = load(fixture, "bf16");
        auto gpu = make_cuda_backend(m->weights, m->plan);
        const uint32_t vocab = gpu->vocab_size();
        const auto [start, first] = prefill_start(*gpu, fixture, 40);

        // Reference: decode() one step at a time on lanes 0..3.
        std::vector<std::vector<DecodeResult>> ref(kRows), got(kRows);
        std::vector<std::vector<int32_t>> gen(kRows);
        for (int r = 0; r < kRows; ++r) gpu->restore_lane(r, start);
        std::vector<int32_t> next(kRows, first);
        for (int k = 0; k < kSteps; ++k) {
            std::vector<DecodeStep> st(kRows);
            std::vector<std::vector<uint32_t>> masks(kRows);
            for (int r = 0; r < kRows; ++r) {
                st[size_t(r)] = step(r, next[size_t(r)]);
                st[size_t(r)].sampling = pipeline_row_params(r);
                st[size_t(r)].sampling.step = gen[size_t(r)].size();
                masks[size_t(r)] = mask_after(r, next[size_t(r)], vocab);
                st[size_t(r)].sampling.allowed_tokens = masks[size_t(r)];
                st[size_t(r)].generated = gen[size_t(r)];
            }
            const std::vector<DecodeResult> res = gpu->decode(st);
            for (int r = 0; r < kRows; ++r) {
                ref[size_t(r)].push_back(res[size_t(r)]);
                next[size_t(r)] = res[size_t(r)].token;
                gen[size_t(r)].push_back(next[size_t(r)]);
            }
        }

        // Deferred on lanes 4..7: step k+1's forward pass is begun, step k ended, then step k+1's
        // masks (from step k's ids) go in with decode_sample.
        for (int r = 0; r < kRows; ++r) gpu->restore_lane(4 + r, start);
        std::vector<std::vector<int32_t>> pgen(kRows);
        for (int k = 0; k <= kSteps; ++k) {
            std::vector<DecodeStep> st(kRows);
            if (k < kSteps) {
                for (int r = 0; r < kRows; ++r) {
                    st[size_t(r)] = step(4 + r, k > 0 ? kTokenOfLastStep : first);
                    st[size_t(r)].sampling = pipeline_row_params(r);
                    st[size_t(r)].sampling.step = pgen[size_t(r)].size() + (k > 0 ? 1 : 0);
                    st[size_t(r)].generated = pgen[size_t(r)];
                }
                gpu->decode_begin_forward(st);
                CHECK_THROWS_WITH(gpu->decode_begin(st), Catch::Contains("decode_sample"));
            }
            if (k > 0) {
                const std::vector<DecodeResult> res = gpu->decode_end();
                for (int r = 0; r < kRows; ++r) {
                    got[size_t(r)].push_back(res[size_t(r)]);
                    pgen[size_t(r)].push_back(res[size_t(r)].token);
                }
            }
            if (k < kSteps) {
                std::vector<std::vector<uint32_t>> masks(kRows);
                for (int r = 0; r < kRows; ++r) {
                    const int32_t previous = k > 0 ? pgen[size_t(r)].back() : first;
                    masks[size_t(r)] = mask_after(r, previous, vocab);
                    st[size_t(r)].sampling.allowed_tokens = masks[size_t(r)];
                    st[size_t(r)].generated = pgen[size_t(r)];
                }
                gpu->decode_sample(st);
            }
        }
        check_same_runs(*gpu, got, ref, 4);
        for (int r = 0; r < 3; ++r) // the masks held
            for (size_t k = 1; k < got[size_t(r)].size(); ++k)
                CHECK(got[size_t(r)][k].token % 4 == got[size_t(r)][k - 1].token % 4);
        CHECK_THROWS_WITH(gpu->decode_sample({}), Catch::Contains("no step begun by decode_begin_forward"));
    }
}
