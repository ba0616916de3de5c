// Decoding the fixtures (tests/fixtures/media/make_fixtures.sh) into VisionInput: geometry, the
// exact patch values of lossless inputs checked through vision_input.h's row/column formula,
// alpha over white, GIF's first frame, video sampling and timestamps, digests.
#include "core/media/media_decode.h"
#include "core/media/media_reader.h"
#include "core/media/sha256.h"
#include "media_fixtures.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

using namespace ninfer::core;
using Kind = VisionInput::Kind;

namespace {

const MediaConfig kConfig;  // docs/MODEL.md §9 upstream bounds: a 64x64 image needs no resize
const MediaLimits kLimits;

// Every value of v against pixel(c, y, x) of its frame (all frames are the same picture here),
// read back through vision_input.h's row/column formula (media_fixtures.h's unpatchify).
template <class Pixel> void check_every_value(const VisionInput& v, Pixel pixel) {
    REQUIRE(v.patches.size() == v.n_patches() * v.patch_dim());
    const std::vector<float> frames = unpatchify(v);
    const int64_t H = int64_t(v.grid_h) * v.patch_size, W = int64_t(v.grid_w) * v.patch_size;
    size_t bad = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
        const int64_t c = int64_t(i % 3), x = int64_t(i / 3) % W, y = int64_t(i / 3 / size_t(W)) % H;
        bad += frames[i] != (float(pixel(int(c), int(y), int(x))) - 127.5f) / 127.5f;
    }
    CHECK(bad == 0);
}

// Y'CbCr (8-bit, limited or full range) -> R'G'B' levels with the matrix (kr, kb), exact and
// clipped: what a decoder that honours the stream's tags gives, within swscale's integer rounding.
std::array<double, 3> ycbcr_to_rgb(double y, double cb, double cr, double kr, double kb, bool full) {
    const double luma = full ? y : (y - 16) * 255 / 219;
    const double pb = full ? cb - 128 : (cb - 128) * 255 / 224, pr = full ? cr - 128 : (cr - 128) * 255 / 224;
    const double r = luma + 2 * (1 - kr) * pr, b = luma + 2 * (1 - kb) * pb;
    const double g = (luma - kr * r - kb * b) / (1 - kr - kb);
    return {std::clamp(r, 0.0, 255.0), std::clamp(g, 0.0, 255.0), std::clamp(b, 0.0, 255.0)};
}

} // namespace

TEST_CASE("a lossless PNG becomes its exact patches in transformers' order", "[media_decode]") {
    const VisionInput v = decode_media(Kind::Image, media_fixture("grad.png"), kConfig, kLimits);
    CHECK(v.kind == Kind::Image);
    CHECK(v.grid_t == 1);
    CHECK(v.grid_h == 4);
    CHECK(v.grid_w == 4);
    CHECK(v.patch_dim() == 1536);
    CHECK(v.merged_tokens() == 4);
    CHECK(v.timestamps_s.empty());
    // make_fixtures.sh: pixel (x, y) = (4x, 4y, 2(x+y)); both frames of the temporal pair are the image.
    check_every_value(v, [](int c, int y, int x) { return c == 0 ? 4 * x : c == 1 ? 4 * y : 2 * (x + y); });
}

TEST_CASE("alpha is composited on white and a GIF gives its first frame", "[media_decode]") {
    const VisionInput a = decode_media(Kind::Image, media_fixture("alpha.png"), kConfig, kLimits);
    REQUIRE(a.grid_h == 2);
    REQUIRE(a.grid_w == 2);
    check_every_value(a, [](int c, int, int x) { return x < 16 ? 255 : c == 0 ? 255 : 0; });
    const VisionInput g = decode_media(Kind::Image, media_fixture("anim.gif"), kConfig, kLimits);
    // Red in the GIF encoder's 3-3-2 palette is (252, 0, 0); the second frame is blue.
    check_every_value(g, [](int c, int, int) { return c == 0 ? 252 : 0; });
}

TEST_CASE("JPEG, WebP and GIF images are resized to multiples of 32", "[media_decode]") {
    for (const char* name : {"grad.jpg", "grad.webp", "grad.gif"}) {
        INFO(name);
        const VisionInput v = decode_media(Kind::Image, media_fixture(name), kConfig, kLimits);
        CHECK(v.grid_h == 4); // 96x48 -> smart_resize (64, 96)
        CHECK(v.grid_w == 6);
        CHECK(v.merged_tokens() == 6);
        if (std::string(name) == "grad.gif") continue; // 3-3-2 palette with dithering: no smooth gradient
        // The pattern survives: in the top-left patch red (4x) grows along x, green (4y) along y;
        // column k = c*512 + tt*256 + y*16 + x.
        CHECK(v.patches[15] > v.patches[0] + 0.3f);      // red at x = 15 vs x = 0 (60/127.5 apart)
        CHECK(v.patches[512 + 15 * 16] > v.patches[512] + 0.3f); // green at y = 15 vs y = 0
        for (float x : v.patches) REQUIRE(std::fabs(x) <= 1.0f);
    }
}

