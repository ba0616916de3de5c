// ninfer tests (GPU) - the CUDA backend at the 27B's real widths (hidden 5120, intermediate 17408,
// vocabulary 248,320; the first 4 layers: 3 GDN + 1 attention; seeded random q4 weights from
// decode_bench.h): the paths the small fixtures cannot reach (the ring GEMVs, the int8 route, its
// x written by the norm and SwiGLU kernels at batch >= 2 but quantised by the GEMVs at batch 1,
// the head after a tensor-core prefill) give every lane the same logits, bit for bit, whatever
// the batch, graphs or eager.
#include "core/cuda/cuda_backend.h"
#include "core/cuda/decode_bench.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"

#include <cmath>
#include <cstdio>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("cuda backend at the 27B's widths: batches 8, 4, 2, 1 and graphs vs eager give the same bits", "[real_shape]") {
    require_gpu();
    const auto sw = synthetic_device_weights("qwen3.6-27b", "q4", 11, 4);
    const ModelWeights& w = sw->weights;
    REQUIRE(w.config.hidden_size == 5120);
    MemoryRequest mr;
    mr.max_context = 256;
    mr.max_concurrency = 8;
    mr.kv_capacity_tokens = 8 * 256;
    mr.weight_bytes = w.stored_bytes();
    mr.available_bytes = cuda_free_bytes();
    mr.margin_bytes = 2ull << 30;
    mr.prefill_chunk = 64; // prompts of 64+ tokens take the tensor-core prefill, then the head
    mr.backend_workspace_bytes = cuda_backend_workspace_bytes(w.config, mr);
    const MemoryPlan plan = MemoryPlan::make(w.config, mr);
    std::vector<std::vector<int32_t>> prompts;
    for (size_t len : {1, 7, 20, 64, 65, 100, 129, 130}) {
        std::vector<int32_t> p(len);
        for (size_t i = 0; i < len; ++i) p[i] = int32_t((len * 131 + i * 7919) % 151000);
        prompts.push_back(p);
    }
    auto graphs = make_cuda_backend(w, plan, {true});
    const auto g8 = run_lanes(*graphs, prompts, 4, 8), g1 = run_lanes(*graphs, prompts, 4, 1);
    const auto g4 = run_lanes(*graphs, prompts, 4, 4), g2 = run_lanes(*graphs, prompts, 4, 2);
    graphs.reset();
    auto eager = make_cuda_backend(w, plan, {false});
    const auto e8 = run_lanes(*eager, prompts, 4, 8);
    REQUIRE(g8.size() == g1.size());
    size_t finite = 0, rows_1 = 0, rows_4 = 0, rows_2 = 0, rows_eager = 0;
    for (size_t i = 0; i < g8.size(); ++i) {
        finite += std::all_of(g8[i].begin(), g8[i].end(), [](float v) { return std::isfinite(v); });
        rows_1 += g8[i] != g1[i];
        rows_4 += g8[i] != g4[i];
        rows_2 += g8[i] != g2[i];
        rows_eager += g8[i] != e8[i];
    }
    CHECK(finite == g8.size()); // the comparison means something only for real numbers
    CHECK(rows_1 == 0);
    CHECK(rows_4 == 0);
    CHECK(rows_2 == 0);
    CHECK(rows_eager == 0);
    std::printf("RESULT real_shape 27B-widths rows differing from batch 8: batch 1 %zu, 4 %zu, 2 %zu, eager %zu of %zu\n",
                rows_1, rows_4, rows_2, rows_eager, g8.size());
}
