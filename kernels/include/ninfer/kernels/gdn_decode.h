// ninfer::kernels - Gated DeltaNet decode step (one new token per lane), docs/MODEL.md §6.
//
// Two launches per layer, in this order on one stream:
// 1. gdn_conv_decode: causal depthwise conv (kernel 4, no bias) over the in_proj_qkv output, then
//    SiLU. c = bf16(silu(bf16(sum_j w[ch][j] * in[j]))), in = the 3 previous inputs of the channel
//    (conv state, oldest first) and the new one. The state shifts in place: afterwards it holds
//    the last 3 inputs. Conv state of a lane: [3][conv_dim] bf16, slot s at
//    conv_state + s * 3 * conv_dim. conv_w: [conv_dim][4] bf16 (checkpoint [conv_dim,1,4]).
// 2. gdn_recurrent_decode: per V head h (QK head r = h / (n_v_heads / n_k_heads)):
//    q = l2norm(q_r) / sqrt(128), k = l2norm(k_r), l2norm(u) = u * rsqrt(sum u^2 + 1e-6);
//    beta = float(bf16(sigmoid(b_h))); g = -exp(A_log[h]) * softplus(float(a_h) + dt_bias[h]);
//    S = exp(g) S; delta = beta (v - S^T k); S += k (x) delta; o = S^T q   (fp32, S[k][v])
//    y_h = bf16( float(bf16(norm_w * bf16(o' * rsqrt(mean(o'^2) + eps)))) * silu(float(z_h)) ),
//    o' = float(bf16(o)). Recurrent state of a slot: [n_v_heads][128][128] fp32 at
//    state + s * n_v_heads * 128 * 128.
// - Token t of the batch uses state slot slots[t] (device int32 array); slots are distinct.
// - Inputs are rows per token with strides in elements: conv_out [t][q | k | v] (conv_dim =
//   2 * 128 * n_k_heads + 128 * n_v_heads), z [t][n_v_heads*128], a and b [t][n_v_heads].
//   A_log, dt_bias: fp32 [n_v_heads]; norm_w bf16 [128]. Output y [t][n_v_heads*128] bf16.
// - exact / a_f32 / b_f32 (fields below) switch to the CPU reference's f32 math.
// - Requirements: head dims are 128, n_v_heads % n_k_heads == 0, 1 <= n_tokens; 16-byte aligned
//   rows for qkv/conv_out/z/y; else cudaErrorInvalidValue and nothing is launched.
// - Two launches, not one: a fused conv + recurrence (clusters spanning a QK head's V heads) gave the
//   same bits and was slower at every batch size (kernels/PERF_NOTES.md "Session 4 run 5").
// - The recurrence runs as sm_90 thread-block clusters; the norm's sum of squares crosses blocks in
//   rank order (deterministic). Two paths, the same arithmetic in the same order (the same bits:
//   [gdn_decode] checks it):
//   - GdnDecodePath::Split2 (the tests' bit-for-bit reference for Wide4; the runner never takes it):
//     two blocks of 256 threads per (V head, token), 64 state columns each; slot and state read
//     after the PDL wait; two cluster barriers at the end.
//   - GdnDecodePath::Wide4 (what gdn_conv_decode / gdn_recurrent_decode run; faster at every
//     measured batch and model, kernels/PERF_NOTES.md "Session 6"): with state_settled the conv reads its taps, the
//     slot and the conv state before the PDL wait (same grid). The recurrence runs four blocks of
//     128 threads per (V head, token), 32 columns each (a warp per 32 rows); with state_settled
//     the slot and the block's 16 KB of state are read BEFORE the PDL wait; the norm's partial sums
//     are pushed into every peer's shared memory and cross one cluster barrier.
// - Several consecutive tokens of a lane (speculative verify windows) run as one launch of each
//   kernel through gdn_window.h, with these kernels' bits.
// - Kernels start by programmatic dependent launch (kernels/src/common.cuh launch_pdl) and wait
//   for the previous kernel on the stream before touching memory (Wide4 with state_settled: before
//   touching anything but the weights, slots and states named above).
// Thread safety: stateless apart from the caller's state buffers; graph-capturable.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

constexpr int kGdnHeadDim = 128;

struct GdnConvArgs {
    const __nv_bfloat16* qkv = nullptr; // [t][conv_dim] in_proj_qkv output
    int64_t qkv_stride = 0;
    const __nv_bfloat16* conv_w = nullptr;
    __nv_bfloat16* conv_state = nullptr;
    const int32_t* slots = nullptr;
    __nv_bfloat16* out = nullptr; // [t][conv_dim]
    int64_t out_stride = 0;
    int conv_dim = 0;
    int n_tokens = 0;
    bool exact = false; // CPU-reference math: no bf16 rounding of the pre-activation
    // As GdnRecurrentArgs::state_settled, for slots and the conv state: Wide4 then reads the taps,
    // the slot and the 3 stored inputs before the PDL wait; Split2 ignores it.
    bool state_settled = false;
};

struct GdnRecurrentArgs {
    const __nv_bfloat16* conv_out = nullptr;
    int64_t conv_stride = 0;
    const __nv_bfloat16* z = nullptr;
    int64_t z_stride = 0;
    const __nv_bfloat16* a = nullptr;
    int64_t a_stride = 0;
    const __nv_bfloat16* b = nullptr;
    int64_t b_stride = 0;
    const float* a_log = nullptr;
    const float* dt_bias = nullptr;
    const __nv_bfloat16* norm_w = nullptr;
    float* state = nullptr;
    const int32_t* slots = nullptr;
    __nv_bfloat16* y = nullptr;
    int64_t y_stride = 0;
    int n_k_heads = 0;
    int n_v_heads = 0;
    int n_tokens = 0;
    float eps = 1e-6f;
    // CPU-reference mode (the CUDA runner): a and b read as f32 rows when given (then a, b may be
    // null; same strides), and with exact no bf16 rounding of beta, o and the gated norm.
    const float* a_f32 = nullptr;
    const float* b_f32 = nullptr;
    bool exact = false;
    // The caller's promise that no kernel still running on the stream writes slots or the state of
    // these slots (the runner: a layer's first step of a forward; a one-lane forward's next step
    // reads what this one writes). Wide4 then reads them before the PDL wait; Split2 ignores it.
    bool state_settled = false;
};

enum class GdnDecodePath : uint8_t { Split2 = 0, Wide4 = 2 };

cudaError_t gdn_conv_decode(const GdnConvArgs& args, cudaStream_t stream); // GdnDecodePath::Wide4
cudaError_t gdn_conv_decode_with(const GdnConvArgs& args, GdnDecodePath path, cudaStream_t stream);
cudaError_t gdn_recurrent_decode(const GdnRecurrentArgs& args, cudaStream_t stream); // GdnDecodePath::Wide4
cudaError_t gdn_recurrent_decode_with(const GdnRecurrentArgs& args, GdnDecodePath path, cudaStream_t stream);

} // namespace ninfer::kernels
