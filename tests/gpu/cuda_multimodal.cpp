// ninfer GPU tests - the CUDA backend has no vision path yet (issue 31: the GPU tower is later
// work): prefill_with and lane images carrying a multimodal lane's rope_position section are refused
// with a clear error, and the backend serves text normally afterwards.
#include "core/cpu/cpu_backend.h"
#include "core/cuda/cuda_backend.h"
#include "core/util/error.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("cuda backend refuses multimodal prefill and multimodal lane images, then serves text", "[cuda_multimodal]") {
    auto m = load("kernel/dense", "bf16");
    auto cpu = make_cpu_backend(m->weights, m->plan);
    auto gpu = make_cuda_backend(m->weights, m->plan);
    const std::vector<int32_t> prompt = {11, 12, 13, 14, 15, 16, 17, 18};
    // Positions of a 2x2 image grid at 2..5 (t, h, w differ), rows = the token's own embeddings.
    const std::vector<MropePosition> pos = {MropePosition::text(0), MropePosition::text(1), {2, 2, 2}, {2, 2, 3},
                                            {2, 3, 2},             {2, 3, 3},             MropePosition::text(4),
                                            MropePosition::text(5)};
    const std::vector<int32_t> rows(prompt.size(), -1);
    CHECK_THROWS_WITH(gpu->prefill_with(0, prompt, {pos, rows, {}}, LogitsOut::Last, nullptr),
                      Catch::Contains("does not take image or video input"));
    cpu->prefill_with(0, prompt, {pos, rows, {}}, LogitsOut::Last, nullptr);
    const LaneImage image = cpu->save_lane(0);
    REQUIRE(image.find(LaneSectionTag::RopePosition));
    CHECK_THROWS_WITH(gpu->restore_lane(1, image), Catch::Contains("rope_position section this backend cannot restore"));

    std::vector<float> lc, lg;
    cpu->reset_lane(0);
    cpu->prefill(0, prompt, LogitsOut::Last, &lc);
    gpu->reset_lane(0);
    gpu->prefill(0, prompt, LogitsOut::Last, &lg);
    CHECK(cosine(lg, lc) >= 0.999);
}
