// ninfer tests - CRC-32C: the check value, hardware and table paths agree, and combining the CRCs
// of two pieces equals the CRC of the whole (artifact writers join pieces written out of order).
#include "core/util/crc32c.h"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace ninfer::core;

TEST_CASE("crc32c: check value and both paths", "[crc32c]") {
    const char* check = "123456789";
    CHECK(crc32c_extend(0, check, 9) == 0xE3069283u);
    CHECK(crc32c_extend_portable(0, check, 9) == 0xE3069283u);
    std::vector<uint8_t> data(1000);
    std::mt19937 rng(5);
    for (auto& b : data) b = uint8_t(rng());
    CHECK(crc32c_extend(0, data.data(), data.size()) == crc32c_extend_portable(0, data.data(), data.size()));
}

TEST_CASE("crc32c: combine(crc(A), crc(B), |B|) == crc(A then B)", "[crc32c]") {
    std::mt19937 rng(11);
    std::vector<uint8_t> data(70000);
    for (auto& b : data) b = uint8_t(rng());
    for (size_t split : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(4096), size_t(69999), data.size()}) {
        uint32_t a = crc32c_extend(0, data.data(), split);
        uint32_t b = crc32c_extend(0, data.data() + split, data.size() - split);
        INFO("split " << split);
        CHECK(crc32c_combine(a, b, data.size() - split) == crc32c_extend(0, data.data(), data.size()));
    }
    // Three pieces joined right to left, as a writer merging ranges in any order would.
    uint32_t p1 = crc32c_extend(0, data.data(), 100), p2 = crc32c_extend(0, data.data() + 100, 900),
             p3 = crc32c_extend(0, data.data() + 1000, 5000);
    CHECK(crc32c_combine(p1, crc32c_combine(p2, p3, 5000), 5900) == crc32c_extend(0, data.data(), 6000));
    CHECK(crc32c_combine(0x12345678u, 0, 0) == 0x12345678u);
    const std::vector<uint8_t> zeros(100000, 0);
    for (size_t n : {size_t(0), size_t(1), size_t(9), size_t(4096), size_t(99999)}) {
        INFO("zeros " << n);
        CHECK(crc32c_extend_zeros(0, n) == crc32c_extend(0, zeros.data(), n));
        CHECK(crc32c_extend_zeros(p1, n) == crc32c_extend(p1, zeros.data(), n));
    }
}
