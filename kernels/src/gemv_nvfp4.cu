// ninfer::kernels - decode GEMV for nvfp4 weights: E2M1 codes times E4M3 block scales, decoded to
// bf16 in registers (Hopper has no FP4 tensor cores), mma.sync with fp32 sums, split-K.
//
// A lane (c = lane % 4) owns one 16-code block of each 64-code unit: 8 code bytes of rows g and
// g+8 and the block's scale byte (the swizzled layout keeps a row's 4 scales of a unit in 4
// consecutive bytes). The mma's 16 k slots are the lane's codes 4j..4j+3 for j = 0..3; x is read
// at the same columns, so no permutes are needed. E2M1 magnitude * E4M3 scale has at most 5
// significant bits and lies in [2^-10, 2688]: the bf16 product is exact.
#include "gemv_nvfp4.cuh"

namespace ninfer::kernels::detail {

namespace {

constexpr int kNvfp4Unroll = 4;

// Four E2M1 nibbles (the low 16 bits of w) to two bf16 pairs: the magnitude's high and low bf16
// bytes come from byte-permute tables (0, 0.5, 1, 1.5, 2, 3, 4, 6), the sign bit is moved in.
__device__ __forceinline__ void e2m1x4_to_bf16(uint32_t w, uint32_t& p01, uint32_t& p23) {
    const uint32_t mag = w & 0x7777u;
    const uint32_t hi = prmt(0x3F3F3F00u, 0x40404040u, mag);
    const uint32_t lo = prmt(0xC0800000u, 0xC0804000u, mag);
    p01 = prmt(lo, hi, 0x5140) | ((w << 12) & 0x00008000u) | ((w << 24) & 0x80000000u);
    p23 = prmt(lo, hi, 0x7362) | ((w << 4) & 0x00008000u) | ((w << 16) & 0x80000000u);
}

// One unit for rows (r0, r1): wa/wb the lane's 16 codes of each row, sa/sb their block scales as
// bf16 pairs {s, s}, xs the lane's 16 x values.
__device__ __forceinline__ void mma_nvfp4_unit(float (&acc)[4], uint2 wa, uint2 wb, uint32_t sa, uint32_t sb,
                                               const uint32_t (&xs)[8]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const uint32_t ca = (j < 2 ? wa.x : wa.y) >> (16 * (j & 1));
        const uint32_t cb = (j < 2 ? wb.x : wb.y) >> (16 * (j & 1));
        uint32_t a01, a23, b01, b23;
        e2m1x4_to_bf16(ca, a01, a23);
        e2m1x4_to_bf16(cb, b01, b23);
        mma_bf16_16816(acc, bf16x2_mul(a01, sa), bf16x2_mul(b01, sb), bf16x2_mul(a23, sa), bf16x2_mul(b23, sb),
                       xs[2 * j], xs[2 * j + 1]);
    }
}

// Byte offset of the E4M3 scale of (row, 16-column block 4 * unit + c) in the scale plane
// (docs/ARTIFACT_FORMAT.md §3.3).
__device__ __forceinline__ int64_t scale_at(int64_t row, int64_t unit, int c, int64_t units_per_row) {
    return ((row / 128) * units_per_row + unit) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + c;
}

__global__ void __launch_bounds__(kGemvWarps * 32) gemv_nvfp4_kernel(GemvParams p) {
    const GemvLane l = gemv_lane_begin(p);
    const int c = l.c;
    const int64_t r0 = l.r0, r1 = l.r1;
    const int64_t n_units = p.k / 64;
    const int64_t u_begin = int64_t(blockIdx.y) * p.units_per_split;
    const int64_t u_end = min(n_units, u_begin + p.units_per_split);
    const uint8_t* w0 = p.w + r0 * p.row_bytes + c * 8;
    const uint8_t* w1 = p.w + r1 * p.row_bytes + c * 8;

    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t u = u_begin; u < u_end; u += kNvfp4Unroll) {
        uint2 a[kNvfp4Unroll][2];
        uint4 b[kNvfp4Unroll][2];
        uint32_t s[kNvfp4Unroll][2];
#pragma unroll
        for (int i = 0; i < kNvfp4Unroll; ++i) { // all loads of the step before the first use
            const bool ok = u + i < u_end;
            const int64_t kk = (u + i) * 64 + c * 16;
            a[i][0] = ok ? load_stream8(w0 + (u + i) * 32) : make_uint2(0, 0);
            a[i][1] = ok ? load_stream8(w1 + (u + i) * 32) : make_uint2(0, 0);
            b[i][0] = ok && l.has_token ? load_cached16(l.xg + kk) : make_uint4(0, 0, 0, 0);
            b[i][1] = ok && l.has_token ? load_cached16(l.xg + kk + 8) : make_uint4(0, 0, 0, 0);
            s[i][0] = ok ? p.scales[scale_at(r0, u + i, c, n_units)] : 0u;
            s[i][1] = ok ? p.scales[scale_at(r1, u + i, c, n_units)] : 0u;
        }
#pragma unroll
        for (int i = 0; i < kNvfp4Unroll; ++i) {
            const uint32_t xs[8] = {b[i][0].x, b[i][0].y, b[i][0].z, b[i][0].w,
                                    b[i][1].x, b[i][1].y, b[i][1].z, b[i][1].w};
            // {s, s} as a bf16 pair: the E4M3 byte in bytes 0 and 2, converted exactly.
            mma_nvfp4_unit(acc, a[i][0], a[i][1], fp8_pair_to_bf16(s[i][0] * 0x10001u),
                           fp8_pair_to_bf16(s[i][1] * 0x10001u), xs);
        }
    }
    const float* div = reinterpret_cast<const float*>(p.scales + p.n * p.k / 16);
    const float d0 = div[r0], d1 = div[r1];
    acc[0] /= d0;
    acc[1] /= d0;
    acc[2] /= d1;
    acc[3] /= d1;
    gemv_lane_store(p, l, acc);
}

} // namespace

cudaError_t gemv_nvfp4_launch(const GemvParams& p, dim3 grid, dim3 block, cudaStream_t stream) {
    return launch_gemv(gemv_nvfp4_kernel, grid, block, 0, stream, p);
}

} // namespace ninfer::kernels::detail
