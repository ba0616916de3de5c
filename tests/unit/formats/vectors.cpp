// ninfer tests - bit-exact worked vectors of docs/ARTIFACT_FORMAT.md §2-§3 (bit order, scales,
// rounding ties).
#include "core/formats/codec.h"
#include "core/formats/codec_detail.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

using namespace ninfer::core;

namespace {

struct Packed {
    std::vector<uint8_t> base = std::vector<uint8_t>(32, 0), high = std::vector<uint8_t>(16, 0);
};

// Packs one group's codes (the rest of the lanes 0) and checks unpacking gives them back.
Packed pack(uint32_t bits, const std::vector<int>& codes) {
    int8_t q[64] = {};
    for (size_t i = 0; i < codes.size(); ++i)
        q[i] = int8_t(codes[i]);
    Packed p;
    detail::pack_group(bits, q, p.base.data(), p.high.data());
    int8_t back[64];
    detail::unpack_group(bits, p.base.data(), p.high.data(), back);
    for (size_t i = 0; i < codes.size(); ++i)
        CHECK(int(back[i]) == codes[i]);
    return p;
}

StoredTensor view(TensorFormat f, std::vector<uint64_t> shape, const std::vector<uint8_t>& bytes) {
    return StoredTensor{"t", f, std::move(shape), bytes.data(), bytes.size()};
}

} // namespace

TEST_CASE("q4/q5/q6/q8 bit-order vectors (§3.2)", "[vectors]") {
    auto q4 = pack(4, {-8, -7, -1, 0, 1, 7});
    CHECK(q4.base[0] == 0x98);
    CHECK(q4.base[1] == 0x0F);
    CHECK(q4.base[2] == 0x71);

    auto q5 = pack(5, {-16, -15, -1, 0, 1, 15});
    CHECK(q5.base[0] == 0x10);
    CHECK(q5.base[1] == 0x0F);
    CHECK(q5.base[2] == 0xF1);
    CHECK(q5.high[0] == 0x07);

    auto q6 = pack(6, {-32, -31, -17, -16, -1, 0, 15, 31});
    CHECK(q6.base[0] == 0x10);
    CHECK(q6.base[1] == 0x0F);
    CHECK(q6.base[2] == 0x0F);
    CHECK(q6.base[3] == 0xFF);
    CHECK(q6.high[0] == 0xEA);
    CHECK(q6.high[1] == 0x43);

    auto q8 = pack(8, {-127, -1, 0, 1, 127});
    CHECK(std::vector<uint8_t>(q8.base.begin(), q8.base.begin() + 5) ==
          std::vector<uint8_t>{0x81, 0xFF, 0x00, 0x01, 0x7F});

    // The encoder lays a group out through the same packing: max 31 pins q6's scale to 1.0.
    std::vector<float> v(64, 0.0f);
    const float xs[] = {-31, -17, -16, -1, 0, 15, 31};
    std::copy(std::begin(xs), std::end(xs), v.begin());
    std::vector<uint64_t> shape = {1, 64};
    auto b = encode(TensorFormat::Q6G64Fp16, shape, v);
    auto g6 = row_split_geometry(TensorFormat::Q6G64Fp16, 1, 64);
    CHECK(b[g6.scale_off] == 0x00); // 1.0 = 0x3C00, little-endian
    CHECK(b[g6.scale_off + 1] == 0x3C);
    std::vector<float> out(64);
    decode_rows(view(TensorFormat::Q6G64Fp16, shape, b), 0, 1, out.data());
    CHECK(std::vector<float>(out.begin(), out.begin() + 7) == std::vector<float>(std::begin(xs), std::end(xs)));
}

TEST_CASE("binary16 scale words (§3.2: 1.5 -> 00 3E, 0.25 -> 00 34)", "[vectors]") {
    CHECK(f32_to_f16(1.5f) == 0x3E00);
    CHECK(f32_to_f16(0.25f) == 0x3400);
    CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
    CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);            // tie to even -> 0
    CHECK(f32_to_f16(std::ldexp(1.5f, -25)) == 0x0001);
    CHECK(f32_to_f16(65504.0f) == 0x7BFF);
    CHECK(f32_to_f16(65519.0f) == 0x7BFF);
    CHECK(f32_to_f16(65520.0f) == 0x7C00);                          // tie rounds to infinity
    CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie to even (down)
    CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie to even (up)
    for (uint32_t h = 0; h < 0x7C00; ++h) // every finite positive word survives a round trip
        REQUIRE(f32_to_f16(f16_to_f32(uint16_t(h))) == h);
}

