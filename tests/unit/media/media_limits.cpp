// Bad and oversized media: each a clear ninfer::Error of kind Invalid (the daemon's 400), raised
// before frames are decoded where the headers already tell.
#include "core/media/media_decode.h"
#include "core/media/media_sniff.h"
#include "core/util/error.h"
#include "media_fixtures.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using Kind = VisionInput::Kind;

namespace {

std::string refusal(Kind kind, const std::vector<uint8_t>& bytes, const MediaLimits& limits = {}) {
    try {
        decode_media(kind, bytes, MediaConfig{}, limits);
    } catch (const ninfer::Error& e) {
        CHECK(e.kind() == ninfer::Errc::Invalid);
        return e.what();
    }
    FAIL("decoded what should have been refused");
    return "";
}

} // namespace

TEST_CASE("a 30000x30000 PNG header is refused from its header", "[media_limits]") {
    const auto header = png_header(30000, 30000);
    CHECK_THAT(refusal(Kind::Image, header), Catch::Contains("30000x30000 picture exceeds") && Catch::Contains("--media-max-pixels"));
    const auto sniffed = sniff_image(header);
    REQUIRE(sniffed);
    CHECK(sniffed->width == 30000);
}

TEST_CASE("a truncated PNG is refused", "[media_limits]") {
    auto png = media_fixture("grad.png");
    png.resize(png.size() / 2);
    CHECK_THAT(refusal(Kind::Image, png), Catch::StartsWith("media: "));
    png.resize(20); // inside IHDR
    CHECK_THAT(refusal(Kind::Image, png), Catch::Contains("truncated or malformed PNG header"));
}

TEST_CASE("a zip named .mp4 and text are not media", "[media_limits]") {
    std::vector<uint8_t> zip = {'P', 'K', 3, 4, 20, 0, 0, 0, 8, 0};
    zip.resize(4096, 0x5a);
    CHECK_THAT(refusal(Kind::Video, zip), Catch::Contains("not a supported image or video"));
    CHECK_THAT(refusal(Kind::Image, zip), Catch::Contains("not a PNG, JPEG, WebP or GIF"));
    const std::string text = "hello, this is not a picture";
    CHECK_THAT(refusal(Kind::Video, {text.begin(), text.end()}), Catch::Contains("not a supported image or video"));
    CHECK_THAT(refusal(Kind::Video, {}), Catch::StartsWith("media: "));
}

TEST_CASE("an hour-long video is refused from its header", "[media_limits]") {
    CHECK_THAT(refusal(Kind::Video, media_fixture("hour.mp4")),
               Catch::Contains("lasts 3600 s") && Catch::Contains("--media-max-video-seconds"));
    MediaLimits long_ok;
    long_ok.max_video_seconds = 7200;
    const MediaPlan plan = plan_media(Kind::Video, media_fixture("hour.mp4"), MediaConfig{}, long_ok);
    CHECK(plan.frame_indices.size() == 60); // 60 frames, one a minute: fewer than 2 fps asks for
}

TEST_CASE("the vision-token and frame limits", "[media_limits]") {
    MediaLimits few_tokens;
    few_tokens.max_vision_tokens = 10;
    CHECK_THAT(refusal(Kind::Video, media_fixture("clip.mp4"), few_tokens),
               Catch::Contains("72 vision tokens") && Catch::Contains("--media-max-vision-tokens"));
    MediaLimits two_frames;
    two_frames.max_frames = 2;
    const VisionInput v = decode_media(Kind::Video, media_fixture("clip.mp4"), MediaConfig{}, two_frames);
    CHECK(v.grid_t == 1);
    MediaLimits small;
    small.max_source_pixels = 63 * 64;
    CHECK_THAT(refusal(Kind::Image, media_fixture("grad.png"), small), Catch::Contains("64x64 picture exceeds"));
    CHECK_THAT(refusal(Kind::Video, media_fixture("clip.mp4"), small), Catch::Contains("64x64 picture exceeds"));
}
