// ninfer tests - the q5/q6 tiled GEMV layout's high-bit words (kernels/src/gemv_tiled_q56.h) decode
// to the CPU codec's values: the GPU pack's and decoders' shared bit arithmetic, checked on the host.
#include "core/formats/codec.h"
#include "core/formats/layout.h"
#include "kernels/src/gemv_tiled_q56.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace ninfer;
using namespace ninfer::kernels::detail;

namespace {

// One lane's view of one (16-row tile, group) block, built as gemv_pack.cu builds it: nibble words
// wa (row r) and wb (row r + 8) from the base plane, high words from q56_pack_high.
struct LaneBlock {
    uint32_t wa[2], wb[2], h[2];
};

LaneBlock pack_lane(const std::vector<uint8_t>& bytes, const core::RowSplitGeometry& g, int bits, int64_t tile,
                    int64_t grp, int r, int c) {
    LaneBlock lb{};
    const uint8_t* high[2] = {nullptr, nullptr};
    for (int half = 0; half < 2; ++half) {
        const uint64_t row = uint64_t(tile) * 16 + r + 8 * half;
        uint8_t b[8] = {};
        if (row < g.n && uint64_t(grp) < g.groups_per_row) {
            std::memcpy(b, bytes.data() + row * g.base_row + grp * 32 + c * 8, 8);
            high[half] = bytes.data() + g.high_off + row * g.high_row + grp * g.high_group_bytes;
        }
        uint32_t* w = half == 0 ? lb.wa : lb.wb;
        std::memcpy(w, b, 8);
    }
    q56_pack_high(bits, high[0], high[1], c, lb.h);
    return lb;
}

float bf16_bits(uint32_t w) { return core::bf16_to_f32(uint16_t(w)); }

// Decodes every code of the matrix through the lane words (the GEMV's pairs and dequant's fields)
// and compares scale * code with the codec's decoded value.
void check_matrix(core::TensorFormat f, uint64_t n, uint64_t k, uint64_t seed) {
    const int bits = f == core::TensorFormat::Q5G64Fp16 ? 5 : 6;
    INFO("bits " << bits << " n " << n << " k " << k);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> v(n * k);
    for (uint64_t i = 0; i < v.size(); ++i) v[i] = u(rng) * std::ldexp(1.f, -int((i / 64) % 4));
    if (n > 2) // an all-zero row (zero multipliers) and extreme codes in another
        for (uint64_t j = 0; j < k; ++j) v[k + j] = 0.f, v[2 * k + j] = j % 2 ? 1.f : -1.f;
    const uint64_t shape[2] = {n, k};
    const std::vector<uint8_t> bytes = core::encode(f, shape, v);
    const core::RowSplitGeometry g = core::row_split_geometry(f, n, k);
    core::StoredTensor t;
    t.format = f;
    t.shape = {n, k};
    t.data = bytes.data();
    t.bytes = bytes.size();
    std::vector<float> want(n * k);
    core::decode_rows(t, 0, n, want.data());

    const uint32_t bias = q56_bias_bf16x2(bits);
    const float bias_value = 128.f + float(q56_bias(bits));
    REQUIRE(bf16_bits(bias) == bias_value);
    REQUIRE(bf16_bits(bias >> 16) == bias_value);
    const int64_t units = (int64_t(g.groups_per_row) + 7) / 8 * 8; // padded as the tiled layout pads
    int bad = 0, seen = 0;
    for (int64_t tile = 0; tile < int64_t(n + 15) / 16; ++tile)
        for (int64_t grp = 0; grp < units; ++grp)
            for (int r = 0; r < 8; ++r)
                for (int c = 0; c < 4; ++c) {
                    const LaneBlock lb = pack_lane(bytes, g, bits, tile, grp, r, c);
                    for (int wi = 0; wi < 4; ++wi) {
                        const uint32_t w = wi < 2 ? lb.wa[wi] : lb.wb[wi - 2];
                        const uint32_t h = lb.h[q56_high_word(bits, wi)];
                        const uint64_t row = uint64_t(tile) * 16 + r + 8 * (wi >> 1);
                        for (int si = 0; si < 4; ++si) {
                            const uint32_t pair = q56_pair_word(bits, w >> (4 * si), h, wi, si);
                            for (int up = 0; up < 2; ++up) {
                                const int n_ = si + 4 * up;
                                // The GEMV: bf16 (128 + code + bias) minus the bias is the code.
                                const float code = bf16_bits(pair >> (16 * up)) - bias_value;
                                // dequant: nibble + 16 * field - bias.
                                const uint32_t field = (h >> q56_high_bit(bits, wi, n_)) & ((1u << (bits - 4)) - 1u);
                                const int code2 = int((w >> (4 * n_)) & 15u) + 16 * int(field) - q56_bias(bits);
                                const uint64_t col = uint64_t(grp) * 64 + 16 * c + 8 * (wi & 1) + n_;
                                if (code != float(code2) && bad++ < 5) FAIL_CHECK("gemv/dequant decoders differ");
                                if (row >= n || col >= k) { // padding decodes to code 0
                                    if (code != 0.f && bad++ < 5) FAIL_CHECK("padding row " << row << " col " << col);
                                    continue;
                                }
                                uint16_t sw;
                                std::memcpy(&sw, bytes.data() + g.scale_off + row * g.scale_row + 2 * grp, 2);
                                const float got = core::f16_to_f32(sw) * code;
                                ++seen;
                                if (got != want[row * k + col] && bad++ < 5)
                                    FAIL_CHECK("row " << row << " col " << col << " got " << got << " want "
                                                      << want[row * k + col]);
                            }
                        }
                    }
                }
    CHECK(bad == 0);
    CHECK(uint64_t(seen) == n * k); // every element decoded exactly once
}

} // namespace

TEST_CASE("tiled q5/q6: the lane high words decode to the codec's values, edge and layer shapes", "[tiled_q56]") {
    uint64_t seed = 1;
    for (core::TensorFormat f : {core::TensorFormat::Q5G64Fp16, core::TensorFormat::Q6G64Fp16})
        for (auto [n, k] : std::vector<std::pair<uint64_t, uint64_t>>{{1, 16}, {17, 48}, {16, 64}, {100, 1040}, {33, 200}, {64, 5120}})
            check_matrix(f, n, k, seed++);
}

TEST_CASE("tiled q5/q6: high fields sit on distinct bits and rotate onto bits 4 and 20", "[tiled_q56]") {
    for (int bits : {5, 6}) {
        const int fb = bits - 4;
        uint32_t used[2] = {0, 0};
        for (int wi = 0; wi < 4; ++wi)
            for (int n = 0; n < 8; ++n) {
                const uint32_t m = ((1u << fb) - 1u) << q56_high_bit(bits, wi, n);
                uint32_t& u = used[q56_high_word(bits, wi)];
                CHECK((u & m) == 0u);
                u |= m;
                // The pair's rotation brings this field above the nibble's bf16 mantissa bits.
                const int si = n & 3, target = n < 4 ? 4 : 20;
                CHECK(rotate_right(m, (q56_pair_pos(bits, wi, si) - 4) & 31) == ((1u << fb) - 1u) << target);
            }
        CHECK(used[0] == 0xFFFFFFFFu);
        CHECK(used[1] == (bits == 6 ? 0xFFFFFFFFu : 0u));
    }
}
