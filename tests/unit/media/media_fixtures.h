// Test helper: the media fixtures of tests/fixtures/media (make_fixtures.sh says how each was made).
#pragma once

#include "core/vision/vision_input.h"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

// The bytes of tests/fixtures/media/NAME (NAME may name a subdirectory, e.g. "resize/up.png").
inline std::vector<uint8_t> media_fixture(const std::string& name) {
    std::ifstream in(std::string(NINFER_SOURCE_DIR) + "/tests/fixtures/media/" + name, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.empty()) throw std::runtime_error("missing media fixture " + name);
    return bytes;
}

// A PNG signature and IHDR chunk claiming width x height (no image data follows).
inline std::vector<uint8_t> png_header(uint32_t width, uint32_t height) {
    std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    for (uint32_t v : {width, height})
        for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
    for (uint8_t v : {8, 2, 0, 0, 0, 0, 0, 0, 0}) b.push_back(v); // depth, colour type, ..., crc
    return b;
}

// The frames a VisionInput's patches were made from, back in pixel order: [grid_t*T][H][W][3]
// floats (normalised values), through vision_input.h's row/column formula.
inline std::vector<float> unpatchify(const ninfer::core::VisionInput& v) {
    const int64_t P = v.patch_size, M = v.merge_size, T = v.temporal_patch_size, gh = v.grid_h, gw = v.grid_w;
    const int64_t H = gh * P, W = gw * P;
    std::vector<float> frames(size_t(int64_t(v.grid_t) * T * H * W * 3));
    for (size_t r = 0; r < v.n_patches(); ++r) {
        const int64_t t = int64_t(r) / (gh * gw), q = int64_t(r) % (gh * gw);
        const int64_t by = q / ((gw / M) * M * M), bx = (q / (M * M)) % (gw / M), my = (q / M) % M, mx = q % M;
        const int64_t py = by * M + my, px = bx * M + mx;
        for (size_t k = 0; k < v.patch_dim(); ++k) {
            const int64_t c = int64_t(k) / (T * P * P), tt = (int64_t(k) / (P * P)) % T, y = (int64_t(k) / P) % P, x = int64_t(k) % P;
            const int64_t f = t * T + tt;
            frames[size_t(((f * H + py * P + y) * W + px * P + x) * 3 + c)] = v.patches[r * v.patch_dim() + k];
        }
    }
    return frames;
}
