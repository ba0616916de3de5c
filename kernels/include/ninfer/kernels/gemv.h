// ninfer::kernels - decode linear layer: y[t] = W · x[t] for 1..8 tokens, weight read once per call.
//
// Contract:
// - W is [n, k] in one of three artifact encodings, bytes exactly as docs/ARTIFACT_FORMAT.md §3:
//   Bf16 (contiguous_le_v1, row-major), Fp8E4m3RowBf16 (row_scale_v1: n*k E4M3FN codes, then at
//   align_up(n*k, 256) n bf16 row multipliers), Q4G64Fp16 (row_split_k128_v1: base plane of
//   g*32 bytes per row, g = align_up(k,128)/64, even lane in the low nibble, signed codes; then at
//   align_up(n*g*32, 256) one fp16 multiplier per (row, group)), and the other row_split_k128_v1
//   formats Q5G64Fp16/Q6G64Fp16 (same base plane, then a high-bit plane of g*8 / g*16 bytes per
//   row at align_up(n*g*32, 256), then the scales 256-aligned after it) and Q8G32Fp16 (g =
//   align_up(k,128)/32 groups of 32 int8 codes, then the scales), and Nvfp4 in the runner's form of
//   block_scale_k16_m128x4_v1 (§3.3: n*k/2 E2M1 codes, even k in the low nibble, then at
//   align_up(n*k/2, 256) the swizzled E4M3 scale per (row, 16 columns), then at scale_off + n*k/16
//   one f32 divisor d_w PER ROW instead of the artifact's one per matrix, because the runner
//   concatenates rows of matrices with different divisors; n % 128 == 0, k % 64 == 0; value =
//   e2m1 * e4m3 / d_w[row], decoded in the kernel: e2m1 * e4m3 is exact in bf16). weight_bytes()
//   gives the size.
// - x: n_tokens rows of k bf16, row stride x_stride elements; 1 <= n_tokens <= 8.
// - x_lo (optional, Tiled layout only, same stride): the low halves of an f32 input x32, x_lo =
//   bf16(x32 - x) with x = bf16(x32); the product then uses x + x_lo (16 significant bits instead
//   of 8) at no extra tensor-core work for n_tokens <= 4 (the halves fill the mma's unused token
//   columns) and one extra mma per 16 k for 5..8 tokens. Token t's result is the same bits for
//   every n_tokens.
// - Products are exact (codes and bf16 x multiply exactly on the tensor cores), sums are fp32; the
//   group multipliers and the fp8 row multiplier are applied to fp32 partial sums (Nvfp4: the E4M3
//   block scale is folded into the bf16 code, exactly, and the sum is divided by d_w).
// - Output row t: y[t*y_stride + i] for i < n. Bf16 output is bf16(acc); with residual it is
//   bf16(float(bf16(acc)) + float(residual[t*residual_stride + i])), the two roundings of
//   "out = residual + bf16 matmul" in the reference model. Fp32 output (logits) is acc (+ residual).
// - Requirements (else cudaErrorInvalidValue, nothing launched): k % 16 == 0, n >= 1 (Nvfp4:
//   n % 128 == 0, k % 64 == 0); x, y,
//   residual and W 16-byte aligned, strides multiples of 8 elements; x and y do not overlap.
//   residual may equal y (in-place residual add).
// - y_tail (optional, no residual then): rows r >= tail_row0 (0 <= tail_row0 < n) are written as
//   fp32 to y_tail[t*y_tail_stride + r - tail_row0] instead of y, whose rows then end at
//   tail_row0 (one launch for concatenated projections whose last rows want f32, e.g. GDN
//   [q;k;v;z] bf16 + [a;b] f32).
// - Launch: programmatic dependent launch (common.cuh launch_pdl): the kernel loads its first
//   weights before waiting for the previous kernel on the stream, and lets the next one start.
// - Split-K: when scratch is given (partials of n_floats fp32, counters of n_counters uint32 that
//   the caller zeroed once), long-K/small-n layers are split over more blocks; the split count
//   depends on (n, k, the scratch size and the device) only, never on n_tokens, so a batch of 8
//   equals 8 single-token calls bit for bit. Counters are left at zero after each call.
//   Calls that share one scratch must be ordered on one stream (graph capture is fine).
//   The register kernels (every artifact-layout and nvfp4 launch, tiled ones with k <=
//   kGemvRegisterMaxK) launch a row tile's splits as one thread-block cluster when that cluster
//   can be resident (up to 16 splits), and sum the partials through distributed shared memory
//   instead of the scratch (no global fence, atomic or L2 round trip); the sum order, and so
//   every bit, is the counter path's. On the ring only the batch-2..8 int8 route (x8 given) does
//   the same; the other ring launches, batch 1 included, keep the counter path.
// - Layouts: WeightLayout::Artifact is the stored layout above (every format). WeightLayout::Tiled
//   (the formats gemv_has_tiled_layout names: all but Nvfp4, whose tiled_weight_bytes is 0 and which
//   gemv and gemv_pack_tiled refuse tiled) is the decode
//   layout the CUDA runner repacks to at upload (gemv_pack_tiled; tiled_weight_bytes() bytes):
//   rows in tiles of 16 (padded with zero rows), k in units (bf16 32, fp8 64 elements, q4/q5/q6
//   one 64-code group, q8 two 32-code groups) padded with zero codes to tiled_units() per row, a
//   multiple of 8. Code plane: one block per (tile, unit), tile-major; bf16/fp8 blocks are the
//   tile's 16 rows x 64 bytes in row order; q4 blocks are 512 bytes where 16-byte vector l
//   (= 4r + c) holds base bytes c*8..c*8+7 of rows r and r+8; q5/q6 blocks are 640 / 768 bytes:
//   lane l's 16-byte vector at 16 l and 4 / 8 more bytes at 512 + 4 l / 8 l hold its 32 codes (codes
//   c*16.. of rows r and r+8) as offset binary in 5-/6-bit fields that kernels/src/gemv_tiled_q56.h
//   places (one shift and one lop3 per code pair); q8 blocks are 1024 bytes where vector h*32 + l
//   holds, for m = 0..3, the 4 codes at k = 16m + 4c of row r + 8h, stored in the order k, k+2, k+1, k+3.
//   Then, 256-byte aligned: fp8 one bf16 multiplier per padded row; q4/q5/q6, per (tile, unit
//   quad, r < 8), 16 bytes = 4 x half2 {multiplier(row r), multiplier(row r+8)}; q8 the same per
//   (tile, unit pair, r < 8) for the pair's four groups.
//   Results are the same function (same products, fp32 sums; the split and so the summation
//   order may differ from the artifact layout's).
// Thread safety: stateless; any host thread, any stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::kernels {

