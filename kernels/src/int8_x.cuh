// ninfer::kernels - the q4 int8 route's quantisation of x (gemv.h GemvArgs::x_int8, Int8X), shared
// by the GEMV's own staging (gemv_q4a8.cuh) and by the producers of x that write an Int8X
// (add_rmsnorm, swiglu, quantise_int8_x), so that every path computes the same bytes.
//
// Contract: q4a8_quantise16 is gemv.h's quantiser for one 64-element unit held by a lane quad (16
// values a lane, four consecutive lanes of a warp, every lane of the warp calling); the B-word
// order of the bytes is q4a8_pack_b's. q4a8_quantise_rows walks (row, unit, quad) items over a
// block's threads. NC: x read through the non-coherent path (x written by an earlier kernel);
// a producer that wrote x itself in this kernel (after __syncthreads) reads with NC = false.
#pragma once

#include "common.cuh"
#include "ninfer/kernels/gemv.h"

namespace ninfer::kernels::detail {

// The low bytes of four words as the bytes of one word, first in byte 0.
__device__ __forceinline__ uint32_t pack_s8x4(int a, int b, int c, int d) {
    return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
}

// The B words of a lane's 16 codes k0 .. k0 + 15 from their quantised values q[0..15]: step t's
// b0 takes the even codes of k0 + 8t .. + 7 (the A fragment's even-code word), b1 the odd ones.
__device__ __forceinline__ uint4 q4a8_pack_b(const int (&q)[16]) {
    return make_uint4(pack_s8x4(q[0], q[2], q[4], q[6]), pack_s8x4(q[1], q[3], q[5], q[7]),
                      pack_s8x4(q[8], q[10], q[12], q[14]), pack_s8x4(q[9], q[11], q[13], q[15]));
}

// 8 bf16 at p, through the non-coherent path when NC. A lane quad c of a 64-element unit u reads
// k0 = 64 u + 16 c .. + 15; k % 16 == 0, so a quad's 16 values are all in k or all past it.
template <bool NC>
__device__ __forceinline__ uint4 q4a8_load_vec(const __nv_bfloat16* p) {
    if constexpr (NC) return load_cached16(p);
    else return *reinterpret_cast<const uint4*>(p);
}
// A lane quad's raw bf16 words of one unit: x's 16 values, then lo's (zero without lo); zeros
// past k. Separate from the widening so that a thread can issue several units' loads at once.
struct Q4a8Raw {
    uint4 x0, x1, l0, l1;
};
template <bool NC>
__device__ __forceinline__ Q4a8Raw q4a8_fetch16(const __nv_bfloat16* x, const __nv_bfloat16* lo, int64_t k0, int64_t k) {
    const bool in = k0 < k, with_lo = in && lo;
    const uint4 z = make_uint4(0, 0, 0, 0);
    return {in ? q4a8_load_vec<NC>(x + k0) : z, in ? q4a8_load_vec<NC>(x + k0 + 8) : z,
            with_lo ? q4a8_load_vec<NC>(lo + k0) : z, with_lo ? q4a8_load_vec<NC>(lo + k0 + 8) : z};
}
// The 16 fp32 values: x, or x + lo (fp32 add, the value the bf16 route multiplies) when has_lo.
__device__ __forceinline__ void q4a8_widen16(const Q4a8Raw& w, bool has_lo, float (&xf)[16]) {
    const uint32_t xw[8] = {w.x0.x, w.x0.y, w.x0.z, w.x0.w, w.x1.x, w.x1.y, w.x1.z, w.x1.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        xf[2 * j] = __uint_as_float(xw[j] << 16);
        xf[2 * j + 1] = __uint_as_float(xw[j] & 0xFFFF0000u);
    }
    if (has_lo) {
        const uint32_t lw[8] = {w.l0.x, w.l0.y, w.l0.z, w.l0.w, w.l1.x, w.l1.y, w.l1.z, w.l1.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            xf[2 * j] = __fadd_rn(xf[2 * j], __uint_as_float(lw[j] << 16));
            xf[2 * j + 1] = __fadd_rn(xf[2 * j + 1], __uint_as_float(lw[j] & 0xFFFF0000u));
        }
    }
}

// gemv.h's quantisation of one unit, lane quad c holding its 16 values xf: the lane's 16 B of B words
// and the unit's d / 16 (every lane of the quad). The four lanes of a quad are consecutive lanes
// of one warp, and every lane of the warp must call (the amax is a shuffle reduction).
// max that returns NaN when either input is NaN (fmaxf returns the other one).
__device__ __forceinline__ float fmax_nan(float a, float b) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
// A group holding a NaN or an infinity gets q 0 and d / 16 = NaN or inf (amax / 127 / 16), so its
// products are 0 x NaN or 0 x inf = NaN: the output is NaN as on the bf16 route, not a finite value.
__device__ __forceinline__ void q4a8_quantise16(const float (&xf)[16], uint4& words, float& d16) {
    float amax = 0.f;
#pragma unroll
    for (int e = 0; e < 16; ++e) amax = fmax_nan(amax, fabsf(xf[e]));
    amax = fmax_nan(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmax_nan(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const bool finite = amax <= 3.402823466e38f; // false for NaN and inf
    // |x * inv| <= 127 (1 + 2^-23)^2 < 127.5: the rounding never leaves -127..127. inv is kept
    // finite (amax below 127 / FLT_MAX would make it inf); then |x * inv| < 127 as well.
    const float inv = amax > 0.f ? fminf(__fdiv_rn(127.f, amax), 3.402823466e38f) : 0.f;
    // rint by the fp32 adder: x * inv + 1.5 * 2^23 has ulp 1, so its low byte is rint(x * inv)
    // (ties to even) as an int8; F2I would run on the quarter-rate conversion pipe.
    int q[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) q[e] = finite ? __float_as_int(__fadd_rn(__fmul_rn(xf[e], inv), 12582912.f)) : 0;
    words = q4a8_pack_b(q);
    d16 = __fdiv_rn(amax, 127.f) * 0.0625f;
}

// Every (row, unit, quad) item of rows x rows x units x 4, by the calling threads (thread tid of
// nthreads, nthreads a multiple of 32): item(r, u, c, words, d16) receives each result; a warp
// runs whole iterations (items past the end compute zeros and are not passed on).
template <bool NC, class Item>
__device__ __forceinline__ void q4a8_quantise_rows(const __nv_bfloat16* x, const __nv_bfloat16* lo, int64_t ldx,
                                                   int rows, int64_t k, int64_t u_begin, int units, int tid,
                                                   int nthreads, Item item) {
    const int total = rows * units * 4, padded = (total + 31) / 32 * 32;
    // A thread loads kBatch items before it quantises any: a loop of load, quantise, store took one
    // dependent round trip per item (the loads of item i + 1 issued after item i's store), and the
    // GEMVs quantise at batch 1 on their critical path (27B gate/up: 3 items a thread).
    constexpr int kBatch = 3;
    for (int base = tid; base < padded; base += kBatch * nthreads) {
        Q4a8Raw raw[kBatch]; // every load of the batch in flight before the first use
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int idx = base + b * nthreads; // idx < padded is warp-uniform (both multiples of 32)
            const bool valid = idx < total;
            const int r = valid ? idx / (units * 4) : 0, ui = (idx >> 2) % units, c = idx & 3;
            const int64_t k0 = valid ? (u_begin + ui) * 64 + c * 16 : k; // past k: zeros, no load
            raw[b] = q4a8_fetch16<NC>(x + int64_t(r) * ldx, lo ? lo + int64_t(r) * ldx : nullptr, k0, k);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int idx = base + b * nthreads;
            if (idx >= padded) break;
            const bool valid = idx < total;
            const int r = valid ? idx / (units * 4) : 0, ui = (idx >> 2) % units, c = idx & 3;
            float xf[16];
            q4a8_widen16(raw[b], lo != nullptr, xf);
            uint4 words;
            float d16;
            q4a8_quantise16(xf, words, d16);
            if (valid) item(r, ui, c, words, d16);
        }
    }
}

// The same into an Int8X in global memory (the producers' side of GemvArgs::x8): rows x (token
// slots token0 ..), units [u_begin, u_begin + units). The caller zeroes d of slots without a token.
template <bool NC>
__device__ __forceinline__ void quantise_rows_to(const __nv_bfloat16* x, const __nv_bfloat16* lo, int64_t ldx,
                                                 int rows, int token0, int64_t k, int64_t u_begin, int units,
                                                 const Int8X& out, int tid, int nthreads) {
    q4a8_quantise_rows<NC>(x, lo, ldx, rows, k, u_begin, units, tid, nthreads,
                       [&](int r, int ui, int c, const uint4& words, float d16) {
                           const int64_t u = u_begin + ui;
                           *reinterpret_cast<uint4*>(out.q + (token0 + r) * out.row_bytes + u * 64 + c * 16) = words;
                           if (c == 0) out.d[u * 8 + token0 + r] = d16;
                       });
}
// d[u * 8 + t] = 0 for the token slots t = n_tokens .. 7 of units u < units (d: an Int8X's at its
// first unit).
__device__ __forceinline__ void zero_int8_slots(float* d, int n_tokens, int units, int tid, int nthreads) {
    for (int idx = tid; idx < units * 8; idx += nthreads)
        if ((idx & 7) >= n_tokens) d[idx] = 0.f;
}

} // namespace ninfer::kernels::detail
