// Hostile bytes against the container probing and decoding: random bytes, every truncation of
// the fixtures' headers, random corruptions. Each input either decodes or throws ninfer::Error;
// nothing crashes, hangs or throws anything else (run under ASan for memory errors).
#include "core/media/media_decode.h"
#include "core/media/media_sniff.h"
#include "core/util/error.h"
#include "media_fixtures.h"

#include <catch2/catch.hpp>

#include <random>

using namespace ninfer::core;
using Kind = VisionInput::Kind;

namespace {

// Decodes; returns true when it decoded, false on a ninfer::Error. Anything else fails the test.
bool try_decode(Kind kind, const std::vector<uint8_t>& bytes) {
    MediaLimits limits;
    limits.max_source_pixels = 4096 * 4096;
    try {
        const VisionInput v = decode_media(kind, bytes, MediaConfig{}, limits);
        REQUIRE(v.patches.size() == v.n_patches() * v.patch_dim());
        return true;
    } catch (const ninfer::Error&) {
        return false;
    }
}

const char* const kFixtures[] = {"grad.png", "grad.jpg", "grad.webp", "grad.gif", "anim.gif", "clip.mp4", "clip.webm", "clip.mkv"};

} // namespace

TEST_CASE("random bytes are refused, never crash", "[media_fuzz]") {
    std::mt19937 rng(31);
    int decoded = 0;
    for (int i = 0; i < 400; ++i) {
        std::vector<uint8_t> bytes(rng() % 2048);
        for (auto& b : bytes) b = uint8_t(rng());
        // Every fourth input starts with a real signature so the probing goes deeper.
        static const std::vector<std::vector<uint8_t>> heads = {
            {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, {0xff, 0xd8, 0xff}, {'G', 'I', 'F', '8', '9', 'a'},
            {0, 0, 0, 0x20, 'f', 't', 'y', 'p'}, {0x1a, 0x45, 0xdf, 0xa3}};
        const auto& h = heads[size_t(i / 4) % heads.size()];
        if (i % 4 == 0 && bytes.size() >= h.size()) std::copy(h.begin(), h.end(), bytes.begin());
        decoded += try_decode(i % 2 ? Kind::Video : Kind::Image, bytes);
        try {
            (void)sniff_image(bytes);
        } catch (const ninfer::Error&) {
        }
    }
    CHECK(decoded == 0);
}

TEST_CASE("every truncation of the fixtures' first 600 bytes, and a stride through the rest", "[media_fuzz]") {
    for (const char* name : kFixtures) {
        INFO(name);
        const auto whole = media_fixture(name);
        const Kind kind = std::string(name).find("clip") == 0 ? Kind::Video : Kind::Image;
        for (size_t n = 0; n < whole.size(); n += n < 600 ? 1 : 97) {
            std::vector<uint8_t> cut(whole.begin(), whole.begin() + std::ptrdiff_t(n));
            try_decode(kind, cut);
            try {
                (void)sniff_image(cut);
            } catch (const ninfer::Error&) {
            }
        }
        CHECK(try_decode(kind, whole));
    }
}

TEST_CASE("random corruption of the fixtures", "[media_fuzz]") {
    std::mt19937 rng(7);
    for (const char* name : kFixtures) {
        INFO(name);
        const auto whole = media_fixture(name);
        const Kind kind = std::string(name).find("clip") == 0 ? Kind::Video : Kind::Image;
        for (int i = 0; i < 60; ++i) {
            auto bytes = whole;
            for (int k = 0, n = 1 + int(rng() % 8); k < n; ++k) bytes[rng() % bytes.size()] = uint8_t(rng());
            try_decode(kind, bytes);
        }
    }
}