// Grouped integer formats are Q4G64Fp16..Q8G32Fp16; gemv_has_tiled_layout says which have a tiled layout.
enum class WeightFormat : uint8_t { Bf16, Fp8E4m3RowBf16, Q4G64Fp16, Q5G64Fp16, Q6G64Fp16, Q8G32Fp16, Nvfp4 };
enum class WeightLayout : uint8_t { Artifact, Tiled };

struct WeightView {
    WeightFormat format = WeightFormat::Bf16;
    const void* data = nullptr;
    int64_t n = 0; // output rows
    int64_t k = 0; // input features (logical)
    WeightLayout layout = WeightLayout::Artifact;
};

struct GemvScratch {
    float* partials = nullptr;
    size_t n_floats = 0;
    uint32_t* counters = nullptr;
    size_t n_counters = 0;
};

// x already quantised for the q4 int8 route (GemvArgs::x_int8), written once by the producer of x
// (add_rmsnorm, swiglu, quantise_int8_x) so that no GEMV block quantises it: per token row
// (row_bytes apart, a multiple of 16, >= 64 * units) and 64-element unit u the 64 bytes of the
// route's B words, and per unit the 8 token slots' d / 16 (float d[u * 8 + t], units * 8 floats).
// Same values, so the same bits, as the GEMV's own quantisation of x (+ x_lo).
// units = int8_x_units(k): ceil(k / 64) rounded up to a multiple of 8, the tiled q4 layout's units
// per row, because the GEMV reads whole 8-unit steps; the units past ceil(k / 64) hold the
// quantisation of zeros (q 0, d 0), as the GEMV's own staging of the padding (d must be finite
// there: the padding's zero codes and multipliers would turn an inf or NaN d into a NaN sum).
struct Int8X {
    uint8_t* q = nullptr;
    float* d = nullptr;
    int64_t row_bytes = 0;
};
constexpr int64_t int8_x_units(int64_t k) { return (k + 511) / 512 * 8; }

