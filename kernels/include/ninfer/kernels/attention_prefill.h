// ninfer::kernels - gated full attention for prefill: T consecutive tokens of ONE lane at positions
// start_pos .. start_pos + T - 1, over the paged KV pool of attention_decode.h (docs/MODEL.md §5).
//
// 1. attn_prefill_prep: for every token, q = rope(offset_rmsnorm(query, q_norm)) -> the q scratch
//    (bf16 [t][n_heads*256], inside args.scratch), k = rope(offset_rmsnorm(k, k_norm)) and raw v
//    written into the lane's pages at their positions: exactly attn_decode_prep's math (it is that
//    kernel, run over the chunk), AttnGeometry::exact included, and its RoPE positions: rope_thw
//    ([T][3] M-RoPE positions of the chunk's tokens, a multimodal prompt) or the KV position +
//    rope_offset[lane] (attention_decode.h).
// 2. attn_prefill: causal flash attention. Token i sees positions 0 .. start_pos + i, i.e. the KV
//    of earlier chunks already in the pool and of this chunk up to itself; query head h reads KV
//    head h / (n_heads / n_kv_heads). S = q K^T / 16 on tensor cores (bf16 in, fp32 out), online
//    softmax in fp32, P rounded to bf16 for P V (fp32 accumulate); fp8/int8 pools (kv.dtype) are
//    decoded exactly (code * scale) and rounded to bf16 for the tensor cores. Then, as attn_decode:
//    out = bf16(float(bf16(o)) * float(bf16(sigmoid(gate)))) (no inner roundings when exact),
//    gate = the second half of the query head's qg row -> out [t][n_heads*256] bf16.
// Requirements: head_dim == 256, rotary_dim even and <= 256, n_heads % n_kv_heads == 0, group <=
// 8, 1 <= T <= 65535, start_pos >= 0, start_pos + T <= kv.max_pages * 64, pages of the lane for
// those positions present in kv.page_table; rows 16-byte aligned; scratch_bytes >=
// attn_prefill_scratch_bytes(T, n_heads), 256-byte aligned. Violations the host can see return
// cudaErrorInvalidValue and launch nothing. Pool rows past start_pos + T - 1 are never read as
// values (their tile rows are zero-filled), so unwritten pages may hold anything.
// Call prep then attn_prefill on one stream for the same args. Stateless apart from the pool and
// the scratch; graph-capturable.
#pragma once

#include "ninfer/kernels/attention_decode.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::kernels {

struct AttnPrefillArgs {
    AttnGeometry geo;
    const __nv_bfloat16* qg = nullptr; // q_proj output [t][n_heads][query 256 | gate 256]
    int64_t qg_stride = 0;
    const __nv_bfloat16* k = nullptr; // [t][n_kv_heads*256]
    int64_t k_stride = 0;
    const __nv_bfloat16* v = nullptr;
    int64_t v_stride = 0;
    const __nv_bfloat16* q_norm = nullptr;
    const __nv_bfloat16* k_norm = nullptr;
    KvPages kv;
    int lane = 0;
    int start_pos = 0;
    int n_tokens = 0;
    void* scratch = nullptr; // the normed, rotated q and the prep's token indices
    size_t scratch_bytes = 0;
    __nv_bfloat16* out = nullptr;
    int64_t out_stride = 0;
    // attn_prefill's block shape, a tuning knob for the benchmark (same results): 1 = 8 warps x
    // 128 query rows with 2 K/V buffers, 2 = 4 warps x 64 rows, 1 buffer, 2 blocks per SM, 3 = 4
    // warps x 64 rows, 2 buffers; 0 = the default (kAttnPrefillDefaultVariant).
    int kernel_variant = 0;
    const int32_t* rope_thw = nullptr;    // device [n_tokens][3], or null
    const int32_t* rope_offset = nullptr; // device [n_lanes], or null
};

constexpr int kAttnPrefillDefaultVariant = 2;

size_t attn_prefill_scratch_bytes(int n_tokens, int n_heads);
cudaError_t attn_prefill_prep(const AttnPrefillArgs& args, cudaStream_t stream);
cudaError_t attn_prefill(const AttnPrefillArgs& args, cudaStream_t stream);

} // namespace ninfer::kernels