TEST_CASE("grouped encoder: scale, reciprocal multiply, ties to even", "[vectors]") {
    // Group max 7 -> scale 1.0: ties +-0.5 -> 0, +-1.5 -> +-2, +-2.5 -> +-2.
    std::vector<float> v(64, 0.0f);
    const float xs[] = {0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 7.0f};
    std::copy(std::begin(xs), std::end(xs), v.begin());
    std::vector<uint64_t> shape = {1, 64};
    auto b = encode(TensorFormat::Q4G64Fp16, shape, v);
    std::vector<float> out(64);
    decode_rows(view(TensorFormat::Q4G64Fp16, shape, b), 0, 1, out.data());
    CHECK(std::vector<float>(out.begin(), out.begin() + 7) == std::vector<float>{0, 0, 2, -2, 2, -2, 7});

    // All-zero group: scale word +0, all codes 0. Tiny group: scale clamps to 0x0001.
    std::vector<float> z(128, 0.0f);
    z[64] = 1e-30f;
    std::vector<uint64_t> s2 = {1, 128};
    auto bz = encode(TensorFormat::Q8G32Fp16, s2, z);
    auto g = row_split_geometry(TensorFormat::Q8G32Fp16, 1, 128);
    uint16_t w0, w2;
    std::memcpy(&w0, bz.data() + g.scale_off, 2);
    std::memcpy(&w2, bz.data() + g.scale_off + 4, 2);
    CHECK(w0 == 0x0000);
    CHECK(w2 == 0x0001);

    // Padding: K=130 leaves lanes >= K zero and groups beyond ceil(K/G) with scale 0.
    std::vector<float> p(130, 3.0f);
    std::vector<uint64_t> s3 = {1, 130};
    auto bp = encode(TensorFormat::Q4G64Fp16, s3, p);
    auto gp = row_split_geometry(TensorFormat::Q4G64Fp16, 1, 130);
    CHECK(bp[64] == 0x77);     // group 2 lanes 0,1 = code 7
    CHECK(bp[65] == 0x00);     // lanes 2.. are padding
    uint16_t s_last;
    std::memcpy(&s_last, bp.data() + gp.scale_off + 6, 2);
    CHECK(s_last == 0);

    std::vector<float> bad(64, 1.0f);
    bad[5] = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_AS(encode(TensorFormat::Q5G64Fp16, shape, bad), ninfer::Error);
    bad[5] = std::numeric_limits<float>::infinity();
    CHECK_THROWS_AS(encode(TensorFormat::Q8G32Fp16, shape, bad), ninfer::Error);
    bad[5] = 1e6f; // scale 1e6/7 overflows binary16
    CHECK_THROWS_AS(encode(TensorFormat::Q4G64Fp16, shape, bad), ninfer::Error);
}

TEST_CASE("bf16 words and direct contiguous layout (§3.1 Ex2, test vectors)", "[vectors]") {
    std::vector<float> v = {0.0f, -0.0f, 1.0f, std::bit_cast<float>(0x7FC10000u)};
    std::vector<uint64_t> shape = {2, 2};
    auto b = encode(TensorFormat::Bf16, shape, v);
    CHECK(b == std::vector<uint8_t>{0x00, 0x00, 0x00, 0x80, 0x80, 0x3F, 0xC1, 0x7F});
    const uint16_t words[] = {0x0000, 0x8000, 0x0001, 0x7FC1, 0x7F81};
    auto w = encode_bf16_words(words);
    for (size_t i = 0; i < std::size(words); ++i)
        CHECK((w[2 * i] | (w[2 * i + 1] << 8)) == words[i]);
    CHECK(f32_to_bf16(std::bit_cast<float>(0x3F808000u)) == 0x3F80); // tie to even (down)
    CHECK(f32_to_bf16(std::bit_cast<float>(0x3F818000u)) == 0x3F82); // tie to even (up)
    CHECK((f32_to_bf16(std::bit_cast<float>(0x7F800001u)) & 0x7FC0) == 0x7FC0); // NaN stays NaN
    std::vector<float> f = {std::bit_cast<float>(0x7FC01234u)};
    auto fb = encode(TensorFormat::Fp32, std::vector<uint64_t>{}, f);
    uint32_t word;
    std::memcpy(&word, fb.data(), 4);
    CHECK(word == 0x7FC01234u);
    std::vector<float> ints = {-1.0f, 2147483520.0f};
    std::vector<uint64_t> s2 = {2};
    auto ib = encode(TensorFormat::Int32, s2, ints);
    CHECK(ib[0] == 0xFF);
    CHECK(ib[3] == 0xFF);
    std::vector<float> frac = {0.5f, 1.0f};
    CHECK_THROWS_AS(encode(TensorFormat::Int32, s2, frac), ninfer::Error);
}

