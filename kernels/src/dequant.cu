// ninfer::kernels - expands stored weights (every gemv format and layout, nvfp4 included) to bf16 rows for prefill.
//
// A thread expands 4 vectors of 8 consecutive outputs of a row (16-byte stores; dequant_kernel).
// The decoders mirror core/formats (codec_fp.cpp, codec_grouped.cpp): value = multiplier * code in
// fp32, then one bf16 rounding.
#include "ninfer/kernels/dequant.h"

#include "gemv_tiled.cuh"

namespace ninfer::kernels {

namespace {

struct DequantParams {
    const uint8_t* w;       // codes (or bf16 words)
    const uint8_t* high;    // q5/q6 high-bit plane
    const uint8_t* scales;  // fp8: bf16 per row; grouped: fp16 per (row, group)
    int64_t k, row0, n_rows, ld_dst;
    int64_t row_bytes;      // artifact: bytes per row of the code plane
    int64_t high_row_bytes; // q5/q6
    int64_t groups;         // grouped artifact: groups per row
    int64_t tiled_units;    // tiled: units per row
    const float* div;       // nvfp4: divisor per row (gemv.h)
    __nv_bfloat16* dst;
};

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// E4M3FN byte to fp32, exact, for non-NaN codes: the 7 magnitude bits go to the bottom of fp32's
// exponent and the top of its mantissa, and 2^120 re-biases (e == 0 lands on an fp32 subnormal,
// which the multiply scales exactly): no branch per element.
__device__ __forceinline__ float e4m3_to_f32_fast(uint32_t c) {
    return __uint_as_float(((c & 0x80u) << 24) | ((c & 0x7Fu) << 20)) * 0x1p120f;
}
// True when any byte of w is one of the two NaN codes (0x7F, 0xFF): +1 carries into bit 7 only there.
__device__ __forceinline__ bool has_e4m3_nan(uint32_t w) { return (((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u) != 0; }
__device__ __forceinline__ float e4m3_to_f32(uint32_t c) {
    if ((c & 0x7Fu) == 0x7Fu) return __int_as_float(0x7FC00000); // the two NaN codes
    const uint32_t e = (c >> 3) & 15u, m = c & 7u;
    const float mag = e == 0 ? float(m) * 0x1p-9f : __uint_as_float(((e + 120u) << 23) | (m << 20));
    return (c & 0x80u) ? -mag : mag;
}

__device__ __forceinline__ float f16_bits_to_f32(const uint8_t* p) {
    return __half2float(*reinterpret_cast<const __half*>(p));
}

// The 8 values at (row, col .. col + 7), col % 8 == 0.
template <WeightFormat F, bool TILED>
__device__ __forceinline__ void decode8(const DequantParams& p, int64_t row, int64_t col, float (&v)[8]) {
    const int64_t tile = row / 16;
    const int rr = int(row % 16);
    if constexpr (F == WeightFormat::Fp8E4m3RowBf16) {
        const uint8_t* c = TILED ? p.w + (tile * p.tiled_units + col / 64) * 1024 + rr * 64 + col % 64
                                 : p.w + row * p.row_bytes + col;
        const uint2 codes = *reinterpret_cast<const uint2*>(c);
        const float s = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p.scales)[row]);
        if (has_e4m3_nan(codes.x) || has_e4m3_nan(codes.y)) {
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = e4m3_to_f32(((i < 4 ? codes.x : codes.y) >> (8 * (i % 4))) & 0xFFu) * s;
        } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = e4m3_to_f32_fast((i < 4 ? codes.x : codes.y) >> (8 * (i % 4))) * s;
        }
    } else if constexpr (F == WeightFormat::Nvfp4) { // (e2m1 * e4m3 block scale) / d_w, the codec's order
        const uint32_t codes = *reinterpret_cast<const uint32_t*>(p.w + row * p.row_bytes + col / 2);
        const int64_t g = col / 16;
        const float s = e4m3_to_f32(p.scales[((row / 128) * (p.k / 64) + g / 4) * 512 + (row % 32) * 16 +
                                             ((row % 128) / 32) * 4 + g % 4]);
        const float d = p.div[row];
#pragma unroll
        for (int i = 0; i < 8; ++i) { // E2M1: e = bits 2..1 (bias 1), m = bit 0; e = 0 is m * 0.5
            const uint32_t nib = (codes >> (4 * i)) & 15u, e = (nib >> 1) & 3u, m = nib & 1u;
            const float mag = e ? __uint_as_float(((e + 126u) << 23) | (m << 22)) : 0.5f * float(m);
            v[i] = ((nib & 8u) ? -mag : mag) * s / d;
        }
    } else if constexpr (F == WeightFormat::Q8G32Fp16) {
        uint2 codes;
        float s;
        if constexpr (TILED) { // gemv.h: per unit of 64 codes, vector 32h + 4r + c holds k = 16m + 4c, m = 0..3
            const int64_t unit = col / 64;
            const int within = int(col % 64), m = within / 16, c = (within % 16) / 4, grp = within / 32;
            const uint8_t* v = p.w + (tile * p.tiled_units + unit) * 1024 + (rr / 8) * 512 + (4 * (rr % 8) + c) * 16 + 4 * m;
            // Bytes of a word are stored as k, k + 2, k + 1, k + 3 (gemv_tiled.cuh): swap the middle two.
            codes = make_uint2(__byte_perm(*reinterpret_cast<const uint32_t*>(v), 0u, 0x3120),
                               __byte_perm(*reinterpret_cast<const uint32_t*>(v + 16), 0u, 0x3120));
            s = f16_bits_to_f32(p.scales + 2 * (((tile * (p.tiled_units / 2) + unit / 2) * 8 + rr % 8) * 8 +
                                                ((unit % 2) * 2 + grp) * 2 + rr / 8));
        } else {
            codes = *reinterpret_cast<const uint2*>(p.w + row * p.row_bytes + col);
            s = f16_bits_to_f32(p.scales + 2 * (row * p.groups + col / 32));
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = s * float(int8_t(((i < 4 ? codes.x : codes.y) >> (8 * (i % 4))) & 0xFFu));
    } else { // q4 / q5 / q6: 8 codes = 4 base bytes, even code in the low nibble
        const int64_t grp = col / 64;
        const int within = int(col % 64);
        uint32_t base;
        float s;
        constexpr int kBits = detail::tiled_bits(F);
        if constexpr (TILED) { // gemv.h: vector 4r + c of a block holds bytes c*8.. of rows r, r+8
            const int b = within / 2, lane = 4 * (rr % 8) + b / 8, wi = 2 * (rr / 8) + (b % 8) / 4;
            const uint8_t* block = p.w + (tile * p.tiled_units + grp) * detail::tiled_block_bytes(F);
            base = *reinterpret_cast<const uint32_t*>(block + detail::q4_tiled_offset(rr, b)); // gemv_tiled_q4.h
            s = f16_bits_to_f32(p.scales + 2 * (((tile * (p.tiled_units / 4) + grp / 4) * 8 + rr % 8) * 8 +
                                                (grp % 4) * 2 + rr / 8));
            if constexpr (kBits > 4) { // the 8 codes: pairs P = 4 wi + (i & 3) of the lane (gemv_tiled_q56.h)
                uint32_t w[kBits];
#pragma unroll
                for (int j = 0; j < 4; ++j) w[j] = reinterpret_cast<const uint32_t*>(block + lane * 16)[j];
#pragma unroll
                for (int j = 0; j < kBits - 4; ++j)
                    w[4 + j] = reinterpret_cast<const uint32_t*>(block + 512)[lane * (kBits - 4) + j];
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    v[i] = s * float(int(detail::q56_value(kBits, w, 4 * wi + (i & 3), i >> 2)) - detail::q56_bias(kBits));
                return;
            }
        } else {
            base = *reinterpret_cast<const uint32_t*>(p.w + row * p.row_bytes + col / 2);
            s = f16_bits_to_f32(p.scales + 2 * (row * p.groups + grp));
        }
        uint32_t high = 0; // BITS-4 high bits per code, code-major, LSB first
        if constexpr (F == WeightFormat::Q5G64Fp16)
            high = p.high[row * p.high_row_bytes + grp * 8 + within / 8];
        else if constexpr (F == WeightFormat::Q6G64Fp16)
            high = *reinterpret_cast<const uint16_t*>(p.high + row * p.high_row_bytes + grp * 16 + within / 4);
        constexpr int kHalf = 1 << (kBits - 1);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int u = int((base >> (4 * i)) & 15u) | int(((high >> ((kBits - 4) * i)) & ((1u << (kBits - 4)) - 1)) << 4);
            v[i] = s * float((u ^ kHalf) - kHalf);
        }
    }
}

// Each thread expands kVecs vectors of 8 outputs of one row, blockDim.x apart (a warp's stores of
// one vector are contiguous): their loads are all in flight before the first store, where one
// vector a thread left one load in flight. A block takes blockDim.y rows (row = blockIdx.x *
// blockDim.y + threadIdx.y): no 64-bit division per element.
constexpr int kVecs = 4;

template <WeightFormat F, bool TILED> __global__ void dequant_kernel(DequantParams p) {
    const int64_t r = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
    if (r >= p.n_rows) return;
    const int64_t row = p.row0 + r;
    const int64_t col0 = (int64_t(blockIdx.y) * blockDim.x * kVecs + threadIdx.x) * 8;
    uint4 out[kVecs];
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
        const int64_t col = col0 + int64_t(i) * blockDim.x * 8;
        if (col >= p.k) break;
        if constexpr (F == WeightFormat::Bf16) {
            out[i] = TILED ? *reinterpret_cast<const uint4*>(p.w + (row / 16 * p.tiled_units + col / 32) * 1024 +
                                                            (row % 16) * 64 + (col % 32) * 2)
                           : *reinterpret_cast<const uint4*>(p.w + row * p.row_bytes + col * 2);
        } else {
            float v[8];
            decode8<F, TILED>(p, row, col, v);
            __nv_bfloat162 h[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
            out[i] = *reinterpret_cast<const uint4*>(h);
        }
    }
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
        const int64_t col = col0 + int64_t(i) * blockDim.x * 8;
        if (col >= p.k) break;
        *reinterpret_cast<uint4*>(p.dst + r * p.ld_dst + col) = out[i];
    }
}

