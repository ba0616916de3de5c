// ninfer::kernels - Gated DeltaNet prefill: one layer, T consecutive tokens of ONE lane in one
// call (docs/MODEL.md §6), the same function as T calls of gdn_conv_decode + gdn_recurrent_decode.
//
// gdn_prefill(args, stream) enqueues, on one stream:
// 1. conv + SiLU for every token t < T: c = bf16(silu(sum_j w[ch][j] * in[j])) with in = the 4
//    inputs ending at token t, taken from the lane's conv history (positions -3..-1) and the qkv
//    rows; the pre-activation is bf16-rounded unless exact (as gdn_conv_decode). q and k heads are
//    l2-normalised (x * rsqrt(sum x^2 + 1e-6), q also * 128^-0.5) in fp32; decay
//    exp(-exp(A_log) * softplus(a + dt_bias)) and beta = sigmoid(b) (bf16-rounded unless exact).
// 2. the conv history of the slot becomes the last 3 inputs (history and rows mixed when T < 3).
// 3. the delta rule over the slot's state S[h][k][v] (fp32, updated in place), by `algorithm`:
//    scan: token by token, S = decay S; delta = beta (v - S^T k); S += k (x) delta; o = S^T q. The
//    128 value columns of a head are independent, so each block owns a slice of columns with the
//    state in registers (one launch for all T tokens); only the f32 summation order differs from
//    the decode kernel.
//    chunked: the WY / state-passing form over chunks of 64 tokens (docs/MODEL.md §6), the chunks'
//    triangular solves all at once, then one serial pass per head and 64-column state slice; the
//    products run on mma.sync: q.k and k.k from the exact bf16 conv outputs (f32 sums), the
//    f32 operands split into bf16 hi + lo (about 16 significant bits per product, so results
//    match the scan to ~1e-5 relative, not bitwise); the triangular solve and the state stay f32.
// 4. gated RMSNorm per head: y = bf16(norm_w * (o' * rsqrt(mean(o'^2) + eps)) * silu(z)) with the
//    bf16 roundings of gdn_recurrent_decode (none but the last when exact).
// Layouts (strides in elements): qkv [t][conv_dim] = [q (Hk*128) | k (Hk*128) | v (Hv*128)] bf16;
// z [t][Hv*128] bf16; a, b [t][Hv] bf16, or f32 rows a_f32 / b_f32 (then a, b may be null; same
// strides); conv_w [conv_dim][4] bf16; conv_state slot s at conv_state + s * 3 * conv_dim bf16
// (oldest first); state slot s at state + s * Hv * 128 * 128 fp32, S[h][k][v]; A_log, dt_bias
// f32 [Hv]; norm_w bf16 [128]; y [t][Hv*128] bf16.
// Scratch: scratch_bytes >= gdn_prefill_scratch_bytes(T, Hk, Hv) device bytes, 256-byte aligned
// (enough for either algorithm); its contents are overwritten. Per token: 1 KiB + 8 bytes per key
// head (fp32 q, k, scales) + 776 bytes per value head (bf16 v, fp32 output, decay, beta) + per
// value head ~1.3 KiB of per-chunk W, U, P (chunked): 27B (Hk 16, Hv 48) ~114 KiB, 0.95 GB at T = 8192.
// Requirements: head dims 128, conv_dim == (2 Hk + Hv) * 128, Hv % Hk == 0, 1 <= T <= 65535,
// qkv/z/y rows, conv_w, conv_state and norm_w 16-byte aligned; else cudaErrorInvalidValue and
// nothing is launched. y must not alias the inputs. Stateless apart from the caller's buffers;
// graph-capturable.
#pragma once

#include "ninfer/kernels/gdn_decode.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::kernels {

struct GdnPrefillArgs {
    const __nv_bfloat16* qkv = nullptr; // [t][conv_dim] in_proj_qkv output
    int64_t qkv_stride = 0;
    const __nv_bfloat16* z = nullptr;
    int64_t z_stride = 0;
    const __nv_bfloat16* a = nullptr;
    const __nv_bfloat16* b = nullptr;
    const float* a_f32 = nullptr;
    const float* b_f32 = nullptr;
    int64_t a_stride = 0;
    int64_t b_stride = 0;
    const __nv_bfloat16* conv_w = nullptr;
    __nv_bfloat16* conv_state = nullptr;
    float* state = nullptr;
    int slot = 0; // the lane's conv and recurrent state slot
    const float* a_log = nullptr;
    const float* dt_bias = nullptr;
    const __nv_bfloat16* norm_w = nullptr;
    __nv_bfloat16* y = nullptr;
    int64_t y_stride = 0;
    int n_k_heads = 0;
    int n_v_heads = 0;
    int conv_dim = 0;
    float eps = 1e-6f;
    int n_tokens = 0;
    bool exact = false; // CPU-reference math, as GdnConvArgs::exact and GdnRecurrentArgs::exact
    // Scan thread layout, a tuning knob for the benchmark (results differ only in f32 summation
    // order): threads per value column x columns per thread = 1: 4x1, 2: 8x1, 3: 8x2, 4: 16x2,
    // 5: 4x2, 6: 8x4; 0 = the default (kGdnScanDefaultVariant).
    int scan_variant = 0;
    // Which delta-rule form: 0 = the default (kGdnPrefillDefaultAlgorithm), kGdnPrefillScan or
    // kGdnPrefillChunked. The scan is the reference and the fallback; every T >= 1 works in both.
    int algorithm = 0;
    // Chunked-form launch shape, a tuning knob for the benchmark (results differ only in f32
    // summation order): 1: WY kernel at 2 blocks/SM, state pass 8 warps; 2: 1 block/SM, 8 warps;
    // 3: 2 blocks/SM, 16 warps; 4: 1 block/SM, 16 warps; 0 = kGdnChunkDefaultVariant.
    int chunk_variant = 0;
    // Absolute position of the first token (the lane's length before this call). The chunked
    // form cuts chunks at multiples of 64 of it, so splitting a prompt into calls changes only
    // the chunks the call boundaries fall in (f32 rounding; the scan ignores it). >= 0.
    int64_t start_pos = 0;
    void* scratch = nullptr;
    size_t scratch_bytes = 0;
};

constexpr int kGdnScanDefaultVariant = 3;
constexpr int kGdnPrefillScan = 1, kGdnPrefillChunked = 2;
// The chunked (WY) form is the default: it halves the layer time (PERF_NOTES "GDN chunked
// prefill"). It is not bitwise invariant to how a prompt is split into calls (a call boundary
// inside a 64-token chunk changes the f32 summation order, ~1e-6 relative); the scan was.
constexpr int kGdnPrefillDefaultAlgorithm = kGdnPrefillChunked;
constexpr int kGdnChunkDefaultVariant = 1;

size_t gdn_prefill_scratch_bytes(int n_tokens, int n_k_heads, int n_v_heads);
cudaError_t gdn_prefill(const GdnPrefillArgs& args, cudaStream_t stream);

} // namespace ninfer::kernels
