// Resize and frame-sampling arithmetic against values computed by hand from transformers' formulas
// (qwen2_vl image smart_resize, qwen3_vl video smart_resize, Qwen3VLVideoProcessor.sample_frames,
// Qwen3VLProcessor._calculate_timestamps; media_plan.h quotes each formula), and the processor
// configs' parsing.
#include "core/media/media_config.h"
#include "core/media/media_plan.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;

namespace {

MediaPreprocess image_bounds(int64_t min_px, int64_t max_px) {
    MediaPreprocess p;
    p.min_pixels = min_px, p.max_pixels = max_px;
    return p;
}

void check(ResizedSize got, int64_t h, int64_t w) {
    CHECK(got.height == h);
    CHECK(got.width == w);
}

} // namespace

TEST_CASE("image smart_resize: rounding, the max branch and the min branch", "[media_plan]") {
    const MediaPreprocess up = image_bounds(32 * 32, 1024 * 1024); // docs/MODEL.md §9 upstream bounds
    // 64/32 = 2: already a multiple of the factor.
    check(smart_resize_image(64, 64, up), 64, 64);
    // 48/32 = 1.5 and 80/32 = 2.5 round half to even (Python's round): 2 and 2.
    check(smart_resize_image(48, 96, up), 64, 96);
    check(smart_resize_image(80, 80, up), 64, 64);
    // 2000x3000: 1984 x 3008 > 1048576, beta = sqrt(6e6 / 1048576) = 2.39208;
    // floor(2000/beta/32) = floor(26.13) = 26 -> 832, floor(3000/beta/32) = floor(39.19) = 39 -> 1248.
    check(smart_resize_image(2000, 3000, up), 832, 1248);
    // 10x2000 (aspect exactly 200): round(0.3125) = 0 -> 0 px < 1024, beta = sqrt(1024/20000) = 0.22627;
    // ceil(2.26/32) = 1 -> 32, ceil(452.5/32) = 15 -> 480.
    check(smart_resize_image(10, 2000, up), 32, 480);
    // Qwen3.5's preprocessor_config.json bounds (65536..16777216): 100x50 -> 96 x 64 < 65536,
    // beta = sqrt(65536/5000) = 3.62039; ceil(362.04/32) = 12 -> 384, ceil(181.02/32) = 6 -> 192.
    const MediaPreprocess hf = image_bounds(65536, 16777216);
    check(smart_resize_image(100, 50, hf), 384, 192);
    check(smart_resize_image(64, 64, hf), 256, 256);
    check(smart_resize_image(30000, 30000, hf), 4096, 4096);
    CHECK(merged_tokens_of(1, {64, 96}, up) == 6);
}

TEST_CASE("image smart_resize refuses an aspect ratio above 200 and empty sides", "[media_plan]") {
    const MediaPreprocess up;
    CHECK_THROWS_WITH(smart_resize_image(10, 2001, up), Catch::Contains("aspect ratio"));
    CHECK_THROWS_AS(smart_resize_image(0, 64, up), ninfer::Error);
}

TEST_CASE("video smart_resize: the volume bounds and the small-side scale-up", "[media_plan]") {
    const MediaConfig c; // video bounds 128*32*32 .. 4*1024*1024 px x frames
    // 4 x 64 x 64 = 16384 < 131072: beta = sqrt(8); ceil(181.02/32) = 6 -> 192.
    check(smart_resize_video(4, 64, 64, c.video), 192, 192);
    // 60 frames of 720p: t' = 60, 704 x 1280 (22.5 rounds to 22); 54M > 4194304,
    // beta = sqrt(60*720*1280/4194304) = 3.63092; floor(6.197) = 6 -> 192, floor(11.02) = 11 -> 352.
    check(smart_resize_video(60, 720, 1280, c.video), 192, 352);
    // 20x40 is first scaled by max(32/20, 32/40) = 1.6 to 32x64; 4*32*64 < 131072, beta = 4 -> 128 x 256.
    check(smart_resize_video(4, 20, 40, c.video), 128, 256);
    CHECK(merged_tokens_of(4, {192, 192}, c.video) == 72);
    CHECK(merged_tokens_of(5, {192, 192}, c.video) == 108); // 5 frames pad to 3 temporal patches
}

