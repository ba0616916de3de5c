// ninfer::kernels - the Wide4 GDN recurrence (gdn_decode_v4.cu), launched by gdn_decode.cu's
// gdn_recurrent_decode_with: grid (n_v_heads * kGdnV4Split, n_tokens), kGdnV4Threads threads, thread-block
// clusters of kGdnV4Split blocks (one V head), programmatic dependent launch. Same arguments and bits
// as the Split2 kernel; the contract is kernels/include/ninfer/kernels/gdn_decode.h's.
#pragma once

#include "ninfer/kernels/gdn_decode.h"

namespace ninfer::kernels::detail {

constexpr int kGdnV4Split = 4;                            // blocks (cluster ranks) per V head
constexpr int kGdnV4Cols = kGdnHeadDim / kGdnV4Split;     // 32 state columns per block: one per lane
constexpr int kGdnV4Threads = 4 * kGdnV4Cols;             // warp kq owns rows [32 kq, 32 kq + 32)

using GdnRecurrentKernel = void (*)(GdnRecurrentArgs);
// The kernel to launch: with state_settled the slot and the state are read before the PDL wait.
GdnRecurrentKernel gdn_recurrent_v4_kernel(bool state_settled);

} // namespace ninfer::kernels::detail
