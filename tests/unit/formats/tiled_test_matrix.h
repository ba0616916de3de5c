// ninfer tests - a grouped-format matrix for the tiled-layout tests (tiled_q4.cpp, tiled_q56.cpp):
// seeded values scaled by 2^-(group % 4), an all-zero row (zero multipliers) and a row of extreme
// codes, encoded by the CPU codec, with its geometry and its decoded values as the reference.
//
// Contract: make_tiled_test_matrix(f, n, k, seed) builds it; check_code(row, col, grp, code) checks
// one code a tiled decoder produced for element (row, col) of group grp: 0 in the padding past n or
// k, else multiplier * code equal to the codec's value (the first 5 failures reported, all
// counted in bad; seen counts the real elements); finish() checks that nothing failed and that
// every element was decoded exactly once.
#pragma once

#include "core/formats/codec.h"
#include "core/formats/layout.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace ninfer::test {

inline float bf16_bits(uint32_t w) { return core::bf16_to_f32(uint16_t(w)); }

struct TiledTestMatrix {
    uint64_t n = 0, k = 0;
    std::vector<uint8_t> bytes;
    core::RowSplitGeometry g;
    std::vector<float> want;
    int64_t units = 0; // groups per row, padded to 8 as the tiled layout pads
    int bad = 0;
    uint64_t seen = 0;

    void check_code(uint64_t row, uint64_t col, int64_t grp, float code) {
        if (row >= n || col >= k) { // padding decodes to code 0
            if (code != 0.f && bad++ < 5) FAIL_CHECK("padding row " << row << " col " << col);
            return;
        }
        uint16_t sw;
        std::memcpy(&sw, bytes.data() + g.scale_off + row * g.scale_row + 2 * grp, 2);
        const float got = core::f16_to_f32(sw) * code;
        ++seen;
        if (got != want[row * k + col] && bad++ < 5)
            FAIL_CHECK("row " << row << " col " << col << " got " << got << " want " << want[row * k + col]);
    }
    void finish() const {
        CHECK(bad == 0);
        CHECK(seen == n * k); // every element decoded exactly once
    }
};

inline TiledTestMatrix make_tiled_test_matrix(core::TensorFormat f, uint64_t n, uint64_t k, uint64_t seed) {
    TiledTestMatrix m;
    m.n = n;
    m.k = k;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> v(n * k);
    for (uint64_t i = 0; i < v.size(); ++i) v[i] = u(rng) * std::ldexp(1.f, -int((i / 64) % 4));
    if (n > 2) // an all-zero row (zero multipliers) and extreme codes in another
        for (uint64_t j = 0; j < k; ++j) v[k + j] = 0.f, v[2 * k + j] = j % 2 ? 1.f : -1.f;
    const uint64_t shape[2] = {n, k};
    m.bytes = core::encode(f, shape, v);
    m.g = core::row_split_geometry(f, n, k);
    core::StoredTensor t;
    t.format = f;
    t.shape = {n, k};
    t.data = m.bytes.data();
    t.bytes = m.bytes.size();
    m.want.resize(n * k);
    core::decode_rows(t, 0, n, m.want.data());
    m.units = (int64_t(m.g.groups_per_row) + 7) / 8 * 8;
    return m;
}

} // namespace ninfer::test