TEST_CASE("frame sampling follows Qwen3VLVideoProcessor.sample_frames", "[media_plan]") {
    // 20 frames at 10 fps, 2 fps: n = int(20/10*2) = 4; linspace(0, 19, 4) = 0, 6.33, 12.67, 19.
    CHECK(sample_frame_indices(20, 10, 2, 4, 768) == std::vector<int64_t>{0, 6, 13, 19});
    // n = int(10/6*2) = 3 (min_frames 1): linspace(0, 9, 3) = 0, 4.5, 9; 4.5 rounds half to even.
    CHECK(sample_frame_indices(10, 6, 2, 1, 768) == std::vector<int64_t>{0, 4, 9});
    // 3 frames: n = 0 -> min_frames 4 -> at most the 3 there are.
    CHECK(sample_frame_indices(3, 10, 2, 4, 768) == std::vector<int64_t>{0, 1, 2});
    // 10 minutes at 30 fps: n = 1200 -> max_frames 768.
    CHECK(sample_frame_indices(18000, 30, 2, 4, 768).size() == 768);
    CHECK(sample_frame_indices(18000, 30, 2, 4, 768).back() == 17999);
    CHECK_THROWS_AS(sample_frame_indices(0, 30, 2, 4, 768), ninfer::Error);
}

TEST_CASE("pair timestamps average each temporal patch's first and last frame", "[media_plan]") {
    auto ts = pair_timestamps({0, 6, 13, 19}, 10, 2);
    REQUIRE(ts.size() == 2);
    CHECK(ts[0] == Approx(0.3));
    CHECK(ts[1] == Approx(1.6));
    ts = pair_timestamps({0, 4, 9}, 6, 2); // padded with the last index: (9, 9)
    REQUIRE(ts.size() == 2);
    CHECK(ts[0] == Approx(1.0 / 3.0));
    CHECK(ts[1] == Approx(1.5));
}

TEST_CASE("processor configs: size edges, min/max_pixels overrides, defaults and bad values", "[media_plan]") {
    MediaConfig c = media_config_from_json(
        R"({"size":{"shortest_edge":65536,"longest_edge":16777216},"patch_size":16,"merge_size":2,
            "temporal_patch_size":2,"image_mean":[0.5,0.5,0.5],"image_std":[0.5,0.5,0.5]})",
        R"({"size":{"shortest_edge":4096,"longest_edge":25165824},"fps":2,"min_frames":4,"max_frames":768})");
    CHECK(c.image.min_pixels == 65536);
    CHECK(c.image.max_pixels == 16777216);
    CHECK(c.video.min_pixels == 4096);
    CHECK(c.video.max_pixels == 25165824);
    c = media_config_from_json(R"({"size":{"shortest_edge":1,"longest_edge":2},"min_pixels":3136,"max_pixels":12845056,
                                   "image_mean":[0.48145466,0.4578275,0.40821073]})", "");
    CHECK(c.image.min_pixels == 3136);
    CHECK(c.image.max_pixels == 12845056);
    CHECK(c.image.mean[0] == Approx(0.48145466));
    CHECK(c.video.fps == 2.0); // defaults where a file is absent
    CHECK(c.video.max_frames == 768);
    CHECK_THROWS_WITH(media_config_from_json("[1]", ""), Catch::Contains("preprocessor_config.json: not a JSON object"));
    CHECK_THROWS_WITH(media_config_from_json(R"({"patch_size":0})", ""), Catch::Contains("patch_size"));
    CHECK_THROWS_WITH(media_config_from_json(R"({"image_std":[0.5,0,0.5]})", ""), Catch::Contains("image_std"));
    CHECK_THROWS_WITH(media_config_from_json("", R"({"min_frames":10,"max_frames":4})"), Catch::Contains("min_frames"));
}
