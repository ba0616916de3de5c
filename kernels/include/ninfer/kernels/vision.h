// ninfer::kernels - the vision tower's element-wise, normalisation and attention kernels
// (docs/MODEL.md §9; the GEMMs are gemm.h's). Rows are row-major with a row stride in elements.
//
// Contract (every kernel: rows >= 1, cols >= 1; violations the host can see return
// cudaErrorInvalidValue and launch nothing; stateless, any stream):
// - vision_to_bf16(x, n, y): y[i] = bf16(x[i]) for n values (round to nearest even).
// - vision_bias_act(y, ld, bias, rows, cols, act, out, ld_out): v = y[r][c] + bias[c] (bias may be
//   null), then act: None, GeluTanh (gelu_pytorch_tanh) or GeluErf (exact GELU); written back to
//   y (f32) and, when out is given, as bf16 to out[r][c].
// - vision_residual(x, ld, y, ld_y, bias, rows, cols): x[r][c] += y[r][c] + bias[c] (f32).
// - vision_layer_norm(x, ld, w, b, rows, cols, eps, out, ld_out): torch LayerNorm per row (mean and
//   biased variance of the row in f32, two passes), out = bf16((x - mean) * rsqrt(var + eps) *
//   w + b). One block per row.
// - vision_position_add(x, ld, table, taps, weights, rows, cols): x[r][c] += sum_k weights[4r+k] *
//   table[taps[4r+k]][c] (f32 table [positions][cols]): the bilinear position table resample,
//   taps computed on the host.
// - vision_attention(qkv, ld, cos, sin, rows, segment, heads, head_dim, out, ld_out): qkv rows
//   [q | k | v] (f32, heads * head_dim each); rows form consecutive segments of `segment` rows
//   (rows % segment == 0), attention bidirectional within a segment. q and k get the 2-D rotary
//   (rotate-half over head_dim, cos/sin [rows][head_dim/2] f32, as core/cpu/ops.h rope_neox),
//   then per head o = softmax(q kᵀ / sqrt(head_dim)) v in f32, out[r][h*head_dim + d] = bf16(o).
//   Requirements: head_dim even, <= 128; segment <= kVisionMaxSegment. q and k are rotated as they
//   are read (qkv is only read). One block per 8 rows of a segment and a head, its scores in
//   shared memory: a straightforward kernel (f32 CUDA cores), not a flash kernel.
// - The tensor-core attention: vision_rotate_qkv(qkv, ld, cos, sin, rows, heads, head_dim, q, k,
//   v, ld_qkv) writes q and k with the 2-D rotary as vision_attention applies it, and v as is, as
//   bf16 rows [rows][heads * head_dim] (row stride ld_qkv); then vision_flash_attention(q, k, v,
//   ld, rows, segment, heads, head_dim, out, ld_out): per segment (rows % segment == 0; any
//   segment length) and head, out = bf16(softmax(q kᵀ / sqrt(head_dim)) v) with bf16 q, k, v and
//   P on the tensor cores (mma.sync m16n8k16, f32 accumulation, online softmax in f32: a flash
//   kernel, no score matrix in memory). Requirements: vision_flash_supported(head_dim) (a multiple
//   of 8, 8..128), ld a multiple of 8 and q, k, v 16-byte aligned (16-byte row loads), out 4-byte
//   aligned with ld_out even; at most 65535 segments. One block of 4 warps per 64 query rows of a
//   segment and head, 64-key tiles double-buffered in shared memory (5 tiles of 64 x (head_dim
//   rounded up to 16, + 8) bf16: 56 KiB at head_dim 72).
// Thread safety: stateless; graph-capturable.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

enum class VisionAct : uint8_t { None, GeluTanh, GeluErf };

// The longest attention segment (one frame pair's patches): 8 rows of its scores sit in shared
// memory (128 KiB at this bound).
constexpr int kVisionMaxSegment = 4096;

cudaError_t vision_to_bf16(const float* x, int64_t n, __nv_bfloat16* y, cudaStream_t stream);
cudaError_t vision_bias_act(float* y, int64_t ld, const float* bias, int rows, int cols, VisionAct act,
                            __nv_bfloat16* out, int64_t ld_out, cudaStream_t stream);
cudaError_t vision_residual(float* x, int64_t ld, const float* y, int64_t ld_y, const float* bias, int rows, int cols,
                            cudaStream_t stream);
cudaError_t vision_layer_norm(const float* x, int64_t ld, const float* w, const float* b, int rows, int cols, float eps,
                              __nv_bfloat16* out, int64_t ld_out, cudaStream_t stream);
cudaError_t vision_position_add(float* x, int64_t ld, const float* table, const int32_t* taps, const float* weights,
                                int rows, int cols, cudaStream_t stream);
cudaError_t vision_attention(const float* qkv, int64_t ld, const float* cos, const float* sin, int rows, int segment,
                             int heads, int head_dim, __nv_bfloat16* out, int64_t ld_out, cudaStream_t stream);
cudaError_t vision_rotate_qkv(const float* qkv, int64_t ld, const float* cos, const float* sin, int rows, int heads,
                              int head_dim, __nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v, int64_t ld_qkv,
                              cudaStream_t stream);
bool vision_flash_supported(int head_dim);
cudaError_t vision_flash_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t ld,
                                   int rows, int segment, int heads, int head_dim, __nv_bfloat16* out, int64_t ld_out,
                                   cudaStream_t stream);

} // namespace ninfer::kernels
