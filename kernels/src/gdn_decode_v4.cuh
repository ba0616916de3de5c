// ninfer::kernels - the Wide4 GDN conv and recurrence (gdn_decode_v4.cu), launched by gdn_decode.cu's
// gdn_conv_decode_with / gdn_recurrent_decode_with (the recurrence: grid (n_v_heads * kGdnV4Split,
// n_tokens), kGdnV4Threads threads, thread-block clusters of kGdnV4Split blocks = one V head), and the
// conv arithmetic both paths share. Same arguments and bits as Split2; the contract is
// kernels/include/ninfer/kernels/gdn_decode.h's.
#pragma once

#include "common.cuh"
#include "ninfer/kernels/gdn_decode.h"

namespace ninfer::kernels::detail {

// Pieces of the conv that both paths' kernels use.
// A conv channel's 4 taps (weights: constant, so they may be read before the PDL wait).
__device__ __forceinline__ float4 conv_taps(const GdnConvArgs& c, int ch) {
    const __nv_bfloat16* w = c.conv_w + int64_t(ch) * 4;
    return make_float4(__bfloat162float(w[0]), __bfloat162float(w[1]), __bfloat162float(w[2]), __bfloat162float(w[3]));
}
// The pre-activation sum_j w_j x_j over the inputs oldest first, in the order of docs/MODEL.md §6's
// reference.
__device__ __forceinline__ float conv_sum(float4 w, const __nv_bfloat16 (&x)[4]) {
    float acc = fmaf(w.x, __bfloat162float(x[0]), 0.f);
    acc = fmaf(w.y, __bfloat162float(x[1]), acc);
    acc = fmaf(w.z, __bfloat162float(x[2]), acc);
    acc = fmaf(w.w, __bfloat162float(x[3]), acc);
    return acc;
}

constexpr int kGdnV4Split = 4;                            // blocks (cluster ranks) per V head
constexpr int kGdnV4Cols = kGdnHeadDim / kGdnV4Split;     // 32 state columns per block: one per lane
constexpr int kGdnV4Threads = 4 * kGdnV4Cols;             // warp kq owns rows [32 kq, 32 kq + 32)

using GdnRecurrentKernel = void (*)(GdnRecurrentArgs);
// The kernel to launch: with state_settled the slot and the state are read before the PDL wait.
GdnRecurrentKernel gdn_recurrent_v4_kernel(bool state_settled);
// The Wide4 conv: Split2's grid (conv_dim / 256 blocks of 256 threads, n_tokens) and arithmetic; with
// state_settled the taps, the slot and the 3 conv-state inputs are read before the PDL wait.
using GdnConvKernel = void (*)(GdnConvArgs);
GdnConvKernel gdn_conv_v4_kernel(bool state_settled);

} // namespace ninfer::kernels::detail
