// ninfer tests - encode -> decode error bounds and dot_rows == decode + dot for every format.
#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

using namespace ninfer::core;

namespace {

const TensorFormat kAll[] = {TensorFormat::Bf16, TensorFormat::Fp32, TensorFormat::Int32,
                             TensorFormat::Q4G64Fp16, TensorFormat::Q5G64Fp16,
                             TensorFormat::Q6G64Fp16, TensorFormat::Q8G32Fp16,
                             TensorFormat::Fp8E4m3fnRowBf16, TensorFormat::Nvfp4};

std::vector<float> values_for(TensorFormat f, size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = d(rng) * (i % 97 == 0 ? 20.0f : 1.0f); // a few outliers per row
        if (f == TensorFormat::Int32)
            v[i] = std::round(v[i] * 1000.0f);
    }
    return v;
}

// Largest |x| of the quantization block containing element (row, col).
float block_max(TensorFormat f, const std::vector<float>& v, uint64_t k, uint64_t row, uint64_t col) {
    uint64_t g = f == TensorFormat::Nvfp4 ? 16 : f == TensorFormat::Q8G32Fp16 ? 32 : f == TensorFormat::Fp8E4m3fnRowBf16 ? k : 64;
    uint64_t c0 = col / g * g, c1 = std::min(k, c0 + g);
    float m = 0.0f;
    for (uint64_t c = c0; c < c1; ++c)
        m = std::max(m, std::fabs(v[row * k + c]));
    return m;
}

double allowed_error(TensorFormat f, float x, float bmax, float tensor_max) {
    switch (f) {
    case TensorFormat::Bf16: return std::fabs(x) * std::ldexp(1.0, -8);
    case TensorFormat::Fp32:
    case TensorFormat::Int32: return 0.0;
    case TensorFormat::Q4G64Fp16: return 0.51 * bmax / 7 * 1.001;
    case TensorFormat::Q5G64Fp16: return 0.51 * bmax / 15 * 1.001;
    case TensorFormat::Q6G64Fp16: return 0.51 * bmax / 31 * 1.001;
    case TensorFormat::Q8G32Fp16: return 0.51 * bmax / 127 * 1.001;
    case TensorFormat::Fp8E4m3fnRowBf16:
        return std::fabs(x) * (std::ldexp(1.0, -4) + std::ldexp(1.0, -8)) + bmax / 448 * std::ldexp(1.0, -9);
    case TensorFormat::Nvfp4:
        // Half the widest E2M1 step (1 of 6) plus E4M3 scale rounding, and the underflow of blocks
        // far below the tensor maximum (scale granularity 2^-9 of 448).
        return bmax * (1.0 / 6 + 1.0 / 16) + tensor_max * std::ldexp(1.0, -9) / 448 * 6;
    }
    return 0.0;
}

std::vector<uint64_t> shape_for(TensorFormat f) {
    if (f == TensorFormat::Nvfp4)
        return {256, 192};
    return {37, 300}; // K not a multiple of 128: exercises the padded tail group
}

} // namespace

TEST_CASE("encode -> decode stays within the format's error bound", "[round_trip]") {
    for (TensorFormat f : kAll) {
        INFO(format_name(f));
        auto shape = shape_for(f);
        const uint64_t n = shape[0], k = shape[1];
        auto v = values_for(f, n * k, 7);
        auto bytes = encode(f, shape, v);
        REQUIRE(bytes.size() == encoded_size(f, shape));
        StoredTensor t{"t", f, shape, bytes.data(), bytes.size()};
        std::vector<float> out(n * k);
        decode_rows(t, 0, n, out.data());
        float tmax = 0.0f;
        for (float x : v)
            tmax = std::max(tmax, std::fabs(x));
        uint64_t bad = 0;
        for (uint64_t r = 0; r < n; ++r)
            for (uint64_t c = 0; c < k; ++c) {
                const float x = v[r * k + c];
                const double err = std::fabs(double(out[r * k + c]) - x);
                if (err > allowed_error(f, x, block_max(f, v, k, r, c), tmax) + 1e-30)
                    ++bad;
            }
        CHECK(bad == 0);
        // Re-encoding decoded values is stable for the grouped formats (codes and scales fixed).
        if (f == TensorFormat::Q4G64Fp16 || f == TensorFormat::Q8G32Fp16 || f == TensorFormat::Bf16)
            CHECK(encode(f, shape, out) == bytes);
        // decode_elements agrees with decode_rows on an arbitrary span.
        std::vector<float> part(k + 5);
        decode_elements(t, 3 * k - 2, 4 * k + 3, part.data());
        CHECK(std::equal(part.begin(), part.end(), out.begin() + (3 * k - 2)));
    }
}

TEST_CASE("dot_rows equals decode followed by a dot product", "[round_trip]") {
    for (TensorFormat f : kAll) {
        INFO(format_name(f));
        auto shape = shape_for(f);
        const uint64_t n = shape[0], k = shape[1];
        auto bytes = encode(f, shape, values_for(f, n * k, 11));
        StoredTensor t{"t", f, shape, bytes.data(), bytes.size()};
        std::vector<float> w(n * k);
        decode_rows(t, 0, n, w.data());
        std::vector<float> x = values_for(TensorFormat::Fp32, k, 3);
        const uint64_t r0 = 5, nr = n - 9;
        std::vector<float> y(nr, -1.0f);
        dot_rows(t, r0, nr, x.data(), y.data());
        for (uint64_t r = 0; r < nr; ++r) {
            double ref = 0.0, mag = 0.0;
            for (uint64_t c = 0; c < k; ++c) {
                ref += double(w[(r0 + r) * k + c]) * x[c];
                mag += std::fabs(double(w[(r0 + r) * k + c]) * x[c]);
            }
            REQUIRE(std::fabs(y[r] - ref) <= 1e-5 * mag + 1e-6);
        }
    }
}

TEST_CASE("decode and dot refuse out-of-range rows and wrong sizes", "[round_trip]") {
    std::vector<uint64_t> shape = {4, 64};
    auto bytes = encode(TensorFormat::Q8G32Fp16, shape, std::vector<float>(256, 1.0f));
    StoredTensor t{"w", TensorFormat::Q8G32Fp16, shape, bytes.data(), bytes.size()};
    std::vector<float> x(64, 1.0f), y(8);
    CHECK_THROWS_AS(dot_rows(t, 3, 2, x.data(), y.data()), ninfer::Error);
    CHECK_THROWS_AS(decode_rows(t, 5, 0, y.data()), ninfer::Error);
    dot_rows(t, 0, 4, x.data(), y.data());
    CHECK(y[3] == Approx(64.0f).epsilon(1e-3)); // 1.0 quantizes to 127 * f16(1/127)
    t.bytes -= 1;
    CHECK_THROWS_AS(dot_rows(t, 0, 1, x.data(), y.data()), ninfer::Error);
}
