// ninfer::kernels - how the tiled layout (gemv.h, WeightLayout::Tiled) stores q4_g64_fp16 codes in
// a lane's 16 bytes, and how a lane turns them into bf16 pairs. Plain C++ shared by the device
// pack, the GEMV decoder's constants, dequant and a host unit test
// (tests/unit/formats/tiled_q4.cpp).
//
// Contract:
// - A q4 (16-row tile, 64-code group) block is 512 bytes: lane l = 4 r + c owns the 16-byte vector
// at
//   byte 16 l; its bytes 0..7 are row r's group bytes 8c .. 8c + 7 and bytes 8..15 row r + 8's, as
//   the artifact stores them (code 2i in the low nibble of byte i, two's complement).
//   q4_tiled_offset is the block byte of (row, group byte); q4_lane_byte the inverse.
// - The lane's 32 codes are numbered 16 h + i (row r + 8h, group code 16c + i); its little-endian
// word
//   wi = 2 h + j (0..3) holds codes 16 h + 8 j + n at nibble n.
// - Pair P = 4 wi + si (q56_pair_code's numbering, gemv_tiled_q56.h) is {lo, hi} = codes
//   16 h + 8 j + si and + 4, read from word wi shifted right by 4 si: q4_pair_bits of that is bf16
//   {136 + q_lo, 136 + q_hi}, and minus bf16 136 in both halves (kQ4PairBias) the codes. The GEMV's
//   lop3 (gemv_kernel.cuh q4_pair_to_bf16: truth table 0xCA on kQ4PairLop3B / kQ4PairLop3C)
//   computes q4_pair_bits in one instruction.
// Pure functions; no state.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NINFER_TILED_Q4_HD __host__ __device__ __forceinline__
#else
#define NINFER_TILED_Q4_HD inline
#endif

namespace ninfer::kernels::detail {

constexpr uint32_t kQ4PairLop3B =
    0x43074307u; // lop3 operand b: bits passed from the code (0..2) and the exponent
constexpr uint32_t kQ4PairLop3C = 0x43084308u; // operand c: the inverted bit 3 and the exponent
constexpr uint32_t kQ4PairBias = 0x43084308u;  // bf16 136 in both halves

// Block byte of row rr (0..15 in the tile) and group byte b (0..31: codes 2b, 2b + 1).
NINFER_TILED_Q4_HD constexpr int q4_tiled_offset(int rr, int b) {
    return 16 * (4 * (rr % 8) + b / 8) + 8 * (rr / 8) + b % 8;
}
// Lane byte j (0..15) of lane l: tile row (l / 4 + 8 (j / 8)) and group byte (8 (l % 4) + j % 8).
NINFER_TILED_Q4_HD constexpr int q4_lane_row(int lane, int j) { return lane / 4 + 8 * (j / 8); }
NINFER_TILED_Q4_HD constexpr int q4_lane_group_byte(int lane, int j) {
    return 8 * (lane % 4) + j % 8;
}

// Pair P's word (0..3) and right shift.
NINFER_TILED_Q4_HD constexpr int q4_pair_word(int P) { return P >> 2; }
NINFER_TILED_Q4_HD constexpr int q4_pair_shift(int P) { return 4 * (P & 3); }
// bf16 {128 + (nibble ^ 8), ...} = {136 + q, ...} from the nibbles at bits 0..3 and 16..19.
NINFER_TILED_Q4_HD constexpr uint32_t q4_pair_bits(uint32_t shifted) {
    return ((shifted ^ 0x00080008u) & 0x000F000Fu) | 0x43004300u;
}
// Signed code of pair P's lo (up = 0) or hi (up = 1) half from the lane's words w[0..3].
NINFER_TILED_Q4_HD constexpr int q4_value(const uint32_t *w, int P, int up) {
    const uint32_t nib = (w[q4_pair_word(P)] >> (q4_pair_shift(P) + 16 * up)) & 15u;
    return int(nib ^ 8u) - 8;
}

} // namespace ninfer::kernels::detail
