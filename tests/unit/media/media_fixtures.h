// Test helper: the media fixtures of tests/fixtures/media (make_fixtures.sh says how each was made).
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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