TEST_CASE("videos: frames sampled at 2 fps, paired, resized, with pair timestamps", "[media_decode]") {
    // 20 frames at 10 fps: frames 0, 6, 13, 19; video bounds make 4 x 64x64 -> 192x192.
    for (const char* name : {"clip.mp4", "clip.webm", "clip.mkv"}) {
        INFO(name);
        const VisionInput v = decode_media(Kind::Video, media_fixture(name), kConfig, kLimits);
        CHECK(v.kind == Kind::Video);
        CHECK(v.grid_t == 2);
        CHECK(v.grid_h == 12);
        CHECK(v.grid_w == 12);
        CHECK(v.merged_tokens() == 72);
        REQUIRE(v.timestamps_s.size() == 2);
        CHECK(v.timestamps_s[0] == Approx(0.3));
        CHECK(v.timestamps_s[1] == Approx(1.6));
        const MediaPlan plan = plan_media(Kind::Video, media_fixture(name), kConfig, kLimits);
        CHECK(plan.frame_indices == std::vector<int64_t>{0, 6, 13, 19});
        CHECK(plan.merged_tokens == 72);
    }
}

TEST_CASE("a video's frame threads give the frames one thread gives", "[media_decode]") {
    for (const char* name : {"clip.mp4", "clip.webm", "clip.mkv", "colour_bt709.mp4"}) {
        INFO(name);
        MediaLimits one = kLimits, many = kLimits;
        one.decoder_threads = 1;
        many.decoder_threads = 4;
        const VisionInput a = decode_media(Kind::Video, media_fixture(name), kConfig, one);
        const VisionInput b = decode_media(Kind::Video, media_fixture(name), kConfig, many);
        CHECK(a.grid_t == b.grid_t);
        CHECK(a.timestamps_s == b.timestamps_s);
        CHECK(a.patches == b.patches); // bit for bit
    }
}

TEST_CASE("skipping unsampled frames gives the frames of decoding every frame", "[media_decode]") {
    // bframes.mp4: 90 frames at 30 fps with pyramid B-frames (some sampled frames are
    // non-reference ones, which must still be decoded) and a second keyframe; clip.mp4 has B-frames
    // too. The others take the plain path whatever the option says (not H.264 in MP4).
    for (const char* name : {"bframes.mp4", "clip.mp4", "colour_bt709.mp4", "colour_untagged.mp4", "hour.mp4", "clip.webm",
                             "clip.mkv"}) {
        for (int threads : {1, 4}) {
            INFO(name << ", " << threads << " threads");
            MediaLimits every = kLimits, skip = kLimits;
            every.decoder_threads = skip.decoder_threads = threads;
            every.max_video_seconds = skip.max_video_seconds = 3600; // hour.mp4
            every.skip_unsampled_frames = false;
            skip.skip_unsampled_frames = true;
            const VisionInput a = decode_media(Kind::Video, media_fixture(name), kConfig, every);
            const VisionInput b = decode_media(Kind::Video, media_fixture(name), kConfig, skip);
            CHECK(a.grid_t == b.grid_t);
            CHECK(a.timestamps_s == b.timestamps_s);
            CHECK(a.digest == b.digest);
            CHECK(a.patches == b.patches); // bit for bit
        }
    }
}

TEST_CASE("decode_only lets the H.264 decoder drop unsampled frames, and returns every sampled one", "[media_decode]") {
    const std::vector<uint8_t> bytes = media_fixture("bframes.mp4");
    const MediaPlan plan = plan_media(Kind::Video, bytes, kConfig, kLimits);
    REQUIRE(plan.frame_indices.size() == 6);
    auto decoded = [&](bool skip, int threads) {
        MediaLimits limits = kLimits;
        limits.decoder_threads = threads;
        MediaReader reader(bytes, limits);
        if (skip) reader.decode_only(plan.frame_indices);
        std::vector<int64_t> indices;
        while (reader.next_frame()) indices.push_back(reader.frame_index());
        return indices;
    };
    for (int threads : {1, 3}) {
        INFO(threads << " threads");
        const std::vector<int64_t> every = decoded(false, threads), some = decoded(true, threads);
        REQUIRE(every.size() == 90);
        CHECK(every.back() == 89);
        CHECK(some.size() < 80); // the non-reference B-frames not sampled are gone
        CHECK(std::is_sorted(some.begin(), some.end()));
        for (int64_t i : plan.frame_indices) CHECK(std::count(some.begin(), some.end(), i) == 1);
    }
    // VP9 in WebM: no skipping, every frame in order.
    MediaReader webm(media_fixture("clip.webm"), kLimits);
    webm.decode_only(std::vector<int64_t>{0, 6, 13, 19});
    int64_t n = 0;
    while (webm.next_frame()) CHECK(webm.frame_index() == n++);
    CHECK(n == 20);
}