struct GemvArgs {
    WeightView w;
    const __nv_bfloat16* x = nullptr;
    const __nv_bfloat16* x_lo = nullptr; // optional low halves (Tiled layout)
    int n_tokens = 1;
    int64_t x_stride = 0;
    const __nv_bfloat16* residual = nullptr; // optional
    int64_t residual_stride = 0;
    void* y = nullptr;
    bool y_fp32 = false;
    int64_t y_stride = 0;
    float* y_tail = nullptr; // optional f32 destination of rows >= tail_row0
    int64_t tail_row0 = 0;
    int64_t y_tail_stride = 0;
    GemvScratch scratch;
    // q4 activations in int8 (W4A8): for Q4G64Fp16 in the Tiled layout where the shared-memory
    // ring runs (k > kGemvRegisterMaxK or n >= kGemvRingMinRows, or any k under
    // gemv_set_tiled_pipeline with stages > 0)
    // and the int8 copy of 8 tokens' x fits the stage (gemv_runs_int8_x says whether it does; the
    // choice never depends on n_tokens, so a token's bits do not depend on its batch), each token's
    // x (plus x_lo in fp32 when given) is quantised per 64-element group (the weight's group) and
    // the group products are exact int32 sums on int8 tensor cores: amax = max |x| of the group, inv =
    // min(127 / amax, FLT_MAX), q = rint(x * inv) (fp32, ties to even; all zero when amax = 0),
    // d = amax / 127, y = sum over groups of float(sum q * code) * (multiplier * d) in fp32; a group
    // holding a NaN or an infinity has q = 0 and d = NaN or inf, so its token's outputs are NaN as on
    // the bf16 route (amax propagates NaN). Elsewhere the flag is
    // ignored (bf16 x). Why: the bf16 route spends ~44 instructions per 1024 q4 weights turning
    // nibbles into bf16 pairs and the GEMV is instruction-bound; the int8 route takes the signed
    // nibbles as they are stored (one mask, or a shift and a mask, per 4 codes) at the cost of the
    // activations' rounding (~0.5% relative per product; tests/gpu/gemv_q4a8.cpp bounds it).
    bool x_int8 = false;
    // Optional, with x_int8: x (+ x_lo) already quantised (Int8X); the int8 route then reads it from
    // global memory (L1) instead of quantising into shared memory. Ignored by the bf16 routes,
    // which read x and x_lo as always (the producer writes both).
    Int8X x8;
};

constexpr int kGemvMaxTokens = 8;

size_t weight_bytes(WeightFormat format, int64_t n, int64_t k);
// Scratch that lets every layer up to [n_max, any k] use its preferred split.
size_t gemv_scratch_floats(int64_t n_max);
size_t gemv_scratch_counters(int64_t n_max);
// The split count gemv() will use for this weight and scratch on the bf16-x routes (exposed for
// tests and the bench), and for these arguments (the int8 route has its own, gemv_runs_int8_x).
int gemv_split_count(const WeightView& w, const GemvScratch& scratch);
int gemv_split_count(const GemvArgs& args);
// The int8 route's split choice aims at KernelTuning::gemv_int8_target_blocks blocks per SM
// (tuning.h), the int8 ring kernel's residency: one block more sizes the largest matrices for a wave
// more than fits, so their last blocks start only after the others' wait.

