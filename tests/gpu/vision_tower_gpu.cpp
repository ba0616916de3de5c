// ninfer GPU tests - the vision tower on the GPU (core/cuda/vision_tower_gpu.h) against the CPU tower
// (core/vision/vision_tower.h, exact f32) on random weights: the tiny test tower and one with the real
// head size (72) and patch size (16), images of several grids, videos of two and three frame pairs,
// on both attention paths (f32 below 256 patches a frame pair, tensor cores above), every row at
// cosine >= 0.9999; videos over several batches at a smaller rows per batch (the pipelined slots
// reused); the host's bf16 rounding of the patches against the device's, bit for bit; and the
// clear errors.
#include "core/cuda/vision_tower_gpu.h"
#include "core/util/error.h"
#include "core/vision/vision_batch_inputs.h"
#include "ninfer/kernels/vision.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

#include <bit>
#include <cstdio>
#include <limits>

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

// Worst row cosine over a request's items encoded in one encode_batch call against the CPU tower's
// item-by-item rows.
double worst_batch_cosine(VisionEncoder& gpu, VisionEncoder& cpu, const std::vector<VisionInput>& items) {
    std::vector<const VisionInput*> ptrs;
    for (const VisionInput& it : items) ptrs.push_back(&it);
    const std::vector<std::vector<float>> got = gpu.encode_batch(ptrs);
    REQUIRE(got.size() == items.size());
    double worst = 1;
    const size_t O = cpu.out_hidden();
    for (size_t i = 0; i < items.size(); ++i) {
        INFO("item " << i);
        const std::vector<float> want = cpu.encode(items[i]);
        REQUIRE(got[i].size() == want.size());
        for (size_t r = 0; r < want.size() / O; ++r) worst = std::min(worst, cosine(got[i], want, r * O, O));
    }
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

TEST_CASE("vision tower on the GPU: a request's items batched (4096 and 640 rows per batch) equal the CPU "
          "tower's, item by item", "[vision_tower_gpu]") {
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
    const double worst = worst_batch_cosine(*gpu, *cpu, items);
    CHECK(worst >= 0.9999);
    std::printf("RESULT vision_tower_gpu batch worst_row_cosine %.7f\n", worst);

    // 640 rows per batch (frame pairs of 288 patches two a batch): one video alone, 7 frame pairs
    // in 4 batches, so both pipelined slots are reused.
    constexpr size_t kBatchRows = 640;
    auto small = make_cuda_vision_encoder(w, 1, 2, kBatchRows);
    CHECK(cuda_vision_bytes(vc, kBatchRows) < cuda_vision_bytes(vc));
    CHECK(cuda_vision_pinned_bytes(vc, kBatchRows) < cuda_vision_pinned_bytes(vc));
    double worst_small =
        worst_row_cosine(*small, *cpu, random_vision_input(vc, VisionInput::Kind::Video, 7, 16, 18, 61));
    // A request's items across batch boundaries: small frame pairs beside a split video, then an
    // image of 480 patches (a batch of its own) and another video.
    items = {random_vision_input(vc, VisionInput::Kind::Image, 1, 8, 12, 62),
             random_vision_input(vc, VisionInput::Kind::Video, 5, 16, 18, 63),
             random_vision_input(vc, VisionInput::Kind::Video, 3, 4, 6, 64),
             random_vision_input(vc, VisionInput::Kind::Image, 1, 20, 24, 65),
             random_vision_input(vc, VisionInput::Kind::Video, 2, 16, 16, 66)};
    std::vector<const VisionInput*> ptrs;
    for (const VisionInput& it : items) ptrs.push_back(&it);
    REQUIRE(pack_vision_batches(ptrs, kBatchRows).size() >= 5);
    for (int call = 0; call < 2; ++call) { // a second call starts from the slots the first left
        INFO("call " << call);
        worst_small = std::min(worst_small, worst_batch_cosine(*small, *cpu, items));
    }
    CHECK(worst_small >= 0.9999);
    std::printf("RESULT vision_tower_gpu rows_640 worst_row_cosine %.7f\n", worst_small);
}

// The tower's first step was vision_to_bf16 on the device; the host now rounds the patches
// (to_bf16_rne) and uploads bf16: the same bits for every value a patch can hold (NaN aside).
TEST_CASE("vision patches: the host's bf16 rounding equals the device's, bit for bit", "[vision_tower_gpu]") {
    require_gpu();
    std::vector<float> v = {0.0f, -0.0f, 1.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::min()};
    for (uint32_t hi : {0x3f80u, 0x3f81u, 0xbf80u, 0xbf81u, 0x7f7fu, 0xff7fu, 0x0001u, 0x8001u, 0x0080u})
        for (uint32_t lo : {0x8000u, 0x7fffu, 0x8001u, 0xffffu, 0x0001u})
            v.push_back(std::bit_cast<float>(hi << 16 | lo));
    Rng rng(71);
    while (v.size() < (size_t(1) << 20) + 3) {
        const float x = std::bit_cast<float>(uint32_t(rng.bits()));
        v.push_back(v.size() % 2 ? rng.uniform(-1.0f, 1.0f) : std::isnan(x) ? 0.5f : x);
    }
    std::vector<uint16_t> host(v.size());
    to_bf16_rne(v.data(), v.size(), host.data());
    DeviceBuffer<float> in(v);
    DeviceBuffer<bf16> out(v.size());
    CUDA_OK(ninfer::kernels::vision_to_bf16(in.get(), int64_t(v.size()), out.get(), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<bf16> dev = out.download();
    size_t differ = 0;
    for (size_t i = 0; i < v.size(); ++i)
        if (std::bit_cast<uint16_t>(dev[i]) != host[i] && differ++ < 5)
            std::printf("value %a: device 0x%04x host 0x%04x\n", double(v[i]), unsigned(std::bit_cast<uint16_t>(dev[i])),
                        unsigned(host[i]));
    CHECK(differ == 0);
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
    // Rows per batch below a merge group, or past the bound.
    CHECK_THROWS_WITH(make_cuda_vision_encoder(w, 1, 2, 3), Catch::Contains("rows per batch, not 3"));
    CHECK_THROWS_WITH(cuda_vision_bytes(vc, size_t(1) << 21), Catch::Contains("rows per batch, not 2097152"));
    // The encoder still works after a refusal.
    const VisionInput ok = random_vision_input(vc, VisionInput::Kind::Image, 1, 4, 4, 7);
    CHECK(gpu->encode(ok).size() == ok.merged_tokens() * 24);
}
