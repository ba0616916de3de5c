// ninfer tests - row-band encoding: bands in any order plus the plane padding rebuild exactly the
// whole tensor's encoding, every byte written once, in every format (nvfp4's divisor included).
#include "core/convert/row_chunks.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

using namespace ninfer::core;

namespace {

void check_bands(TensorFormat f, uint64_t rows, uint64_t cols, uint64_t granule, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(rows * cols);
    for (float& v : values)
        v = normal(rng) * (f == TensorFormat::Int32 ? 100.0f : 1.0f);
    if (f == TensorFormat::Int32)
        for (float& v : values)
            v = std::round(v);
    values[rng() % values.size()] = 950.0f; // one outlier sets nvfp4's divisor, in one band only
    const std::array<uint64_t, 2> shape = {rows, cols};
    const std::vector<uint8_t> whole = encode(f, shape, values);
    float amax = 0.0f;
    for (float v : values)
        amax = std::max(amax, std::fabs(v));

    // Bands of random sizes (multiples of the granule), visited in random order.
    std::vector<std::pair<uint64_t, uint64_t>> bands;
    for (uint64_t r0 = 0; r0 < rows;) {
        uint64_t n = std::min(rows - r0, granule * (1 + rng() % 3));
        if (n == rows)
            n = granule; // at least two bands
        bands.push_back({r0, n});
        r0 += n;
    }
    std::shuffle(bands.begin(), bands.end(), rng);
    std::vector<uint8_t> built(whole.size(), 0xAA);
    std::vector<int> times(whole.size(), 0);
    const ObjectSink sink = [&](uint64_t offset, std::span<const uint8_t> bytes) {
        REQUIRE(offset + bytes.size() <= built.size());
        std::copy(bytes.begin(), bytes.end(), built.begin() + ptrdiff_t(offset));
        for (uint64_t i = 0; i < bytes.size(); ++i)
            ++times[offset + i];
    };
    for (auto [r0, n] : bands)
        write_row_chunk(f, rows, cols, r0, n, std::span(values).subspan(r0 * cols, n * cols), amax, sink);
    write_plane_padding(f, rows, cols, sink);
    INFO(format_name(f) << " [" << rows << "," << cols << "] in " << bands.size() << " bands");
    CHECK(std::all_of(times.begin(), times.end(), [](int t) { return t == 1; }));
    CHECK(built == whole);
}

} // namespace

TEST_CASE("row_chunks: bands rebuild the whole encoding in every format", "[row_chunks]") {
    const TensorFormat formats[] = {TensorFormat::Bf16, TensorFormat::Fp32, TensorFormat::Int32,
                                    TensorFormat::Q4G64Fp16, TensorFormat::Q5G64Fp16, TensorFormat::Q6G64Fp16,
                                    TensorFormat::Q8G32Fp16, TensorFormat::Fp8E4m3fnRowBf16};
    uint32_t seed = 1;
    for (TensorFormat f : formats)
        for (uint64_t cols : {uint64_t(7), uint64_t(130), uint64_t(256)}) {
            check_bands(f, 37, cols, 1 + seed % 5, seed); // argument order is unspecified: no seed++ here
            ++seed;
        }
    check_bands(TensorFormat::Nvfp4, 640, 192, 128, 3);
    check_bands(TensorFormat::Nvfp4, 256, 64, 128, 4);
}

TEST_CASE("row_chunks: a band outside the tensor is refused", "[row_chunks]") {
    std::vector<float> v(2 * 8, 1.0f);
    const ObjectSink ignore = [](uint64_t, std::span<const uint8_t>) {};
    CHECK_THROWS(write_row_chunk(TensorFormat::Bf16, 3, 8, 2, 2, v, 0.0f, ignore));
}
