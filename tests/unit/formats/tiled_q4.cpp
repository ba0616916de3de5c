// ninfer tests - the q4 tiled GEMV layout (kernels/src/gemv_tiled_q4.h) decodes to the CPU codec's
// values: the GPU pack's byte mapping, the GEMV's pair arithmetic (its lop3 emulated bit by bit)
// and dequant's addressing, checked on the host.
#include "kernels/src/gemv_tiled_q4.h"
#include "kernels/src/gemv_tiled_q56.h"
#include "tests/unit/formats/tiled_test_matrix.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace ninfer;
using namespace ninfer::kernels::detail;
using ninfer::test::bf16_bits;

namespace {

// lop3.b32 d, a, b, c, imm: bit i of d is bit (4 a_i + 2 b_i + c_i) of imm.
uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint32_t imm) {
    uint32_t d = 0;
    for (int i = 0; i < 32; ++i) {
        const uint32_t idx = ((a >> i) & 1u) * 4u + ((b >> i) & 1u) * 2u + ((c >> i) & 1u);
        d |= ((imm >> idx) & 1u) << i;
    }
    return d;
}

// The GEMV's code for pair P's half `up` (gemv_kernel.cuh q4_pair_to_bf16 on the word shifted as
// q4_unit_a shifts it), in float: bf16 136 + q minus 136 is exact.
float gemv_pair_code(const uint32_t *w, int P, int up) {
    const uint32_t t =
        lop3(w[q4_pair_word(P)] >> q4_pair_shift(P), kQ4PairLop3B, kQ4PairLop3C, 0xCA);
    return bf16_bits(t >> (16 * up)) - bf16_bits(kQ4PairBias >> (16 * up));
}

// One (16-row tile, group) block as gemv_pack.cu builds it from the artifact's code plane.
std::vector<uint8_t> pack_block(const std::vector<uint8_t> &bytes, const core::RowSplitGeometry &g,
                                int64_t tile, int64_t grp) {
    std::vector<uint8_t> block(512);
    for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < 16; ++j) {
            const uint64_t row = uint64_t(tile) * 16 + q4_lane_row(lane, j);
            const uint64_t col = uint64_t(grp) * 32 + q4_lane_group_byte(lane, j);
            block[lane * 16 + j] =
                row < g.n && col < g.base_row ? bytes[row * g.base_row + col] : 0;
        }
    return block;
}

void check_matrix(uint64_t n, uint64_t k, uint64_t seed) {
    INFO("n " << n << " k " << k);
    test::TiledTestMatrix m = test::make_tiled_test_matrix(core::TensorFormat::Q4G64Fp16, n, k, seed);
    for (int64_t tile = 0; tile < int64_t(n + 15) / 16; ++tile)
        for (int64_t grp = 0; grp < m.units; ++grp) {
            const std::vector<uint8_t> block = pack_block(m.bytes, m.g, tile, grp);
            for (int lane = 0; lane < 32; ++lane) {
                uint32_t w[4];
                std::memcpy(w, block.data() + lane * 16, 16);
                for (int P = 0; P < 16; ++P)
                    for (int up = 0; up < 2; ++up) {
                        const int idx = q56_pair_code(P, up); // 16 h + i
                        const int rr = lane / 4 + 8 * (idx / 16), gi = 16 * (lane % 4) + idx % 16;
                        const uint64_t row = uint64_t(tile) * 16 + rr,
                                       col = uint64_t(grp) * 64 + gi;
                        const float code = gemv_pair_code(w, P, up);
                        // dequant: the byte at q4_tiled_offset, code gi's nibble.
                        const uint8_t byte = block[size_t(q4_tiled_offset(rr, gi / 2))];
                        const int nib = (byte >> (4 * (gi & 1))) & 15;
                        const int code2 = (nib ^ 8) - 8;
                        if ((code != float(code2) || q4_value(w, P, up) != code2) && m.bad++ < 5)
                            FAIL_CHECK("gemv/dequant decoders differ: lane " << lane << " P " << P
                                                                             << " up " << up);
                        m.check_code(row, col, grp, code);
                    }
            }
        }
    m.finish();
}

} // namespace

TEST_CASE("tiled q4: pack, the GEMV's pairs and dequant's reads give the codec's values, edge and "
          "layer shapes",
          "[tiled_q4]") {
    uint64_t seed = 11;
    for (auto [n, k] : std::vector<std::pair<uint64_t, uint64_t>>{
             {1, 16}, {17, 48}, {16, 64}, {100, 1040}, {33, 200}, {64, 5120}})
        check_matrix(n, k, seed++);
}

TEST_CASE("tiled q4: the lop3 is q4_pair_bits, every code at every place decodes, the mapping is a "
          "bijection",
          "[tiled_q4]") {
    std::mt19937 rng(5);
    for (int trial = 0; trial < 65536 + 4096;
         ++trial) { // every 16-bit pattern in both halves, then random words
        const uint32_t a = trial < 65536 ? uint32_t(trial) * 0x10001u : rng();
        CHECK(lop3(a, kQ4PairLop3B, kQ4PairLop3C, 0xCA) == q4_pair_bits(a));
    }
    for (int nib = 0; nib < 16; ++nib) { // both halves, every code: bf16 136 + q
        const uint32_t t = q4_pair_bits(uint32_t(nib) * 0x10001u);
        const int q = (nib ^ 8) - 8;
        CHECK(bf16_bits(t) == 136.f + float(q));
        CHECK(bf16_bits(t >> 16) == 136.f + float(q));
    }
    // Each code at each of the lane's 32 places: pair P / half up reads exactly it.
    for (int idx = 0; idx < 32; ++idx)
        for (int q = -8; q < 8; ++q) {
            uint32_t w[4] = {0x88888888u, 0x88888888u, 0x88888888u,
                             0x88888888u}; // code -8 everywhere
            const int h = idx / 16, i = idx % 16, wi = 2 * h + i / 8, n = i % 8;
            w[wi] = (w[wi] & ~(15u << (4 * n))) | (uint32_t(q & 15) << (4 * n));
            int hits = 0;
            for (int P = 0; P < 16; ++P)
                for (int up = 0; up < 2; ++up) {
                    const int code = q56_pair_code(P, up) == idx ? q : -8;
                    hits += q56_pair_code(P, up) == idx;
                    CHECK(gemv_pair_code(w, P, up) == float(code));
                    CHECK(q4_value(w, P, up) == code);
                }
            CHECK(hits == 1);
        }
    // Block bytes <-> (row, group byte) both ways, every byte once.
    std::vector<int> used(512, 0);
    for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < 16; ++j) {
            CHECK(q4_tiled_offset(q4_lane_row(lane, j), q4_lane_group_byte(lane, j)) ==
                  lane * 16 + j);
            ++used[size_t(lane * 16 + j)];
        }
    for (int b = 0; b < 512; ++b)
        CHECK(used[size_t(b)] == 1);
}
