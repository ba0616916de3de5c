// ninfer::kernels - the Gated DeltaNet decode of speculative verify windows (issue 28): several
// consecutive tokens of each of several lanes in one launch of the conv and one of the recurrence
// per GDN layer, each token's state written once, the states after a window's earlier tokens
// straight into that lane's snapshots (core/cuda/verify_window.h).
//
// Contract:
// - A window w (GdnWindows::w[0..n)) is n_tokens (1..kGdnWindowMaxTokens) consecutive tokens of
//   one lane: state slot `slot` (the live conv history and recurrent state, gdn_decode.h's slot
//   layouts), token j's input and output rows at row index rows[j] of the args' row arrays. Slots
//   are distinct across windows, rows distinct across all tokens.
// - gdn_conv_window(args, windows): per window, tokens j = 0..n-1 in order, the conv of
//   gdn_conv_decode (args.qkv / args.out rows rows[j]; args.slots and args.n_tokens are ignored);
//   the conv history after token j < n - 1 goes to conv_snap + j * 3 * conv_dim (bf16), the
//   history after the last token to the live slot; the live history is read once, before any
//   token, and every history is written once.
// - gdn_recurrent_window(args, windows): per window, tokens in order, the recurrence of
//   gdn_recurrent_decode (args.conv_out / z / a / b / a_f32 / b_f32 / y at rows rows[j]; slots and
//   n_tokens ignored; exact, state_settled as there); the state after token j < n - 1 goes to
//   state_snap + j * n_v_heads * 128 * 128 floats, the state after the last token to the live
//   slot; the live state is read once and every state written once.
// - gdn_decode_f32_window(args, windows) (mixers_f32.h's f32 check mode, GdnF32Args' rows at
//   rows[j], slots and n_tokens ignored): gdn_decode_f32's conv and recurrence per token in order,
//   with f32 conv-history snapshots (conv_snap as float) and the same state snapshots.
// - Bits: token j of window w gives exactly what the one-token kernels give for it launched after
//   tokens 0..j-1 of the lane (Wide4 for the bf16 pair, gdn_decode_f32 for the f32 one): conv
//   output, y, each snapshot and the final live states equal, bit for bit, the conv history and
//   recurrent state those launches leave after token j ([gdn_window] checks it). So a verify
//   window's rows are batch-1 decode's (docs/ARCHITECTURE.md, speculative decoding).
// - Requirements: 1 <= n <= kGdnWindowMax windows; each 1 <= n_tokens <= kGdnWindowMaxTokens,
//   rows[j] >= 0, slot >= 0 and distinct, snapshots non-null when n_tokens > 1; plus the one-token
//   kernels' requirements. Else cudaErrorInvalidValue and nothing is launched.
// - Launch shapes: the conv as gdn_conv_decode's grid with one y index per window; the recurrence
//   as Wide4's clusters of 4 blocks per (V head, window), the window's tokens looped inside with
//   the state in registers (what does not carry from token to token, the q / k norms, beta, decay
//   and the gated norm's exchange across the cluster, runs once for the window, outside the loop).
//   PDL launches (common.cuh), graph-capturable, no synchronisation.
// Thread safety: stateless apart from the caller's buffers; any host thread, any stream.
#pragma once

#include "ninfer/kernels/gdn_decode.h"
#include "ninfer/kernels/mixers_f32.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

constexpr int kGdnWindowMaxTokens = 8;
constexpr int kGdnWindowMax = 8;

struct GdnWindow {
    int slot = 0;
    int n_tokens = 0;
    int rows[kGdnWindowMaxTokens] = {};
    void* conv_snap = nullptr;   // [n_tokens - 1][3][conv_dim], bf16 (f32 for gdn_decode_f32_window)
    float* state_snap = nullptr; // [n_tokens - 1][n_v_heads][128][128]
};

struct GdnWindows {
    GdnWindow w[kGdnWindowMax];
    int n = 0;
};

cudaError_t gdn_conv_window(const GdnConvArgs& args, const GdnWindows& windows, cudaStream_t stream);
cudaError_t gdn_recurrent_window(const GdnRecurrentArgs& args, const GdnWindows& windows, cudaStream_t stream);
cudaError_t gdn_decode_f32_window(const GdnF32Args& args, const GdnWindows& windows, cudaStream_t stream);

} // namespace ninfer::kernels