template <WeightFormat F, bool TILED> void launch(const DequantParams& p, int64_t n_rows, cudaStream_t stream) {
    const int64_t vecs = p.k / 8, per_thread_row = (vecs + kVecs - 1) / kVecs;
    const int tx = int(std::min<int64_t>(256, align_up(per_thread_row, 32))), ty = 256 / tx;
    const dim3 grid(unsigned((n_rows + ty - 1) / ty), unsigned((vecs + int64_t(tx) * kVecs - 1) / (int64_t(tx) * kVecs)));
    dequant_kernel<F, TILED><<<grid, dim3(tx, ty), 0, stream>>>(p);
}

} // namespace

cudaError_t dequant_bf16(const WeightView& w, int64_t row0, int64_t n_rows, __nv_bfloat16* dst, int64_t ld_dst,
                         cudaStream_t stream) {
    const bool tiled = w.layout == WeightLayout::Tiled;
    if (!w.data || !dst || (reinterpret_cast<uintptr_t>(w.data) & 15u) || (reinterpret_cast<uintptr_t>(dst) & 15u) ||
        w.k < 16 || w.k % 16 != 0 || row0 < 0 || n_rows < 0 || row0 + n_rows > w.n || ld_dst % 8 != 0 || ld_dst < w.k ||
        (tiled && !gemv_has_tiled_layout(w.format)) || n_rows > int64_t(0x7FFFFFFF) ||
        (w.format == WeightFormat::Nvfp4 && (w.n % 128 != 0 || w.k % 64 != 0)))
        return cudaErrorInvalidValue;
    if (n_rows == 0) return cudaSuccess;
    DequantParams p{};
    p.w = static_cast<const uint8_t*>(w.data);
    p.k = w.k;
    p.row0 = row0;
    p.n_rows = n_rows;
    p.ld_dst = ld_dst;
    p.dst = dst;
    if (tiled) {
        p.tiled_units = tiled_units(w.format, w.n, w.k);
        p.scales = p.w + align_up((w.n + 15) / 16 * p.tiled_units * detail::tiled_block_bytes(w.format), 256);
    } else if (w.format == WeightFormat::Bf16) {
        p.row_bytes = 2 * w.k;
    } else if (w.format == WeightFormat::Fp8E4m3RowBf16) {
        p.row_bytes = w.k;
        p.scales = p.w + align_up(w.n * w.k, 256);
    } else if (w.format == WeightFormat::Nvfp4) { // codes | swizzled E4M3 scales | divisor per row
        p.row_bytes = w.k / 2;
        p.scales = p.w + align_up(w.n * w.k / 2, 256);
        p.div = reinterpret_cast<const float*>(p.scales + w.n * w.k / 16);
    } else { // row_split_k128_v1: base | high | scales, each plane 256-byte aligned
        const int group = w.format == WeightFormat::Q8G32Fp16 ? 32 : 64;
        const int high_bytes = w.format == WeightFormat::Q5G64Fp16 ? 8 : w.format == WeightFormat::Q6G64Fp16 ? 16 : 0;
        p.groups = align_up(w.k, 128) / group;
        p.row_bytes = p.groups * 32;
        p.high_row_bytes = p.groups * high_bytes;
        p.high = p.w + align_up(w.n * p.row_bytes, 256);
        p.scales = p.high + align_up(w.n * p.high_row_bytes, 256);
    }
    switch (w.format) {
    case WeightFormat::Bf16:
        tiled ? launch<WeightFormat::Bf16, true>(p, n_rows, stream) : launch<WeightFormat::Bf16, false>(p, n_rows, stream);
        break;
    case WeightFormat::Fp8E4m3RowBf16:
        tiled ? launch<WeightFormat::Fp8E4m3RowBf16, true>(p, n_rows, stream)
              : launch<WeightFormat::Fp8E4m3RowBf16, false>(p, n_rows, stream);
        break;
    case WeightFormat::Q4G64Fp16:
        tiled ? launch<WeightFormat::Q4G64Fp16, true>(p, n_rows, stream)
              : launch<WeightFormat::Q4G64Fp16, false>(p, n_rows, stream);
        break;
    case WeightFormat::Q5G64Fp16:
        tiled ? launch<WeightFormat::Q5G64Fp16, true>(p, n_rows, stream)
              : launch<WeightFormat::Q5G64Fp16, false>(p, n_rows, stream);
        break;
    case WeightFormat::Q6G64Fp16:
        tiled ? launch<WeightFormat::Q6G64Fp16, true>(p, n_rows, stream)
              : launch<WeightFormat::Q6G64Fp16, false>(p, n_rows, stream);
        break;
    case WeightFormat::Q8G32Fp16:
        tiled ? launch<WeightFormat::Q8G32Fp16, true>(p, n_rows, stream)
              : launch<WeightFormat::Q8G32Fp16, false>(p, n_rows, stream);
        break;
    case WeightFormat::Nvfp4: launch<WeightFormat::Nvfp4, false>(p, n_rows, stream); break;
    }
    return cudaGetLastError();
}

} // namespace ninfer::kernels
