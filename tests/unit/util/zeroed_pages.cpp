// ninfer tests - ZeroedPageAllocator: fresh vectors are zero without a pass over them (small ones
// from calloc, large ones from their own 2 MiB-aligned mapping), copies and moves keep the bytes.
#include "core/util/zeroed_pages.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace ninfer::core;
using Bytes = std::vector<uint8_t, ZeroedPageAllocator<uint8_t>>;

namespace {
bool all_zero(const Bytes& b) {
    return std::all_of(b.begin(), b.end(), [](uint8_t x) { return x == 0; });
}
} // namespace

TEST_CASE("zeroed pages: fresh vectors are zero, large ones start on a huge-page boundary", "[zeroed_pages]") {
    for (size_t n : {size_t(0), size_t(1), size_t(4095), kHugeRegionBytes - 1, kHugeRegionBytes,
                     3 * kHugeRegionBytes + 12345}) {
        CAPTURE(n);
        for (int round = 0; round < 3; ++round) { // reused memory must come back zero as well
            Bytes b;
            b.resize(n);
            REQUIRE(b.size() == n);
            CHECK(all_zero(b));
            if (n >= kHugeRegionBytes) CHECK(reinterpret_cast<uintptr_t>(b.data()) % kHugeRegionBytes == 0);
            std::fill(b.begin(), b.end(), uint8_t(0xa5)); // dirty it before it goes back
            Bytes sized(n);
            CHECK(all_zero(sized));
        }
    }
}

TEST_CASE("zeroed pages: copies, moves and growth keep the bytes", "[zeroed_pages]") {
    Bytes a(3 * kHugeRegionBytes);
    for (size_t i = 0; i < a.size(); i += 4093) a[i] = uint8_t(i * 31);
    Bytes copy = a;
    CHECK(copy == a);
    const uint8_t* where = a.data();
    Bytes moved = std::move(a);
    CHECK(moved.data() == where); // a move hands the mapping over
    CHECK(moved == copy);
    Bytes small(100, uint8_t(7));
    small.resize(5 * kHugeRegionBytes); // grows into a mapping: old bytes, then zeros
    CHECK(std::all_of(small.begin(), small.begin() + 100, [](uint8_t x) { return x == 7; }));
    CHECK(std::all_of(small.begin() + 100, small.end(), [](uint8_t x) { return x == 0; }));
    std::vector<uint32_t, ZeroedPageAllocator<uint32_t>> words(kHugeRegionBytes); // 8 MiB of u32
    CHECK(std::all_of(words.begin(), words.end(), [](uint32_t x) { return x == 0; }));
}
