// ninfer tests - the q5/q6 tiled GEMV layout's high-bit words (kernels/src/gemv_tiled_q56.h) decode
// to the CPU codec's values: the GPU pack's and decoders' shared bit arithmetic, checked on the host.
#include "kernels/src/gemv_tiled_q56.h"
#include "tests/unit/formats/tiled_test_matrix.h"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace ninfer;
using namespace ninfer::kernels::detail;
using ninfer::test::bf16_bits;

namespace {

// One lane's words of one (16-row tile, group) block, built as gemv_pack.cu builds them: the 32
// offset-binary codes from the artifact (q56_artifact_value), packed by q56_pack_lane.
struct LaneBlock {
    uint32_t w[6];
};

LaneBlock pack_lane(const std::vector<uint8_t>& bytes, const core::RowSplitGeometry& g, int bits, int64_t tile,
                    int64_t grp, int r, int c) {
    uint8_t vals[32];
    for (int half = 0; half < 2; ++half) {
        const uint64_t row = uint64_t(tile) * 16 + r + 8 * half;
        const bool real = row < g.n && uint64_t(grp) < g.groups_per_row;
        const uint8_t* base = real ? bytes.data() + row * g.base_row + grp * 32 : nullptr;
        const uint8_t* high = real ? bytes.data() + g.high_off + row * g.high_row + grp * g.high_group_bytes : nullptr;
        for (int i = 0; i < 16; ++i) vals[16 * half + i] = uint8_t(q56_artifact_value(bits, base, high, 16 * c + i));
    }
    LaneBlock lb{};
    q56_pack_lane(bits, vals, lb.w);
    return lb;
}

// The GEMV decoder's arithmetic for pair P's half `up` (gemv_tiled.cuh q56_unit_a), in float: every
// step is exact in bf16 (small integers and halves), so float gives the same values.
float gemv_pair_code(int bits, const uint32_t* w, int P, int up) {
    const int sh = 16 * up;
    if (P < q56_regular_pairs(bits))
        return bf16_bits(q56_regular_word(bits, w[q56_word(bits, P)] >> q56_shift(bits, P)) >> sh) -
               (128.f + float(q56_bias(bits)));
    if (bits == 5) {
        float sum = -0.5f;
        for (int b = 0; b < 5; ++b) sum += bf16_bits(q5_sign_word(w[b], b) >> sh);
        return sum;
    }
    const int t = P - 12;
    return bf16_bits(q6_irregular_word(w[t] >> 12, w[4 + t / 2] >> (8 + 2 * (t & 1))) >> sh) - 160.f;
}

// Decodes every code of the matrix through the lane words (the GEMV's pairs and dequant's fields)
// and compares scale * code with the codec's decoded value.
void check_matrix(core::TensorFormat f, uint64_t n, uint64_t k, uint64_t seed) {
    const int bits = f == core::TensorFormat::Q5G64Fp16 ? 5 : 6;
    INFO("bits " << bits << " n " << n << " k " << k);
    test::TiledTestMatrix m = test::make_tiled_test_matrix(f, n, k, seed);

    const uint32_t bias = q56_bias_bf16x2(bits);
    const float bias_value = 128.f + float(q56_bias(bits));
    REQUIRE(bf16_bits(bias) == bias_value);
    REQUIRE(bf16_bits(bias >> 16) == bias_value);
    for (int64_t tile = 0; tile < int64_t(n + 15) / 16; ++tile)
        for (int64_t grp = 0; grp < m.units; ++grp)
            for (int r = 0; r < 8; ++r)
                for (int c = 0; c < 4; ++c) {
                    const LaneBlock lb = pack_lane(m.bytes, m.g, bits, tile, grp, r, c);
                    for (int P = 0; P < 16; ++P)
                        for (int up = 0; up < 2; ++up) {
                            const int idx = q56_pair_code(P, up);
                            const uint64_t row = uint64_t(tile) * 16 + r + 8 * (idx / 16);
                            const uint64_t col = uint64_t(grp) * 64 + 16 * c + idx % 16;
                            // The GEMV's pair arithmetic and dequant's field read agree.
                            const float code = gemv_pair_code(bits, lb.w, P, up);
                            const int code2 = int(q56_value(bits, lb.w, P, up)) - q56_bias(bits);
                            if (code != float(code2) && m.bad++ < 5)
                                FAIL_CHECK("gemv/dequant decoders differ: P " << P << " up " << up);
                            m.check_code(row, col, grp, code);
                        }
                }
    m.finish();
}

} // namespace

TEST_CASE("tiled q5/q6: the lane words decode to the codec's values, edge and layer shapes", "[tiled_q56]") {
    uint64_t seed = 1;
    for (core::TensorFormat f : {core::TensorFormat::Q5G64Fp16, core::TensorFormat::Q6G64Fp16})
        for (auto [n, k] : std::vector<std::pair<uint64_t, uint64_t>>{{1, 16}, {17, 48}, {16, 64}, {100, 1040}, {33, 200}, {64, 5120}})
            check_matrix(f, n, k, seed++);
}

TEST_CASE("tiled q5/q6: every bit of a lane's words holds exactly one code bit, every value round-trips", "[tiled_q56]") {
    for (int bits : {5, 6}) {
        INFO("bits " << bits);
        // Each code bit alone: the packed words hold exactly one set bit, at a place no other code bit uses.
        uint32_t used[6] = {};
        int total = 0;
        for (int idx = 0; idx < 32; ++idx)
            for (int b = 0; b < bits; ++b) {
                uint8_t zero[32], one[32];
                for (int i = 0; i < 32; ++i) zero[i] = one[i] = 0;
                one[idx] = uint8_t(1u << b);
                uint32_t w0[6], w1[6];
                q56_pack_lane(bits, zero, w0);
                q56_pack_lane(bits, one, w1);
                int changed = 0;
                for (int i = 0; i < bits; ++i) {
                    const uint32_t d = w0[i] ^ w1[i];
                    changed += __builtin_popcount(d);
                    CHECK((used[i] & d) == 0u);
                    used[i] |= d;
                }
                CHECK(changed == 1);
                ++total;
            }
        CHECK(total == 32 * bits);
        for (int i = 0; i < bits; ++i) CHECK(used[i] == 0xFFFFFFFFu); // the words are full: no padding bits
        // Every value at every position decodes back, through both decoders.
        std::mt19937 rng(static_cast<uint32_t>(bits) + 7u);
        for (int trial = 0; trial < 2000; ++trial) {
            uint8_t vals[32];
            for (int i = 0; i < 32; ++i) vals[i] = uint8_t(trial < (1 << bits) ? trial : rng() & ((1u << bits) - 1u));
            uint32_t w[6];
            q56_pack_lane(bits, vals, w);
            for (int P = 0; P < 16; ++P)
                for (int up = 0; up < 2; ++up) {
                    const int want = int(vals[q56_pair_code(P, up)]);
                    CHECK(int(q56_value(bits, w, P, up)) == want);
                    CHECK(gemv_pair_code(bits, w, P, up) == float(want - q56_bias(bits)));
                }
        }
    }
}
