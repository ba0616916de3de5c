// ninfer::kernels - the quantised KV row store of decode attention's prep (kv_codec.h's fp8 / int8
// rows from f32 values), shared by attn_prep_kernel (attention_decode.cu) and the f32 check-mode
// prep (mixers_f32.cu), which must encode alike. Device code.
#pragma once

#include "common.cuh"
#include "kv_quant.cuh"

namespace ninfer::kernels::detail {

// Quantises one row held by a block of 128 threads (y0 at dim tid, y1 at tid + 128) exactly as
// kv_encode_row does (kv_codec.cpp): scale from the amax, reciprocal multiply, RNE.
__device__ inline void kv_store_quantized(KvDtype dtype, float y0, float y1, KvQuantRow row, float* red) {
    const int tid = threadIdx.x, warp = tid >> 5;
    const float m0 = warp_max(fabsf(y0)), m1 = warp_max(fabsf(y1));
    __syncthreads(); // red may still be read by an earlier reduction
    if ((tid & 31) == 0) {
        red[warp] = m0;
        red[4 + warp] = m1;
    }
    __syncthreads();
    if (dtype == KvDtype::Fp8) {
        const float amax = fmaxf(fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3])),
                                 fmaxf(fmaxf(red[4], red[5]), fmaxf(red[6], red[7])));
        uint16_t sw = amax > 0.f ? __bfloat16_as_ushort(__float2bfloat16_rn(amax / 448.f)) : 0;
        if (sw == 0 && amax > 0.f) sw = 1;
        const float inv = sw ? 1.f / bf16_bits_to_float(sw) : 0.f;
        row.codes[tid] = __nv_cvt_float_to_fp8(fminf(fmaxf(y0 * inv, -448.f), 448.f), __NV_SATFINITE, __NV_E4M3);
        row.codes[tid + 128] = __nv_cvt_float_to_fp8(fminf(fmaxf(y1 * inv, -448.f), 448.f), __NV_SATFINITE, __NV_E4M3);
        if (tid == 0) row.scales[0] = sw;
        return;
    }
    // int8, 64-value groups: dim tid is in group tid / 64 (warps 2g, 2g+1), dim tid + 128 in 2 + tid / 64.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int grp = 2 * half + tid / 64;
        const float amax = fmaxf(red[4 * half + 2 * (tid / 64)], red[4 * half + 2 * (tid / 64) + 1]);
        uint16_t sw = amax > 0.f ? __half_as_ushort(__float2half_rn(amax / 127.f)) : 0;
        if (sw == 0 && amax > 0.f) sw = 1;
        const float inv = sw ? 1.f / f16_bits_to_float(sw) : 0.f;
        const float y = half ? y1 : y0;
        row.codes[tid + 128 * half] = uint8_t(int8_t(fminf(fmaxf(rintf(y * inv), -127.f), 127.f)));
        if (tid % 64 == 0) row.scales[grp] = sw;
    }
}

} // namespace ninfer::kernels::detail
