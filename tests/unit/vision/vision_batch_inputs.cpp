// ninfer tests - the GPU tower's host side (core/vision/vision_batch_inputs.h): bf16 rounding
// against the nearest-value definition, batch packing, and a batch's inputs against the per-patch
// functions of the CPU tower, bit for bit.
#include "core/cpu/thread_pool.h"
#include "core/util/error.h"
#include "core/vision/vision_batch_inputs.h"
#include "core/vision/vision_tower.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

// The bf16 nearest to x (not NaN) by distance, ties to the even mantissa: the definition
// to_bf16_rne must meet. Infinity stands for 2^128 (the step past the largest finite bf16), so a
// value at or past the midpoint to it rounds to infinity, as IEEE rounding does.
uint16_t nearest_bf16(float x) {
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    if ((bits & 0x7fffffffu) >= 0x7f800000u) return uint16_t(bits >> 16);
    const uint16_t down = uint16_t(bits >> 16); // toward zero
    const uint16_t up = uint16_t(down + 1);     // away from zero
    const auto value = [&](uint16_t w) {
        return (w & 0x7fffu) == 0x7f80u ? std::copysign(std::ldexp(1.0, 128), double(x))
                                        : double(std::bit_cast<float>(uint32_t(w) << 16));
    };
    const double dd = std::fabs(double(x) - value(down)), du = std::fabs(value(up) - double(x));
    if (dd != du) return dd < du ? down : up;
    return (down & 1u) ? up : down;
}

std::vector<float> edge_values() {
    std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min()};
    // Ties both ways (low half exactly 0x8000, even and odd kept bit), just below and above them,
    // the largest finite bf16 and the midpoint past it, subnormals.
    for (uint32_t hi : {0x3f80u, 0x3f81u, 0xbf80u, 0xbf81u, 0x7f7fu, 0x0001u, 0x8001u, 0x0080u})
        for (uint32_t lo : {0x8000u, 0x7fffu, 0x8001u, 0xffffu, 0x0001u})
            v.push_back(std::bit_cast<float>(hi << 16 | lo));
    return v;
}

} // namespace

TEST_CASE("to_bf16_rne rounds to the nearest bf16, ties to even, at every length", "[vision_batch_inputs]") {
    std::vector<float> v = edge_values();
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::uniform_int_distribution<uint32_t> any_bits;
    for (int i = 0; i < 4000; ++i) v.push_back(u(rng));
    for (int i = 0; i < 4000; ++i) {
        const float x = std::bit_cast<float>(any_bits(rng));
        if (!std::isnan(x)) v.push_back(x);
    }
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(17), v.size()}) {
        std::vector<uint16_t> got(n + 1, 0xabcd);
        to_bf16_rne(v.data(), n, got.data());
        for (size_t i = 0; i < n; ++i) {
            INFO("value " << std::hexfloat << v[i] << " at " << i << " of " << n);
            REQUIRE(got[i] == nearest_bf16(v[i]));
        }
        CHECK(got[n] == 0xabcd); // nothing written past n
    }
    // NaN, any payload and sign, in the vector body and the tail: the canonical quiet NaN.
    std::vector<float> nans(11, std::bit_cast<float>(0xffc00001u));
    nans[3] = std::numeric_limits<float>::quiet_NaN();
    nans[9] = std::bit_cast<float>(0x7f800001u);
    std::vector<uint16_t> got(nans.size());
    to_bf16_rne(nans.data(), nans.size(), got.data());
    for (uint16_t w : got) CHECK(w == 0x7fff);
}

TEST_CASE("pack_vision_batches packs whole frame pairs in order", "[vision_batch_inputs]") {
    const VisionConfig c = tiny_vision_config();
    const std::vector<VisionInput> items = {random_vision_input(c, VisionInput::Kind::Video, 7, 4, 6, 1), // 24 a pair
                                            random_vision_input(c, VisionInput::Kind::Image, 1, 8, 8, 2),  // 64
                                            random_vision_input(c, VisionInput::Kind::Video, 3, 2, 2, 3)}; // 4 a pair
    std::vector<const VisionInput*> ptrs;
    for (const VisionInput& it : items) ptrs.push_back(&it);
    for (size_t rows : {size_t(64), size_t(70), size_t(100), size_t(4096)}) {
        INFO("rows " << rows);
        const auto batches = pack_vision_batches(ptrs, rows);
        REQUIRE(!batches.empty());
        std::vector<size_t> next_pair(items.size(), 0);
        for (size_t b = 0; b < batches.size(); ++b) {
            size_t row = 0;
            for (const VisionBatchPiece& pc : batches[b]) {
                CHECK(pc.row == row);
                CHECK(pc.nt >= 1);
                CHECK(pc.frame == size_t(items[pc.item].grid_h) * size_t(items[pc.item].grid_w));
                CHECK(pc.t0 == next_pair[pc.item]); // every frame pair once, in order
                next_pair[pc.item] = pc.t0 + pc.nt;
                row += pc.nt * pc.frame;
            }
            CHECK(vision_batch_rows(batches[b]) == row);
            CHECK(row <= rows);
            if (b + 1 < batches.size()) { // a batch ends only where the next frame pair does not fit
                const VisionBatchPiece& first = batches[b + 1].front();
                CHECK(row + first.frame > rows);
            }
        }
        for (size_t i = 0; i < items.size(); ++i) CHECK(next_pair[i] == size_t(items[i].grid_t));
    }
    CHECK(pack_vision_batches(ptrs, 4096).size() == 1);
    // 64 rows: the video's pairs 2 + 2 + 2 + 1 (the image does not fit beside the last), the
    // image, the small video's three pairs.
    CHECK(pack_vision_batches(ptrs, 64).size() == 6);
    CHECK(pack_vision_batches({}, 64).empty());
    CHECK_THROWS_WITH(pack_vision_batches(ptrs, 48), Catch::Contains("vision: a frame of 64 patches; the GPU tower "
                                                                     "takes at most 48"));
}