TEST_CASE("E4M3FN and fp8 row layout (§3.4 Ex1)", "[vectors]") {
    CHECK(f32_to_e4m3(0.0f) == 0x00);
    CHECK(f32_to_e4m3(-0.0f) == 0x80);
    CHECK(f32_to_e4m3(1.0f) == 0x38);
    CHECK(f32_to_e4m3(-1.0f) == 0xB8);
    CHECK(f32_to_e4m3(2.0f) == 0x40);
    CHECK(f32_to_e4m3(448.0f) == 0x7E);
    CHECK(f32_to_e4m3(-1000.0f) == 0xFE);
    CHECK(f32_to_e4m3(std::ldexp(1.0f, -9)) == 0x01);
    CHECK(f32_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);       // tie to even -> 0
    CHECK(f32_to_e4m3(std::ldexp(3.0f, -10)) == 0x02);       // 1.5 ulp ties to even -> 2
    CHECK(f32_to_e4m3(1.0625f) == 0x38);                     // halfway 1.0/1.125 -> even
    CHECK(f32_to_e4m3(1.1875f) == 0x3A);                     // halfway 1.125/1.25 -> even
    CHECK(std::isnan(e4m3_to_f32(0x7F)));
    CHECK(e4m3_to_f32(0x7E) == 448.0f);
    for (int b = 0; b < 256; ++b)
        if ((b & 0x7F) != 0x7F)
            REQUIRE(f32_to_e4m3(e4m3_to_f32(uint8_t(b))) == b);

    // [2,4]: rows (0,-0,1,-1) and (2,-2,448,-448) with row maxima 1 and 448, as in the example
    // bytes; the canonical encoder derives its own scales (amax/448).
    std::vector<float> v = {0.0f, -0.0f, 0.5f, -0.5f, 4.0f, -4.0f, 896.0f, -896.0f};
    std::vector<uint64_t> shape = {2, 4};
    auto b = encode(TensorFormat::Fp8E4m3fnRowBf16, shape, v);
    REQUIRE(b.size() == 260);
    auto g = row_scale_geometry(2, 4);
    uint16_t s0, s1;
    std::memcpy(&s0, b.data() + g.scale_off, 2);
    std::memcpy(&s1, b.data() + g.scale_off + 2, 2);
    CHECK(s1 == 0x4000); // 896/448 = 2.0
    CHECK(b[4] == 0x40); // 4/2 = 2
    CHECK(b[5] == 0xC0);
    CHECK(b[6] == 0x7E);
    CHECK(b[7] == 0xFE);
    CHECK(b[0] == 0x00);
    CHECK(b[1] == 0x80); // sign of -0 kept

    // The example's stored bytes decode to the stated values.
    std::vector<uint8_t> ex(260, 0);
    const uint8_t codes[] = {0x00, 0x80, 0x38, 0xB8, 0x40, 0xC0, 0x7E, 0xFE};
    std::memcpy(ex.data(), codes, 8);
    ex[256] = 0x00, ex[257] = 0x3F, ex[258] = 0x00, ex[259] = 0x40;
    std::vector<float> out(8);
    decode_rows(view(TensorFormat::Fp8E4m3fnRowBf16, shape, ex), 0, 2, out.data());
    CHECK(out == std::vector<float>{0.0f, -0.0f, 0.5f, -0.5f, 4.0f, -4.0f, 896.0f, -896.0f});
}

TEST_CASE("E2M1 thresholds and nvfp4 layout (§2 test vector, §3.3 Ex1)", "[vectors]") {
    const float ys[] = {0.0f, -0.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, -0.75f};
    const uint8_t want[] = {0, 8, 0, 2, 2, 4, 4, 6, 6, 7, 10};
    for (size_t i = 0; i < std::size(ys); ++i)
        CHECK(int(f32_to_e2m1(ys[i])) == int(want[i]));
    CHECK(f32_to_e2m1(0.26f) == 1);
    CHECK(f32_to_e2m1(2.51f) == 5);
    CHECK(e2m1_to_f32(0x7) == 6.0f);
    CHECK(e2m1_to_f32(0xA) == -1.0f);

    // [128,64] with row 0 = k (0..63) scaled so block scales are exact: payload[0] = 0x10 means
    // k0 = 0, k1 = 1 after decoding.
    std::vector<float> v(128 * 64, 0.0f);
    for (int k = 0; k < 64; ++k)
        v[k] = float(k % 16 == 0 ? 0 : (k % 2 ? 6 : 1));
    v[1] = 1.0f; // block 0: 0, 1, 1, 6, 1, 6...
    std::vector<uint64_t> shape = {128, 64};
    auto b = encode(TensorFormat::Nvfp4, shape, v);
    REQUIRE(b.size() == 4612);
    float d_w;
    std::memcpy(&d_w, b.data() + 4608, 4);
    CHECK(d_w == float(6.0 * 448.0 / 6.0));
    CHECK(b[4096 + 0] == 0x7E); // row 0 block 0: bmax 6 -> raw 448
    CHECK(b[4096 + 499] == 0x00); // row 31 lane 3 is all zero
    std::vector<float> out(64);
    StoredTensor t = view(TensorFormat::Nvfp4, shape, b);
    decode_rows(t, 0, 1, out.data());
    for (int k = 0; k < 64; ++k)
        CHECK(out[k] == v[k]);
    std::vector<float> bad(128 * 64, 0.0f);
    bad[77] = std::numeric_limits<float>::infinity();
    CHECK_THROWS_AS(encode(TensorFormat::Nvfp4, shape, bad), ninfer::Error);
}
