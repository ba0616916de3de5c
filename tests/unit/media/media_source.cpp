// Media sources: base64 data: URLs (RFC 4648 vectors, URL-safe, whitespace, bad input, size
// limits before decoding), remote URLs refused, file:// only inside the allowed directory.
#include "core/media/media_source.h"
#include "core/media/placeholders.h"
#include "core/util/error.h"
#include "tests/unit/engine/temp_dir.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace ninfer::core;

namespace {

std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

} // namespace

TEST_CASE("base64 decodes RFC 4648's vectors, URL-safe text and whitespace", "[media_source]") {
    CHECK(text(base64_decode("", 100)).empty());
    CHECK(text(base64_decode("Zg==", 100)) == "f");
    CHECK(text(base64_decode("Zm8=", 100)) == "fo");
    CHECK(text(base64_decode("Zm9v", 100)) == "foo");
    CHECK(text(base64_decode("Zm9vYg==", 100)) == "foob");
    CHECK(text(base64_decode("Zm9vYmE", 100)) == "fooba"); // padding optional
    CHECK(text(base64_decode("Zm9v\nYmFy", 100)) == "foobar");
    CHECK(base64_decode("-_-_", 100) == base64_decode("+/+/", 100));
    CHECK_THROWS_WITH(base64_decode("Zm9v!", 100), Catch::Contains("not base64"));
    CHECK_THROWS_WITH(base64_decode("Zg==Zg", 100), Catch::Contains("after its padding"));
    CHECK_THROWS_WITH(base64_decode("Z", 100), Catch::Contains("truncated"));
    CHECK_THROWS_WITH(base64_decode(std::string(4000, 'A'), 1000), Catch::Contains("--media-max-mib"));
    CHECK_THROWS_WITH(base64_decode("Zm9vYmFy", 5), Catch::Contains("--media-max-mib"));
}

TEST_CASE("data: URLs give their bytes; remote and unknown URLs are refused", "[media_source]") {
    CHECK(text(media_source_bytes("data:image/png;base64,Zm9v", "", 100)) == "foo");
    CHECK(text(media_source_bytes("DATA:;BASE64,Zm9v", "", 100)) == "foo");
    CHECK_THROWS_WITH(media_source_bytes("data:text/plain,foo", "", 100), Catch::Contains("only base64"));
    CHECK_THROWS_WITH(media_source_bytes("data:image/png;base64", "", 100), Catch::Contains("without a ','"));
    CHECK_THROWS_WITH(media_url_check("https://example.com/cat.png"), Catch::Contains("not fetched by this server"));
    CHECK_THROWS_WITH(media_url_check("HTTP://example.com/cat.png"), Catch::Contains("not fetched by this server"));
    CHECK_THROWS_WITH(media_url_check("ftp://x/y"), Catch::Contains("scheme 'ftp'"));
    CHECK_THROWS_AS(media_url_check("cat.png"), ninfer::Error);
    CHECK_NOTHROW(media_url_check("file:///tmp/x.png"));
}

TEST_CASE("file:// URLs are read only inside --allowed-local-media-path", "[media_source]") {
    ninfer::test::TempDir allowed, other;
    std::ofstream(allowed.path + "/a b.png") << "inside";
    std::ofstream(other.path + "/x.png") << "outside";
    std::filesystem::create_symlink(other.path + "/x.png", allowed.path + "/link.png");
    CHECK(text(media_source_bytes("file://" + allowed.path + "/a%20b.png", allowed.path, 100)) == "inside");
    CHECK_THROWS_WITH(media_source_bytes("file://" + allowed.path + "/a%20b.png", "", 100),
                      Catch::Contains("--allowed-local-media-path"));
    CHECK_THROWS_WITH(media_source_bytes("file://" + other.path + "/x.png", allowed.path, 100), Catch::Contains("outside"));
    CHECK_THROWS_WITH(media_source_bytes("file://" + allowed.path + "/link.png", allowed.path, 100), Catch::Contains("outside"));
    CHECK_THROWS_WITH(media_source_bytes("file://" + allowed.path + "/../" + std::filesystem::path(other.path).filename().string() +
                                             "/x.png", allowed.path, 100),
                      Catch::Contains("outside"));
    CHECK_THROWS_WITH(media_source_bytes("file://" + allowed.path + "/a%20b.png", allowed.path, 3), Catch::Contains("larger than"));
    try {
        media_source_bytes("file://" + allowed.path + "/missing.png", allowed.path, 100);
        FAIL("read a missing file");
    } catch (const ninfer::Error& e) {
        CHECK(e.kind() == ninfer::Errc::NotFound);
    }
    CHECK_THROWS_WITH(media_source_bytes("file://" + allowed.path, allowed.path, 100), Catch::Contains("not a regular file"));
}

TEST_CASE("placeholders expand to one pad per merged token, video frames with timestamps", "[media_source]") {
    VisionInput image;
    image.grid_t = 1, image.grid_h = 4, image.grid_w = 6; // 6 merged tokens
    VisionInput video;
    video.kind = VisionInput::Kind::Video;
    video.grid_t = 2, video.grid_h = 2, video.grid_w = 2; // 1 token a frame pair
    video.timestamps_s = {0.25, 1.75};
    const std::string img = "<|vision_start|><|image_pad|><|vision_end|>", vid = "<|vision_start|><|video_pad|><|vision_end|>";
    std::string pads;
    for (int i = 0; i < 6; ++i) pads += "<|image_pad|>";
    const std::vector<VisionInput> both = {image, video};
    // Python's f"{0.25:.1f}" is "0.2" (0.25 is exact: half to even), f"{1.75:.1f}" is "1.8".
    CHECK(expand_vision_placeholders("a" + img + "b" + vid + "c", both) ==
          "a<|vision_start|>" + pads + "<|vision_end|>b<0.2 seconds><|vision_start|><|video_pad|><|vision_end|>"
          "<1.8 seconds><|vision_start|><|video_pad|><|vision_end|>c");
    CHECK_THROWS_WITH(expand_vision_placeholders(vid + img, both), Catch::Contains("is an image but its placeholder"));
    CHECK_THROWS_WITH(expand_vision_placeholders(img, both), Catch::Contains("2 media items but the prompt 1"));
    CHECK_THROWS_WITH(expand_vision_placeholders(img + vid + img, both), Catch::Contains("more image/video placeholders"));
    CHECK(expand_vision_placeholders("plain", {}) == "plain");
}