TEST_CASE("for_batch_rows finds the pieces a range of rows reaches", "[vision_batch_inputs]") {
    const std::vector<VisionBatchPiece> batch = {{0, 0, 1, 24, 0}, {1, 2, 3, 8, 24}, {2, 0, 1, 16, 48}};
    std::vector<std::tuple<size_t, size_t, size_t>> seen;
    const auto record = [&](const VisionBatchPiece& pc, size_t k0, size_t k1) { seen.emplace_back(pc.item, k0, k1); };
    for_batch_rows(batch, 20, 50, record);
    CHECK(seen == std::vector<std::tuple<size_t, size_t, size_t>>{{0, 20, 24}, {1, 0, 24}, {2, 0, 2}});
    seen.clear();
    for_batch_rows(batch, 30, 31, record);
    CHECK(seen == std::vector<std::tuple<size_t, size_t, size_t>>{{1, 6, 7}});
    seen.clear();
    for_batch_rows(batch, 64, 80, record); // past the batch
    CHECK(seen.empty());
}

TEST_CASE("fill_vision_batch writes the CPU tower's per-patch inputs", "[vision_batch_inputs]") {
    VisionConfig c = tiny_vision_config();
    c.num_position_embeddings = 64; // an 8x8 table resampled to other grids
    const std::vector<VisionInput> items = {random_vision_input(c, VisionInput::Kind::Image, 1, 4, 6, 11),
                                            random_vision_input(c, VisionInput::Kind::Video, 3, 6, 4, 12),
                                            random_vision_input(c, VisionInput::Kind::Image, 1, 10, 2, 13)};
    std::vector<const VisionInput*> ptrs;
    for (const VisionInput& it : items) ptrs.push_back(&it);
    const auto batches = pack_vision_batches(ptrs, 80); // 24 + 2x24 | 24 + 20
    REQUIRE(batches.size() == 2);
    const size_t P = c.patch_dim(), hd2 = c.head_dim() / 2;
    ThreadPool pool(3);
    for (const auto& batch : batches) {
        const size_t n = vision_batch_rows(batch);
        std::vector<uint16_t> patches(n * P);
        std::vector<int32_t> taps(n * 4);
        std::vector<float> tap_w(n * 4), cos(n * hd2), sin(n * hd2);
        fill_vision_batch(c, batch, ptrs, {patches.data(), taps.data(), tap_w.data(), cos.data(), sin.data()});
        // The patches rounded over a pool's threads: the same bits, the tables untouched by it.
        std::vector<uint16_t> pooled(n * P, 0xabcd);
        std::vector<int32_t> taps2(n * 4);
        std::vector<float> tap_w2(n * 4), cos2(n * hd2), sin2(n * hd2);
        fill_vision_batch(c, batch, ptrs, {pooled.data(), taps2.data(), tap_w2.data(), cos2.data(), sin2.data()}, &pool);
        CHECK(pooled == patches);
        CHECK(taps2 == taps);
        CHECK(cos2 == cos);
        for (const VisionBatchPiece& pc : batch) {
            const VisionInput& item = items[pc.item];
            for (size_t k = 0; k < pc.nt * pc.frame; ++k) {
                const size_t r = pc.row + k, src = pc.t0 * pc.frame + k;
                INFO("item " << pc.item << " row " << r);
                for (size_t j = 0; j < P; ++j)
                    REQUIRE(patches[r * P + j] == nearest_bf16(item.patches[src * P + j]));
                const PatchCell cell = patch_cell(k % pc.frame, uint32_t(item.grid_w), c.spatial_merge_size);
                uint32_t want_taps[4];
                float want_w[4];
                position_taps(c, cell, uint32_t(item.grid_h), uint32_t(item.grid_w), want_taps, want_w);
                std::vector<float> want_cos(hd2), want_sin(hd2);
                vision_rope_tables(c, cell, want_cos.data(), want_sin.data());
                for (int t = 0; t < 4; ++t) {
                    CHECK(taps[4 * r + t] == int32_t(want_taps[t]));
                    CHECK(tap_w[4 * r + t] == want_w[t]);
                }
                for (size_t j = 0; j < hd2; ++j) {
                    CHECK(cos[r * hd2 + j] == want_cos[j]);
                    CHECK(sin[r * hd2 + j] == want_sin[j]);
                }
            }
        }
    }
}
