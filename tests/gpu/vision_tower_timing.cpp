// ninfer GPU benchmark (no timed asserts) - the GPU vision tower of the real shape (27 blocks of 1152,
// core/convert/synthetic.h's qwen3.6-27b tower, random bf16 weights): a 1024x1024 image (4096
// patches, 1024 merged tokens) and a 30 s 720p video at 2 frames/s as the processor resizes it
// (60 frames of 832x480: 30 frame pairs of 30x52 patches). Prints "RESULT vision_tower_timing ...".
#include "core/convert/synthetic.h"
#include "core/cuda/vision_tower_gpu.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("vision tower on the GPU: real-shape image and video times", "[vision_tower_timing]") {
    require_gpu();
    const VisionConfig vc = synthetic_shape_vision("qwen3.6-27b");
    InMemoryModel model;
    const VisionWeights w = random_vision_weights(model, vc, 3);
    auto gpu = make_cuda_vision_encoder(w, -1, -1);
    struct Case {
        const char* name;
        VisionInput item;
    };
    const Case cases[] = {{"image_1024x1024", random_vision_input(vc, VisionInput::Kind::Image, 1, 64, 64, 1)},
                          {"video_30s_832x480", random_vision_input(vc, VisionInput::Kind::Video, 30, 30, 52, 2)}};
    for (const Case& c : cases) {
        std::vector<float> rows = gpu->encode(c.item); // warm-up
        REQUIRE(rows.size() == c.item.merged_tokens() * vc.out_hidden_size);
        double best = 1e30;
        for (int i = 0; i < 3; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            rows = gpu->encode(c.item);
            best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::printf("RESULT vision_tower_timing %s patches %zu merged_tokens %zu best_ms %.2f device_mib %.1f\n", c.name,
                    c.item.n_patches(), c.item.merged_tokens(), best, double(cuda_vision_bytes(vc)) / (1 << 20));
    }
}
