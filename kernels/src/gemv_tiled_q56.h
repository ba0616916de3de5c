// ninfer::kernels - how the tiled layout (gemv.h, WeightLayout::Tiled) stores q5_g64_fp16 / q6_g64_fp16
// codes in a lane's words, and how a lane turns them into bf16 pairs. Plain C++ shared by the device
// pack, the GEMV decoder, dequant and a host unit test (tests/unit/formats/tiled_q56.cpp).
//
// Contract:
// - A q5/q6 (16-row tile, 64-code group) block is 512 + 128 * q56_high_words(bits) bytes: lane l owns
//   BITS u32 words, words 0..3 the 16-byte vector at byte 16 l, words 4.. (q5: 1, q6: 2) at byte
//   512 + 4 * q56_high_words(bits) * l (the byte places are q4's and the former high block's).
// - Lane (r, c) holds 32 codes: rows r (h = 0) and r + 8 (h = 1), codes 16c + i (i = 0..15) of the
//   group each, as offset binary v = code + q56_bias(bits) in 0 .. 2^bits - 1.
// - Pair P (0..15, P = 4 wi + si: q4's nibble word wi and shift si) is {lo, hi} = the codes
//   q56_pair_code(P, 0/1); the GEMV's A fragments take the pairs in q4_unit_a's order, so x is permuted
//   (and staged) as for q4.
// - Regular pairs (q5: P < 15, q6: P < 12) keep v at bits [s, s + bits) (lo) and [16 + s, ...) (hi)
//   of word q56_word(P), s = q56_shift(P): one shift per word and field, then one lop3 gives
//   bf16 {128 + v_lo, 128 + v_hi}, and minus q56_bias_bf16x2 the codes (q4's magic number).
// - q5 pair 15: bit b of v_lo (v_hi) is stored inverted at bit 15 (31) of word b (b = 0..4), so that
//   q5_sign_word(w, b) is bf16 +-2^(b-1) per half and their sum minus 0.5 is the code.
// - q6 pairs 12 + t (t = 0..3): v's low nibble at bits 12..15 (28..31) of word t, its top two bits at
//   bits 12 + 2 (t & 1) (+16) of word 4 + t / 2; q6_irregular_word gives bf16 {128 + v_lo, 128 + v_hi}.
// Pure functions; no state.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NINFER_TILED_HD __host__ __device__ __forceinline__
#else
#define NINFER_TILED_HD inline
#endif

namespace ninfer::kernels::detail {

NINFER_TILED_HD constexpr int q56_high_words(int bits) { return bits - 4; } // q5: 1, q6: 2 (words 4..)
NINFER_TILED_HD constexpr int q56_bias(int bits) { return bits == 5 ? 16 : 32; }
// bf16 (128 + bias) in both halves: 144 = 0x4310, 160 = 0x4320.
NINFER_TILED_HD constexpr uint32_t q56_bias_bf16x2(int bits) { return bits == 5 ? 0x43104310u : 0x43204320u; }

// Index (16 h + i) of pair P's lo (up = 0) or hi (up = 1) code among the lane's 32.
NINFER_TILED_HD constexpr int q56_pair_code(int P, int up) {
    return 16 * (P >> 3) + 8 * ((P >> 2) & 1) + (P & 3) + 4 * up;
}
NINFER_TILED_HD constexpr int q56_regular_pairs(int bits) { return bits == 5 ? 15 : 12; }
NINFER_TILED_HD constexpr int q56_word(int bits, int P) { return bits == 5 ? P / 3 : P / 2; }
NINFER_TILED_HD constexpr int q56_shift(int bits, int P) { return bits == 5 ? 5 * (P % 3) : 6 * (P % 2); }
NINFER_TILED_HD constexpr uint32_t q56_field_mask(int bits) { return bits == 5 ? 0x001F001Fu : 0x003F003Fu; }

// Regular pair P: bf16 {128 + v_lo, 128 + v_hi} from the word shifted by q56_shift (one lop3).
NINFER_TILED_HD constexpr uint32_t q56_regular_word(int bits, uint32_t shifted) {
    return (shifted & q56_field_mask(bits)) | 0x43004300u;
}
// q5 pair 15, word b: bf16 2^(b-1) (0.5 .. 8) in both halves, negative where the stored bit is set.
NINFER_TILED_HD constexpr uint32_t q5_sign_word(uint32_t w, int b) {
    return (w & 0x80008000u) | (0x3F003F00u + 0x00800080u * uint32_t(b));
}
// q6 pair 12 + t from word t shifted right by 12 and word 4 + t / 2 shifted right by 8 + 2 (t & 1).
NINFER_TILED_HD constexpr uint32_t q6_irregular_word(uint32_t nib_shifted, uint32_t top_shifted) {
    return (nib_shifted & 0x000F000Fu) | (top_shifted & 0x00300030u) | 0x43004300u;
}

// v of pair P's lo (up = 0) or hi (up = 1) code from the lane's words w[0 .. bits).
NINFER_TILED_HD uint32_t q56_value(int bits, const uint32_t* w, int P, int up) {
    if (P < q56_regular_pairs(bits))
        return (w[q56_word(bits, P)] >> (q56_shift(bits, P) + 16 * up)) & ((1u << bits) - 1u);
    if (bits == 5) {
        uint32_t v = 0;
        for (int b = 0; b < 5; ++b) v |= ((~w[b] >> (15 + 16 * up)) & 1u) << b;
        return v;
    }
    const int t = P - 12;
    return ((w[t] >> (12 + 16 * up)) & 15u) | (((w[4 + t / 2] >> (12 + 2 * (t & 1) + 16 * up)) & 3u) << 4);
}

// The lane's words w[0 .. bits) from its 32 offset-binary codes v[16 h + i].
NINFER_TILED_HD void q56_pack_lane(int bits, const uint8_t* v, uint32_t* w) {
    for (int i = 0; i < bits; ++i) w[i] = 0;
    for (int P = 0; P < 16; ++P)
        for (int up = 0; up < 2; ++up) {
            const uint32_t x = v[q56_pair_code(P, up)];
            if (P < q56_regular_pairs(bits)) {
                w[q56_word(bits, P)] |= x << (q56_shift(bits, P) + 16 * up);
            } else if (bits == 5) {
                for (int b = 0; b < 5; ++b) w[b] |= ((~x >> b) & 1u) << (15 + 16 * up);
            } else {
                const int t = P - 12;
                w[t] |= (x & 15u) << (12 + 16 * up);
                w[4 + t / 2] |= (x >> 4) << (12 + 2 * (t & 1) + 16 * up);
            }
        }
}

// Offset-binary v of code gi (0..63) of an artifact row's group: base nibble (even code low, base:
// the group's 32 bytes) and bits - 4 high bits (code-major, LSB first, docs/ARTIFACT_FORMAT.md
// §3.2: the group's high bytes); a null base is a padding row (code 0).
NINFER_TILED_HD uint32_t q56_artifact_value(int bits, const uint8_t* base, const uint8_t* high, int gi) {
    if (!base) return uint32_t(q56_bias(bits));
    const int fb = bits - 4, bit = gi * fb;
    const uint32_t nib = (uint32_t(base[gi >> 1]) >> (4 * (gi & 1))) & 15u;
    const uint32_t hi = (uint32_t(high[bit >> 3]) >> (bit & 7)) & ((1u << fb) - 1u);
    return (nib | (hi << 4)) ^ uint32_t(q56_bias(bits));
}

} // namespace ninfer::kernels::detail
