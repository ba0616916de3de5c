// ninfer::kernels - addressing and decoding of fp8/int8 KV pages (attention_decode.h's layout),
// shared by the decode and prefill attention kernels.
#pragma once

#include "ninfer/kernels/attention_decode.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace ninfer::kernels::detail {

constexpr int kKvHeadDim = 256;

// One stored row of a quantised pool: its head_dim codes and its 16-bit scales.
struct KvQuantRow {
    uint8_t* codes;
    uint16_t* scales;
};

// Row (kvh, pos % 64) of the page that holds position pos of lane `lane`.
__device__ __forceinline__ KvQuantRow kv_quant_row(uint8_t* pool, const KvPages& kv, int n_kv, int lane, int kvh,
                                                   int pos) {
    const int page = kv.page_table[int64_t(lane) * kv.max_pages + pos / kKvPageTokens];
    uint8_t* base = pool + int64_t(page) * int64_t(kv_page_bytes(kv.dtype, n_kv, kKvHeadDim));
    const int64_t row = int64_t(kvh) * kKvPageTokens + pos % kKvPageTokens;
    uint16_t* scales = reinterpret_cast<uint16_t*>(base + int64_t(n_kv) * kKvPageTokens * kKvHeadDim);
    return {base + row * kKvHeadDim, scales + row * kv_scales_per_row(kv.dtype, kKvHeadDim)};
}

__device__ __forceinline__ float e4m3_to_float(uint8_t c) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E4M3)));
}
__device__ __forceinline__ float bf16_bits_to_float(uint16_t w) { return __uint_as_float(uint32_t(w) << 16); }
__device__ __forceinline__ float f16_bits_to_float(uint16_t w) { return __half2float(__ushort_as_half(w)); }

// The scale of dims [8c, 8c + 8) of a row (fp8: the row's; int8: its 64-value group's).
__device__ __forceinline__ float kv_scale8(KvDtype dtype, const uint16_t* scales, int c) {
    return dtype == KvDtype::Fp8 ? bf16_bits_to_float(scales[0]) : f16_bits_to_float(scales[c / 8]);
}

// Eight codes (bytes of w) times scale, exactly as kv_decode_row (the product is exact in f32).
__device__ __forceinline__ void kv_decode8(KvDtype dtype, uint2 w, float s, float (&out)[8]) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const uint8_t b = uint8_t((e < 4 ? w.x : w.y) >> (8 * (e & 3)));
        out[e] = (dtype == KvDtype::Fp8 ? e4m3_to_float(b) : float(int8_t(b))) * s;
    }
}

} // namespace ninfer::kernels::detail
