// ninfer::kernels - the q4 ring GEMV's int8-activation route (W4A8, gemv.h GemvArgs::x_int8).
//
// Contract: stage_x_int8 quantises the block's k range of every token once per block into shared
// memory (x8_stage_bytes), exactly as gemv.h defines it; q4a8_compute multiplies one ring step of
// the tiled q4 layout (TiledFrag<Q4G64Fp16>, unchanged) with it on int8 tensor cores and adds the
// scaled group sums to the same accumulator fragment as tiled_compute, so tiled_finish stores it.
//
// Why it is cheaper: the tiled q4 lane vector (rows g and g+8, 16 codes each, word j = codes
// 16c + 8j .. + 7 as stored two's complement nibbles) becomes the A fragments of two
// m16n8k32 s8 mma steps with one lop3 (odd codes: w & 0xF0F0F0F0 is 16 q as int8) or a shift and
// a lop3 (even codes) per four codes, against ~2.75 instructions per two codes on the bf16 route.
// The factor 16 of the nibbles in the high half of each byte goes into the activation scale
// (d / 16, exact). x is staged in the k order that these A fragments imply (q4a8_pack_b).
#pragma once

#include "gemv_tiled.cuh"
#include "int8_x.cuh"

namespace ninfer::kernels::detail {

// Staged int8 x: row r (token) holds per unit of the split and lane quad c the 16 bytes of that
// lane's B words (4 words: two per mma step); 64 bytes of padding put consecutive rows half a bank
// period apart (conflict-free 16-byte loads at batch 8). After the n_tokens rows, per unit the 8
// tokens' d / 16 as float (zero for tokens >= n_tokens).
__host__ __device__ constexpr int64_t x8_row_bytes(int64_t units) { return units * 64 + 64; }
// An Int8X (gemv.h) covers every unit the ring reads from it: the q4 tiled units of a row.
static_assert(kTiledUnitPad == TiledTraits<WeightFormat::Q4G64Fp16>::kUnroll && int8_x_units(64) == kTiledUnitPad &&
                  int8_x_units(512) == kTiledUnitPad && int8_x_units(528) == 2 * kTiledUnitPad,
              "int8_x_units(k) must be the q4 tiled layout's units per row (gemv_pack.cu geometry)");
__host__ __device__ constexpr int64_t x8_stage_bytes(int64_t units, int n_tokens) {
    return n_tokens * x8_row_bytes(units) + units * 8 * int64_t(sizeof(float));
}

__device__ __forceinline__ void mma_s8_16832(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Quantise units [u_begin, u_begin + units) of every token into xs (x8_stage_bytes(p.units_per_split,
// n_tokens) bytes), all threads of the block.
__device__ __forceinline__ void stage_x_int8(const GemvParams& p, uint8_t* xs, int64_t u_begin, int units) {
    const int64_t row_bytes = x8_row_bytes(p.units_per_split);
    float* dsc = reinterpret_cast<float*>(xs + p.n_tokens * row_bytes);
    q4a8_quantise_rows<true>(p.x, p.x_lo, p.ldx, p.n_tokens, p.k, u_begin, units, threadIdx.x, blockDim.x,
                       [&](int r, int ui, int c, const uint4& words, float d16) {
                           *reinterpret_cast<uint4*>(xs + r * row_bytes + ui * 64 + c * 16) = words;
                           if (c == 0) dsc[ui * 8 + r] = d16;
                       });
    for (int idx = threadIdx.x; idx < units * 8; idx += blockDim.x)
        if ((idx & 7) >= p.n_tokens) dsc[idx] = 0.f;
    __syncthreads();
}

// (w & mask) as one lop3 with the mask in a register (hoisted), and (w << 4) & mask.
__device__ __forceinline__ uint32_t q4a8_odd(uint32_t w, uint32_t mask) { return w & mask; }
__device__ __forceinline__ uint32_t q4a8_even(uint32_t w, uint32_t mask) { return (w << 4) & mask; }

// One ring step (kUnroll units) of the q4 tile times the staged int8 x. xrow: the lane's token row
// (token 0's for a column without a token: its sums are never stored) at quad c and the step's
// first unit; dsc: the step's first unit's 8 scales, the lane reads tokens 2c, 2c + 1.
// GLOBAL: xrow and dsc point into an Int8X (read through L1) instead of the shared stage.
template <bool GLOBAL = false>
__device__ __forceinline__ void q4a8_compute(const TiledFrag<WeightFormat::Q4G64Fp16>& f, const uint8_t* xrow,
                                             const float* dsc, int c, float (&acc)[1][4]) {
    constexpr int kUnroll = TiledTraits<WeightFormat::Q4G64Fp16>::kUnroll;
    const uint32_t mask = 0xF0F0F0F0u;
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
        const uint4 w = f.w[i][0]; // x, y: row g words 0, 1; z, w: row g + 8
        const uint4 b = GLOBAL ? load_cached16(xrow + i * 64) : *reinterpret_cast<const uint4*>(xrow + i * 64);
        int d[4] = {0, 0, 0, 0};
        mma_s8_16832(d, q4a8_even(w.x, mask), q4a8_even(w.z, mask), q4a8_odd(w.x, mask), q4a8_odd(w.z, mask), b.x, b.y);
        mma_s8_16832(d, q4a8_even(w.y, mask), q4a8_even(w.w, mask), q4a8_odd(w.y, mask), q4a8_odd(w.w, mask), b.z, b.w);
        const uint4 sq = f.s[i / 4];
        const uint32_t sw = (i % 4) == 0 ? sq.x : (i % 4) == 1 ? sq.y : (i % 4) == 2 ? sq.z : sq.w;
        const float2 s = __half22float2(*reinterpret_cast<const __half2*>(&sw)); // rows g, g + 8
        const float2 t = GLOBAL ? __ldg(reinterpret_cast<const float2*>(dsc + i * 8 + 2 * c)) // tokens 2c, 2c + 1
                                : *reinterpret_cast<const float2*>(dsc + i * 8 + 2 * c);
        acc[0][0] = fmaf(float(d[0]), s.x * t.x, acc[0][0]);
        acc[0][1] = fmaf(float(d[1]), s.x * t.y, acc[0][1]);
        acc[0][2] = fmaf(float(d[2]), s.y * t.x, acc[0][2]);
        acc[0][3] = fmaf(float(d[3]), s.y * t.y, acc[0][3]);
    }
}

} // namespace ninfer::kernels::detail
