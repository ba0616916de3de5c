// ninfer::kernels - weight expansion to bf16 for prefill: the GEMM (gemm.h) reads bf16 only.
//
// Contract:
// - dequant_bf16(w, row0, n_rows, dst, ld_dst, stream) writes rows [row0, row0 + n_rows) of W as
//   bf16: dst[r * ld_dst + j] = bf16_rne(decode(W)[row0 + r][j]) for j < w.k, where decode is the
//   CPU codec's value (core/formats/codec.h decode_rows, in fp32: e4m3(code) * row multiplier,
//   q * group multiplier), so the result equals the CPU decode rounded to bf16 bit for bit
//   (the fp8 NaN codes, which no encoder writes, decode to a NaN of unspecified payload).
//   Elements j >= w.k of a dst row are not written.
// - Accepted: every format and layout kernels::gemv accepts (gemv.h describes the bytes):
//   Bf16, Fp8E4m3RowBf16, Q4G64Fp16, Q5G64Fp16, Q6G64Fp16, Q8G32Fp16 in WeightLayout::Artifact
//   and WeightLayout::Tiled; Nvfp4 (gemv.h's form, one divisor per row; value
//   (e2m1 * e4m3 scale) / d_w as the codec computes it; n % 128 == 0, k % 64 == 0) in
//   WeightLayout::Artifact.
// - Requirements (else cudaErrorInvalidValue, nothing launched): w.data and dst 16-byte aligned,
//   w.k % 16 == 0, 0 <= row0, n_rows >= 0, row0 + n_rows <= w.n, ld_dst % 8 == 0, ld_dst >= w.k;
//   dst does not overlap W. n_rows == 0 launches nothing and succeeds.
// - Memory-bound: each thread writes 16-byte vectors of 8 outputs from 2..16 bytes of codes.
// Thread safety: stateless; any host thread, any stream (graph capture is fine).
#pragma once

#include "ninfer/kernels/gemv.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

cudaError_t dequant_bf16(const WeightView& w, int64_t row0, int64_t n_rows, __nv_bfloat16* dst, int64_t ld_dst,
                         cudaStream_t stream);

} // namespace ninfer::kernels