cudaError_t gemv(const GemvArgs& args, cudaStream_t stream);
// Whether gemv(args) takes the int8-activation route (GemvArgs::x_int8); same decision as gemv().
bool gemv_runs_int8_x(const GemvArgs& args);
// out (Int8X for k, n_tokens <= kGemvMaxTokens rows) = the int8 route's quantisation of x (+ x_lo).
cudaError_t quantise_int8_x(const __nv_bfloat16* x, const __nv_bfloat16* x_lo, int64_t x_stride, int n_tokens,
                            int64_t k, const Int8X& out, cudaStream_t stream);

// Tiled layout: which formats have one, units per row and bytes of an [n, k] weight; gemv_pack_tiled
// writes src (Artifact layout, k % 16 == 0) into dst (16-byte aligned, tiled_weight_bytes() long)
// on stream.
constexpr bool gemv_has_tiled_layout(WeightFormat f) { return f != WeightFormat::Nvfp4; }
int64_t tiled_units(WeightFormat format, int64_t n, int64_t k);
size_t tiled_weight_bytes(WeightFormat format, int64_t n, int64_t k);
cudaError_t gemv_pack_tiled(const WeightView& src, void* dst, cudaStream_t stream);
// Bench hook: blocks per multiprocessor the tiled split choice aims at (0: one resident wave as
// the occupancy calculator reports it; KernelTuning::gemv_target_blocks sets it at load).
void gemv_set_tiled_target_blocks_per_sm(int blocks);
// Test hook (not thread-safe: call between launches): split-K partials summed within a cluster of
// the tile's splits through distributed shared memory (true: the default) or through L2 by the last
// block (false). Same bits.
void gemv_set_cluster_reduce(bool on);
// Bench and test hook (not thread-safe: call between launches): how the tiled kernel brings
// weights in. stages 0: a register double buffer per warp; 2..4: a ring of that many 4 KB steps
// per warp in shared memory, filled by bulk copies. stage_x (pipelined, one pass, fp8/q4): x is
// also copied to shared memory once per block, pre-permuted, when it fits in 48 KB.
// carveout_percent: the pipelined kernel's preferred shared-memory carveout (-1: the driver's).
// Every setting computes the same bits for the same split count (the split may follow the
// setting's occupancy).
// By default (KernelTuning::gemv_stages -1) the path is chosen per matrix, never per batch (so a
// token's bits do not depend on its batch): the ring of kGemvTiledStages for k > kGemvRegisterMaxK
// or n >= kGemvRingMinRows, the register kernel for other matrices, because the 35B-A3B's
// hidden-2048 shapes are latency bound and lose on the ring (most at batch 8). The split count
// follows the one-pass kernel of the matrix's path. An explicit setting (this hook or
// KernelTuning::gemv_stages >= 0) applies to every launch. (More ring stages win bandwidth in the
// isolated mix but made the whole 27B step slower.)
constexpr int kGemvTiledStages = 2;
constexpr bool kGemvStageX = true;
constexpr int64_t kGemvRegisterMaxK = 4096;
// A matrix this tall takes the ring whatever its k: the 35B-A3B's LM head (248,320 x 2048) spans ~10
// waves of register-kernel blocks, and on the ring (q4: the int8 route) its step is faster.
constexpr int64_t kGemvRingMinRows = 65536;
void gemv_set_tiled_pipeline(int stages, int carveout_percent, bool stage_x);
// Back to the installed tuning (kernel_tuning_apply; the per-matrix choice by default).
void gemv_restore_tiled_pipeline();

} // namespace ninfer::kernels
