// ninfer tests - the CPU vision tower against the float64 reference of tower_f64.h (written from the
// math), on images of several shapes and a video; its per-frame-pair attention; its input checks.
#include "core/cpu/thread_pool.h"
#include "core/util/error.h"
#include "core/vision/vision_tower.h"
#include "tests/unit/vision/tiny_vision.h"
#include "tests/unit/vision/tower_f64.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("vision tower equals the float64 reference for images and video", "[tower_reference]") {
    InMemoryModel model;
    const VisionConfig c = tiny_vision_config();
    const VisionWeights w = random_vision_weights(model, c, 7);
    ThreadPool pool(2);
    VisionTower tower(w, pool);
    struct Case {
        const char* what;
        VisionInput::Kind kind;
        int t, h, w;
    };
    for (const Case& k : {Case{"image on the table's own 4x4 grid", VisionInput::Kind::Image, 1, 4, 4},
                          Case{"wide image, 4x6 patches", VisionInput::Kind::Image, 1, 4, 6},
                          Case{"tall image, 8x2 patches", VisionInput::Kind::Image, 1, 8, 2},
                          Case{"video of three frame pairs, 6x4", VisionInput::Kind::Video, 3, 6, 4}}) {
        SECTION(k.what) {
            const VisionInput in = random_vision_input(c, k.kind, k.t, k.h, k.w, uint64_t(k.t * 100 + k.h * 10 + k.w));
            const std::vector<float> got = tower.encode(in);
            CHECK(got.size() == in.merged_tokens() * c.out_hidden_size);
            compare(got, reference_tower(w, in));
        }
    }
}

TEST_CASE("vision tower attends within one frame pair: a video's frames equal separate images", "[tower_reference]") {
    InMemoryModel model;
    const VisionConfig c = tiny_vision_config();
    const VisionWeights w = random_vision_weights(model, c, 11, TensorFormat::Q8G32Fp16);
    ThreadPool pool(2);
    VisionTower tower(w, pool);
    const VisionInput video = random_vision_input(c, VisionInput::Kind::Video, 2, 4, 6, 5);
    const std::vector<float> both = tower.encode(video);
    const size_t rows_per_frame = video.merged_tokens() / 2, frame_values = video.n_patches() / 2 * video.patch_dim();
    for (int t = 0; t < 2; ++t) {
        VisionInput one = video;
        one.grid_t = 1;
        one.patches.assign(video.patches.begin() + long(t * frame_values), video.patches.begin() + long((t + 1) * frame_values));
        const std::vector<float> alone = tower.encode(one);
        REQUIRE(alone.size() == rows_per_frame * c.out_hidden_size);
        for (size_t i = 0; i < alone.size(); ++i)
            REQUIRE(both[t * alone.size() + i] == Approx(alone[i]).margin(1e-5));
    }
}

TEST_CASE("vision tower refuses inputs that do not fit it", "[tower_reference]") {
    InMemoryModel model;
    const VisionConfig c = tiny_vision_config();
    const VisionWeights w = random_vision_weights(model, c, 3);
    ThreadPool pool(1);
    VisionTower tower(w, pool);
    VisionInput in = random_vision_input(c, VisionInput::Kind::Image, 1, 4, 4, 1);
    VisionInput bad = in;
    bad.patch_size = 16;
    CHECK_THROWS_WITH(tower.encode(bad), Catch::Contains("vision: an item patchified with patch 16"));
    bad = in;
    bad.grid_w = 3;
    CHECK_THROWS_WITH(tower.encode(bad), Catch::Contains("not a multiple of the merge size"));
    bad = in;
    bad.patches.pop_back();
    CHECK_THROWS_WITH(tower.encode(bad), Catch::Contains("patch values for 16 patches"));
    bad = in;
    bad.grid_t = 0;
    CHECK_THROWS_WITH(tower.encode(bad), Catch::Contains("is empty"));
}

TEST_CASE("vision config parses a checkpoint's vision_config and refuses what the tower cannot run", "[tower_reference]") {
    const VisionConfig c = VisionConfig::parse(
        R"({"depth":27,"hidden_size":1152,"intermediate_size":4304,"num_heads":16,"patch_size":16,)"
        R"("temporal_patch_size":2,"spatial_merge_size":2,"num_position_embeddings":2304,"out_hidden_size":2048,)"
        R"("hidden_act":"gelu_pytorch_tanh","rope_parameters":{"rope_theta":10000.0,"rope_type":"axial"}})");
    c.validate();
    CHECK(c.head_dim() == 72);
    CHECK(c.patch_dim() == 1536);
    CHECK(c.position_grid_side() == 48);
    CHECK(c.merged_dim() == 4608);
    // One 4096-patch batch: x, xn, q, k, v, attn [4096][1152], mlp [4096][4608] (the merger's input is
    // wider than fc1's 4304), rope tables [4096][72]; plus the 2304 x 1152 position table, f32.
    CHECK(VisionTower::workspace_bytes(c, 4096) == 4096ull * (6 * 1152 + 4608 + 72) * 4);
    CHECK(VisionTower::host_bytes(c) == 4096ull * (6 * 1152 + 4608 + 72) * 4 + 2304ull * 1152 * 4);
    VisionConfig bad = c;
    bad.num_position_embeddings = 2300;
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("must be a square"));
    bad = c;
    bad.out_hidden_size = 0;
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("out_hidden_size must be positive"));
    bad = c;
    bad.hidden_act = "relu";
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains("hidden_act"));
    CHECK_THROWS_WITH(VisionConfig::parse(R"({"depth":-1})"), Catch::Contains("depth must be a non-negative integer"));
}
