// ninfer tests - M-RoPE positions of multimodal prompts against values derived by hand from
// transformers' Qwen3_5Model.get_rope_index (modeling_qwen3_5.py, 5.17): runs of equal token type
// (text 0, image 1, video 2); text takes p.. on all axes; a vision run takes t = p, h = p + merged
// row, w = p + merged column, then p += max(llm_h, llm_w); video grids are split per temporal patch
// (repeat_interleave(video_grid_thw, t), t := 1); rope_deltas = max position + 1 - length.
#include "core/backend/mrope.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;

namespace {
constexpr int32_t kImg = 900, kVid = 901, kStart = 800, kEnd = 801;
MropePosition at(uint32_t t, uint32_t h, uint32_t w) { return {t, h, w}; }
} // namespace

TEST_CASE("mrope: text alone is 0..n-1 on every axis", "[mrope]") {
    const std::vector<int32_t> tokens = {5, 6, 7, 8};
    const MropeLayout l = mrope_positions(tokens, kImg, kVid, {}, 2);
    REQUIRE(l.positions.size() == 4);
    for (uint32_t i = 0; i < 4; ++i)
        CHECK(l.positions[i] == MropePosition::text(i));
    CHECK(l.next == 4);
}

TEST_CASE("mrope: an image between text, and the text after it", "[mrope]") {
    // 4x6 patches, merge 2 -> a 2x3 grid of 6 tokens starting at p = 3 (after "T T <vs>").
    const std::vector<int32_t> tokens = {1, 2, kStart, kImg, kImg, kImg, kImg, kImg, kImg, kEnd, 3};
    const MediaGrid image{false, 1, 4, 6};
    const MropeLayout l = mrope_positions(tokens, kImg, kVid, std::span(&image, 1), 2);
    const std::vector<MropePosition> want = {at(0, 0, 0), at(1, 1, 1), at(2, 2, 2), at(3, 3, 3), at(3, 3, 4),
                                             at(3, 3, 5), at(3, 4, 3), at(3, 4, 4), at(3, 4, 5),
                                             at(6, 6, 6), // p = 3 + max(2, 3)
                                             at(7, 7, 7)};
    CHECK(l.positions == want);
    CHECK(l.next == 8); // 8 = max position 7 + 1; rope_deltas = 8 - 11 = -3
}

TEST_CASE("mrope: two images, a tall one then a square one", "[mrope]") {
    const std::vector<int32_t> tokens = {kStart, kImg, kImg, kEnd, kStart, kImg, kImg, kImg, kImg, kEnd};
    const MediaGrid media[] = {{false, 1, 4, 2}, {false, 1, 4, 4}}; // 2x1 merged, then 2x2
    const MropeLayout l = mrope_positions(tokens, kImg, kVid, media, 2);
    const std::vector<MropePosition> want = {at(0, 0, 0), at(1, 1, 1), at(1, 2, 1), // first image at p = 1
                                             at(3, 3, 3), at(4, 4, 4),               // p = 1 + max(2, 1)
                                             at(5, 5, 5), at(5, 5, 6), at(5, 6, 5), at(5, 6, 6), at(7, 7, 7)};
    CHECK(l.positions == want);
    CHECK(l.next == 8);
}

TEST_CASE("mrope: a video's frame pairs are separate runs with timestamps between them", "[mrope]") {
    // grid (2, 4, 4): two temporal patches of 2x2 merged tokens; "<0.5 seconds>"-like text between.
    const std::vector<int32_t> tokens = {kStart, kVid, kVid, kVid, kVid, kEnd, 40, 41, kStart, kVid, kVid, kVid, kVid, kEnd};
    const MediaGrid video{true, 2, 4, 4};
    const MropeLayout l = mrope_positions(tokens, kImg, kVid, std::span(&video, 1), 2);
    const std::vector<MropePosition> want = {at(0, 0, 0), at(1, 1, 1), at(1, 1, 2), at(1, 2, 1), at(1, 2, 2),
                                             at(3, 3, 3), at(4, 4, 4), at(5, 5, 5), at(6, 6, 6),
                                             at(7, 7, 7), at(7, 7, 8), at(7, 8, 7), at(7, 8, 8), at(9, 9, 9)};
    CHECK(l.positions == want);
    CHECK(l.next == 10);
}

TEST_CASE("mrope: images and video interleave by kind, each kind in prompt order", "[mrope]") {
    const std::vector<int32_t> tokens = {kVid, kVid, kVid, kVid, 7, kImg, kImg, 8};
    const MediaGrid media[] = {{false, 1, 2, 4}, {true, 1, 4, 4}}; // the image listed first, used second
    const MropeLayout l = mrope_positions(tokens, kImg, kVid, media, 2);
    const std::vector<MropePosition> want = {at(0, 0, 0), at(0, 0, 1), at(0, 1, 0), at(0, 1, 1), at(2, 2, 2),
                                             at(3, 3, 3), at(3, 3, 4), at(5, 5, 5)};
    CHECK(l.positions == want);
    CHECK(l.next == 6);
}

TEST_CASE("mrope: placeholders and media that do not pair up are refused", "[mrope]") {
    const MediaGrid image{false, 1, 4, 4};
    const std::vector<int32_t> three = {kImg, kImg, kImg};
    CHECK_THROWS_WITH(mrope_positions(three, kImg, kVid, std::span(&image, 1), 2),
                      Catch::Contains("a run of 3 image placeholders for a grid of 4"));
    const std::vector<int32_t> two_runs = {kImg, kImg, kImg, kImg, 5, kImg};
    CHECK_THROWS_WITH(mrope_positions(two_runs, kImg, kVid, std::span(&image, 1), 2),
                      Catch::Contains("more image placeholder runs than media"));
    const std::vector<int32_t> text = {1, 2};
    CHECK_THROWS_WITH(mrope_positions(text, kImg, kVid, std::span(&image, 1), 2), Catch::Contains("have no placeholders"));
    const MediaGrid odd{false, 1, 3, 4};
    CHECK_THROWS_WITH(mrope_positions(text, kImg, kVid, std::span(&odd, 1), 2), Catch::Contains("a grid of 1x3x4"));
}
