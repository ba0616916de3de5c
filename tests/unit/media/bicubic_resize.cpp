// resize_bicubic_u8's two horizontal passes agree: interleaved RGB24 (the SSE4.1 pass where the CPU
// has it, each window a fixed length moved inside the row) and planar RGB (the scalar pass over
// make_taps' windows), on random pixels, downscales and upscales, windows at both row ends.
#include "core/media/bicubic_resize.h"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace ninfer::core;

TEST_CASE("interleaved and planar RGB resize to the same bytes", "[bicubic_resize]") {
    std::mt19937 rng(31);
    const int cases[][4] = {{1280, 72, 832, 48}, {90, 60, 96, 64}, {30, 24, 64, 64}, {150, 100, 96, 64}, {37, 200, 32, 192},
                            {8, 8, 32, 32},      {3, 5, 64, 64},   {1000, 10, 123, 10}, {97, 13, 31, 7}, {640, 36, 200, 36}};
    for (const auto& c : cases) {
        const int w = c[0], h = c[1], dw = c[2], dh = c[3];
        INFO(w << "x" << h << " -> " << dw << "x" << dh);
        const size_t n = size_t(w) * size_t(h);
        std::vector<uint8_t> packed(3 * n), planar(3 * n);
        for (uint8_t& v : packed) v = uint8_t(rng() % 5 == 0 ? (rng() & 1) * 255 : rng()); // edges overshoot
        for (size_t i = 0; i < n; ++i)
            for (size_t ch = 0; ch < 3; ++ch) planar[ch * n + i] = packed[3 * i + ch];
        std::vector<uint8_t> a(size_t(dw) * size_t(dh) * 3), b(a.size(), 1);
        resize_bicubic_u8(rgb24_view(packed.data(), w, h, ptrdiff_t(w) * 3), dw, dh, a.data());
        const RgbView planes{w, h, {planar.data(), planar.data() + n, planar.data() + 2 * n}, 1, {w, w, w}};
        resize_bicubic_u8(planes, dw, dh, b.data());
        CHECK(a == b);
    }
}
