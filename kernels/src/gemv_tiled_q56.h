// ninfer::kernels - where the tiled layout (gemv.h, WeightLayout::Tiled) keeps the high bits of
// q5_g64_fp16 / q6_g64_fp16 codes, and how a lane turns them into bf16 pairs. Plain C++ shared by
// the device pack, the GEMV decoder, dequant and a host unit test (tests/unit/formats/tiled_q56.cpp).
//
// Contract:
// - A q5/q6 (16-row tile, 64-code group) block is q4's 512-byte nibble block (gemv.h: 16-byte
//   vector l = 4r + c holds base bytes c*8..c*8+7 of rows r and r+8) followed by the high block:
//   q56_high_words(bits) u32 words per lane, lane l's at word index l * q56_high_words(bits).
// - Nibble words of a lane: wi = 0, 1: row r's bytes c*8..+3, c*8+4..+7; wi = 2, 3: the same of
//   row r+8. Nibble n (0..7) of word wi is code 16c + 8(wi & 1) + n of its row's group.
// - A code's high field (bits - 4 bits) is stored XOR q56_high_flip(bits) (q5: bit 4 inverted, q6:
//   bit 5 inverted) at bit q56_high_bit(bits, wi, n) of word q56_high_word(bits, wi), so that
//   v = nibble + 16 * stored field = code + q56_bias(bits) (the code read as offset binary).
// - q56_pair_word(bits, w >> 4si, H, wi, si) for si in 0..3 is the bf16x2 word of
//   {128 + v(nibble si), 128 + v(nibble si + 4)} of word wi (the same pairs q4's decoder forms);
//   minus q56_bias_bf16x2(bits) (exact in bf16) it is the signed codes {q_si, q_si+4}.
// Pure functions; no state.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NINFER_TILED_HD __host__ __device__ __forceinline__
#else
#define NINFER_TILED_HD inline
#endif

namespace ninfer::kernels::detail {

NINFER_TILED_HD constexpr int q56_high_words(int bits) { return bits - 4; } // q5: 1, q6: 2
NINFER_TILED_HD constexpr int q56_high_word(int bits, int wi) { return bits == 5 ? 0 : wi >> 1; }
NINFER_TILED_HD constexpr uint32_t q56_high_flip(int bits) { return bits == 5 ? 1u : 2u; }
NINFER_TILED_HD constexpr int q56_bias(int bits) { return bits == 5 ? 16 : 32; }
// bf16 (128 + bias) in both halves: 144 = 0x4310, 160 = 0x4320.
NINFER_TILED_HD constexpr uint32_t q56_bias_bf16x2(int bits) { return bits == 5 ? 0x43104310u : 0x43204320u; }

// Pair si (nibbles si and si + 4) of word wi has its fields at bits p, p + 16 of its high word, so a
// rotation by (p - 4) puts them at bits 4 and 20, above the nibbles in a bf16 of exponent 128.
NINFER_TILED_HD constexpr int q56_pair_pos(int bits, int wi, int si) {
    return bits == 5 ? 4 * wi + si : 2 * (4 * (wi & 1) + si);
}
NINFER_TILED_HD constexpr int q56_high_bit(int bits, int wi, int n) { return q56_pair_pos(bits, wi, n & 3) + 16 * (n >> 2); }

NINFER_TILED_HD constexpr uint32_t rotate_right(uint32_t v, int r) {
    return r == 0 ? v : (v >> r) | (v << (32 - r));
}

// ws: the nibble word shifted right by 4 * si; h: its high word (q56_high_word).
NINFER_TILED_HD constexpr uint32_t q56_pair_word(int bits, uint32_t ws, uint32_t h, int wi, int si) {
    const uint32_t mask = bits == 5 ? 0x00100010u : 0x00300030u;
    return (ws & 0x000F000Fu) | 0x43004300u | (rotate_right(h, (q56_pair_pos(bits, wi, si) - 4) & 31) & mask);
}

// The high words of lane (r, c) of one group: hr0 / hr8 are rows r / r + 8's high bytes of the group
// (8 for q5, 16 for q6, code-major LSB first as spec §3.2 stores them), or null for padding rows
// (read as code 0). out[0..q56_high_words(bits)).
NINFER_TILED_HD void q56_pack_high(int bits, const uint8_t* hr0, const uint8_t* hr8, int c, uint32_t* out) {
    const int fb = bits - 4;
    out[0] = 0;
    if (bits == 6) out[1] = 0;
    for (int wi = 0; wi < 4; ++wi) {
        const uint8_t* hr = wi < 2 ? hr0 : hr8;
        for (int n = 0; n < 8; ++n) {
            const int code = 16 * c + 8 * (wi & 1) + n;
            const int bit = code * fb; // in the group's stream
            const uint32_t field = hr ? (uint32_t(hr[bit >> 3]) >> (bit & 7)) & ((1u << fb) - 1u) : 0u;
            out[q56_high_word(bits, wi)] |= (field ^ q56_high_flip(bits)) << q56_high_bit(bits, wi, n);
        }
    }
}

} // namespace ninfer::kernels::detail
