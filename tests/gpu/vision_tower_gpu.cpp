// ninfer GPU tests - the vision tower on the GPU (core/cuda/vision_tower_gpu.h) against the CPU tower
// (core/vision/vision_tower.h, exact f32) on random weights: the tiny test tower and one with the real
// head size (72) and patch size (16), images of several grids, videos of two and three frame pairs,
// on both attention paths (f32 below 256 patches a frame pair, tensor cores above), every row at
// cosine >= 0.9999; and the clear errors.
#include "core/cuda/vision_tower_gpu.h"
#include "core/util/error.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

#include <cstdio>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

// The real tower's head (72 = 2 x 36 rotary pairs, 18 per axis) and patch (16 px, 1536 values) in
// a two-block tower small enough for the CPU reference.
VisionConfig real_head_config() {
    VisionConfig c = tiny_vision_config(64);
    c.hidden_size = 144;
    c.num_heads = 2;
    c.intermediate_size = 304;
    c.patch_size = 16;
    c.num_position_embeddings = 64;
    return c;
}

// Worst cosine over the item's rows, GPU vs CPU (and the row count equal).
double worst_row_cosine(VisionEncoder& gpu, VisionEncoder& cpu, const VisionInput& item) {
    const std::vector<float> g = gpu.encode(item), c = cpu.encode(item);
    REQUIRE(g.size() == c.size());
    REQUIRE(g.size() == item.merged_tokens() * cpu.out_hidden());
    double worst = 1;
    const size_t O = cpu.out_hidden();
    for (size_t r = 0; r < g.size() / O; ++r) worst = std::min(worst, cosine(g, c, r * O, O));
    return worst;
}

void check_tower(const VisionConfig& vc, TensorFormat format, const char* name) {
    InMemoryModel model;
    const VisionWeights w = random_vision_weights(model, vc, 31, format);
    auto cpu = make_cpu_vision_encoder(w, 0, 1, 2);
    auto gpu = make_cuda_vision_encoder(w, 1, 2);
    CHECK(gpu->out_hidden() == cpu->out_hidden());
    CHECK(gpu->image_token_id == 1);
    CHECK(gpu->video_token_id == 2);
    struct Case {
        VisionInput::Kind kind;
        int t, h, w;
    };
    // Frame pairs below 256 patches take the f32 attention kernel; 256+ the flash kernel (frame
    // pairs of whole 64-key tiles, 256 and 2560 patches; and ragged ones, 324, 480 and 288, whose
    // last tile is masked; the videos hold several segments).
    const Case cases[] = {{VisionInput::Kind::Image, 1, 2, 2},   {VisionInput::Kind::Image, 1, 8, 12},
                          {VisionInput::Kind::Image, 1, 16, 6},  {VisionInput::Kind::Video, 3, 4, 6},
                          {VisionInput::Kind::Image, 1, 16, 16}, {VisionInput::Kind::Image, 1, 18, 18},
                          {VisionInput::Kind::Image, 1, 20, 24}, {VisionInput::Kind::Video, 2, 16, 18},
                          {VisionInput::Kind::Image, 1, 64, 40}};
    double worst = 1;
    uint64_t seed = 40;
    for (const Case& k : cases) {
        INFO(name << " grid " << k.t << "x" << k.h << "x" << k.w);
        const double cs = worst_row_cosine(*gpu, *cpu, random_vision_input(vc, k.kind, k.t, k.h, k.w, ++seed));
        CHECK(cs >= 0.9999);
        worst = std::min(worst, cs);
    }
    std::printf("RESULT vision_tower_gpu %s worst_row_cosine %.7f\n", name, worst);
}

} // namespace

TEST_CASE("vision tower on the GPU matches the CPU tower", "[vision_tower_gpu]") {
    require_gpu();
    check_tower(tiny_vision_config(24), TensorFormat::Bf16, "tiny bf16");
    check_tower(real_head_config(), TensorFormat::Bf16, "real-head bf16");
    check_tower(real_head_config(), TensorFormat::Fp8E4m3fnRowBf16, "real-head fp8");
}

TEST_CASE("vision tower on the GPU: a request's items in one batch equal the CPU tower's, item by item",
          "[vision_tower_gpu]") {
    require_gpu();
    const VisionConfig vc = real_head_config();
    InMemoryModel model;
    const VisionWeights w = random_vision_weights(model, vc, 32);
    auto cpu = make_cpu_vision_encoder(w, 0, 1, 2);
    auto gpu = make_cuda_vision_encoder(w, 1, 2);
    // Small and large frame pairs mixed in one batch, then two items past 4096 patches together
    // (a second batch).
    std::vector<VisionInput> items = {random_vision_input(vc, VisionInput::Kind::Image, 1, 8, 12, 51),
                                      random_vision_input(vc, VisionInput::Kind::Video, 3, 4, 6, 52),
                                      random_vision_input(vc, VisionInput::Kind::Image, 1, 16, 16, 53),
                                      random_vision_input(vc, VisionInput::Kind::Video, 2, 16, 18, 54),
                                      random_vision_input(vc, VisionInput::Kind::Image, 1, 64, 40, 55),
                                      random_vision_input(vc, VisionInput::Kind::Image, 1, 48, 48, 56)};
    std::vector<const VisionInput*> ptrs;
    for (const VisionInput& it : items) ptrs.push_back(&it);
    const std::vector<std::vector<float>> got = gpu->encode_batch(ptrs);
    REQUIRE(got.size() == items.size());
    double worst = 1;
    const size_t O = vc.out_hidden_size;
    for (size_t i = 0; i < items.size(); ++i) {
        INFO("item " << i);
        const std::vector<float> want = cpu->encode(items[i]);
        REQUIRE(got[i].size() == want.size());
        for (size_t r = 0; r < want.size() / O; ++r) worst = std::min(worst, cosine(got[i], want, r * O, O));
    }
    CHECK(worst >= 0.9999);
    std::printf("RESULT vision_tower_gpu batch worst_row_cosine %.7f\n", worst);
}

TEST_CASE("vision tower on the GPU refuses what it cannot take, clearly", "[vision_tower_gpu]") {
    require_gpu();
    const VisionConfig vc = tiny_vision_config(24);
    InMemoryModel model;
    const VisionWeights w = random_vision_weights(model, vc, 31);
    auto gpu = make_cuda_vision_encoder(w, 1, 2);
    VisionInput bad = random_vision_input(vc, VisionInput::Kind::Image, 1, 4, 4, 5);
    bad.patch_size = 14;
    CHECK_THROWS_WITH(gpu->encode(bad), Catch::Contains("vision: an item patchified with patch 14"));
    // One frame of 66 x 64 patches is past the 4096 rows of a batch.
    const VisionInput big = random_vision_input(vc, VisionInput::Kind::Image, 1, 66, 64, 6);
    CHECK_THROWS_WITH(gpu->encode(big), Catch::Contains("vision: a frame of 4224 patches"));
    // The encoder still works after a refusal.
    const VisionInput ok = random_vision_input(vc, VisionInput::Kind::Image, 1, 4, 4, 7);
    CHECK(gpu->encode(ok).size() == ok.merged_tokens() * 24);
}
