// ninfer tests - format registry and the encoded sizes of docs/ARTIFACT_FORMAT.md §3 (worked
// examples Ex1..Ex4).
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;

namespace {
uint64_t size_of(TensorFormat f, std::vector<uint64_t> shape) { return encoded_size(f, shape); }
} // namespace

TEST_CASE("format names round-trip and legacy names map", "[sizes]") {
    const TensorFormat all[] = {TensorFormat::Bf16, TensorFormat::Fp32, TensorFormat::Int32,
                                TensorFormat::Q4G64Fp16, TensorFormat::Q5G64Fp16,
                                TensorFormat::Q6G64Fp16, TensorFormat::Q8G32Fp16,
                                TensorFormat::Fp8E4m3fnRowBf16, TensorFormat::Nvfp4};
    for (TensorFormat f : all)
        CHECK(format_from_name(format_name(f)) == f);
    CHECK(format_name(TensorFormat::Q8G32Fp16) == "q8_g32_fp16");
    CHECK(layout_name(TensorFormat::Nvfp4) == "block_scale_k16_m128x4_v1");
    CHECK(layout_name(TensorFormat::Fp8E4m3fnRowBf16) == "row_scale_v1");
    CHECK(layout_name(TensorFormat::Int32) == "contiguous_le_v1");
    CHECK(format_from_legacy_name("W8G32_F16S") == TensorFormat::Q8G32Fp16);
    CHECK(format_from_legacy_name("I32") == TensorFormat::Int32);
    CHECK(format_from_legacy_name("FP8_E4M3FN_ROW_BF16S") == TensorFormat::Fp8E4m3fnRowBf16);
    CHECK_FALSE(format_from_legacy_name("q4_g64_fp16").has_value());
    CHECK_THROWS_WITH(format_from_name("Q4G64_F16S"), "unknown tensor format Q4G64_F16S");
    CHECK_THROWS_WITH(format_from_name("t2_g128_fp16"), "unknown tensor format t2_g128_fp16");
    CHECK(format_is_direct(TensorFormat::Int32));
    CHECK(format_is_quantized(TensorFormat::Nvfp4));
}

TEST_CASE("contiguous sizes (§3.1)", "[sizes]") {
    CHECK(size_of(TensorFormat::Bf16, {2}) == 4); // Ex1
    CHECK(size_of(TensorFormat::Bf16, {2, 2}) == 8);
    CHECK(size_of(TensorFormat::Fp32, {}) == 4);
    CHECK(size_of(TensorFormat::Int32, {3, 1, 2}) == 24);
    CHECK_THROWS_AS(size_of(TensorFormat::Bf16, {2, 0}), ninfer::Error);
    CHECK_THROWS_AS(size_of(TensorFormat::Bf16, std::vector<uint64_t>(17, 1)), ninfer::Error);
    CHECK_THROWS_AS(size_of(TensorFormat::Fp32, {1ull << 40, 1ull << 30}), ninfer::Error);
}

TEST_CASE("row_split_k128_v1 sizes (§3.2 Ex1-Ex4)", "[sizes]") {
    auto q5 = row_split_geometry(TensorFormat::Q5G64Fp16, 2, 130); // Ex1
    CHECK(q5.groups_per_row == 4);
    CHECK(q5.high_off == 256);
    CHECK(q5.scale_off == 512);
    CHECK(q5.bytes == 528);
    CHECK(size_of(TensorFormat::Q4G64Fp16, {7168, 5120}) == 19'496'960); // Ex2
    CHECK(size_of(TensorFormat::Q5G64Fp16, {7168, 5120}) == 24'084'480);
    auto q4 = row_split_geometry(TensorFormat::Q4G64Fp16, 1, 4304); // Ex3
    auto q8 = row_split_geometry(TensorFormat::Q8G32Fp16, 1, 4304);
    CHECK(q4.groups_per_row == 68);
    CHECK(q8.groups_per_row == 136);
    CHECK(q4.base_row == 2176);
    CHECK(q8.base_row == 4352);
    auto a = row_split_geometry(TensorFormat::Q4G64Fp16, 262144, 2048); // Ex4
    CHECK(a.base_row == 0x400);
    CHECK(a.scale_row == 0x40);
    CHECK(a.scale_off == 0x10000000);
    auto b = row_split_geometry(TensorFormat::Q5G64Fp16, 524288, 512);
    CHECK(b.base_row == 0x100);
    CHECK(b.high_row == 0x40);
    CHECK(b.scale_row == 0x10);
    CHECK(b.high_off == 0x08000000);
    CHECK(b.scale_off == 0x0A000000);
    auto c = row_split_geometry(TensorFormat::Q6G64Fp16, 524288, 512);
    CHECK(c.high_off == 0x08000000);
    CHECK(c.scale_off == 0x0C000000);
    CHECK(row_split_geometry(TensorFormat::Q8G32Fp16, 262144, 2048).scale_off == 0x20000000);
    CHECK(row_split_geometry(TensorFormat::Q8G32Fp16, 524288, 512).scale_off == 0x10000000);
    CHECK_THROWS_AS(size_of(TensorFormat::Q4G64Fp16, {64}), ninfer::Error);
    CHECK_THROWS_AS(size_of(TensorFormat::Q8G32Fp16, {0, 64}), ninfer::Error);
}

TEST_CASE("nvfp4 and fp8 row sizes (§3.3, §3.4)", "[sizes]") {
    auto g = nvfp4_geometry(128, 64);
    CHECK(g.code_bytes == 4096);
    CHECK(g.scale_off == 4096);
    CHECK(g.scale_bytes == 512);
    CHECK(g.div_off == 4608);
    CHECK(g.bytes == 4612);
    CHECK(nvfp4_scale_index(64, 0, 0) == 0);
    CHECK(nvfp4_scale_index(64, 31, 3) == 499);
    CHECK(nvfp4_scale_index(64, 32, 0) == 4);
    CHECK(nvfp4_scale_index(64, 127, 3) == 511);
    CHECK(size_of(TensorFormat::Nvfp4, {14336, 5120}) == 41'287'684);
    CHECK_THROWS_WITH(size_of(TensorFormat::Nvfp4, {100, 64}),
                      "formats: nvfp4 requires N%128=0 and K%64=0, got [100,64]");
    CHECK_THROWS_AS(size_of(TensorFormat::Nvfp4, {128, 32}), ninfer::Error);
    CHECK(size_of(TensorFormat::Fp8E4m3fnRowBf16, {2, 4}) == 260);
    CHECK(row_scale_geometry(2, 4).scale_off == 256);
    CHECK(size_of(TensorFormat::Fp8E4m3fnRowBf16, {14336, 5120}) == 73'428'992);
}