TEST_CASE("an image sent as a video is one frame, repeated to a temporal pair", "[media_decode]") {
    const VisionInput v = decode_media(Kind::Video, media_fixture("grad.png"), kConfig, kLimits);
    CHECK(v.grid_t == 1);
    CHECK(v.timestamps_s.size() == 1);
}

TEST_CASE("digests: the same pixels give the same digest, other pixels or kinds another", "[media_decode]") {
    const auto a = decode_media(Kind::Image, media_fixture("grad.png"), kConfig, kLimits).digest;
    const auto b = decode_media(Kind::Image, media_fixture("grad.png"), kConfig, kLimits).digest;
    const auto c = decode_media(Kind::Image, media_fixture("alpha.png"), kConfig, kLimits).digest;
    const auto d = decode_media(Kind::Video, media_fixture("grad.png"), kConfig, kLimits).digest;
    CHECK(a == b);
    CHECK(a != c);
    CHECK(a != d);
}

TEST_CASE("SHA-256 matches FIPS 180-4's examples, with and without the CPU's SHA instructions", "[media_decode]") {
    auto hex = [](const std::array<uint8_t, 32>& d) {
        std::string s;
        for (uint8_t b : d) s += "0123456789abcdef"[b >> 4], s += "0123456789abcdef"[b & 15];
        return s;
    };
    for (bool hardware : {false, true}) {
        INFO((hardware ? "SHA instructions where the CPU has them: " : "portable: ") << Sha256::hardware_available());
        auto digest = [&](const std::string& text) {
            Sha256 h(hardware);
            h.update(text.data(), text.size());
            return hex(h.finish());
        };
        CHECK(digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        Sha256 h(hardware); // fed in uneven pieces
        for (size_t i = 0; i < two.size(); i += 7) h.update(two.data() + i, std::min<size_t>(7, two.size() - i));
        CHECK(hex(h.finish()) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        CHECK(digest(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
    // Every length around the block and padding boundaries, both ways, the same digest.
    std::string text;
    for (size_t n = 0; n < 300; ++n) {
        Sha256 portable(false), native(true);
        portable.update(text.data(), text.size());
        native.update(text.data(), text.size());
        CHECK(portable.finish() == native.finish());
        text += char(n * 37 + 11);
    }
    const std::string abc = "abc";
    CHECK(hex(sha256({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()})) ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("video frames take the stream's tagged colour matrix and range (BT.601 limited untagged)", "[media_decode]") {
    MediaConfig config;
    config.video.min_pixels = 4096; // 4 frames of 64x64 need no resize
    constexpr double k709[2] = {0.2126, 0.0722}, k601[2] = {0.299, 0.114};
    struct Case {
        const char* file;
        const double* k;
        bool full;
    };
    for (const Case& c : {Case{"colour_bt709.mp4", k709, false}, Case{"colour_bt709_full.mp4", k709, true},
                          Case{"colour_untagged.mp4", k601, false}}) {
        INFO(c.file);
        const VisionInput v = decode_media(Kind::Video, media_fixture(c.file), config, kLimits);
        REQUIRE(v.grid_h * v.patch_size == 64);
        REQUIRE(v.grid_w * v.patch_size == 64);
        const std::vector<float> frames = unpatchify(v); // frame 0 first, [64][64][3]
        struct Region {
            int x;
            double y, cb, cr; // the clip's stored values (make_fixtures.sh)
        };
        double apart = 0; // how far the other matrix is: the check must be able to tell them apart
        for (const Region& r : {Region{10, 81, 121, 197}, Region{50, 90, 191, 96}}) {
            const std::array<double, 3> want = ycbcr_to_rgb(r.y, r.cb, r.cr, c.k[0], c.k[1], c.full);
            const double* other = c.k == k709 ? k601 : k709;
            const std::array<double, 3> wrong = ycbcr_to_rgb(r.y, r.cb, r.cr, other[0], other[1], c.full);
            for (int ch = 0; ch < 3; ++ch) {
                const double got = double(frames[(size_t(32) * 64 + size_t(r.x)) * 3 + size_t(ch)]) * 127.5 + 127.5;
                CHECK(std::abs(got - want[size_t(ch)]) <= 3.0);
                apart = std::max(apart, std::abs(want[size_t(ch)] - wrong[size_t(ch)]));
            }
        }
        CHECK(apart > 10.0);
    }
}
