// ninfer::kernels - the sequence mixers (gated attention, Gated DeltaNet) of one decode step in the
// CPU reference's f32 arithmetic, for the CUDA runner's f32-activation check mode
// (core/cuda/cuda_runner.h). The serving kernels (attention_decode.h, gdn_decode.h) read and write
// bf16 rows and keep a bf16 conv history; these keep in f32 every value core/cpu/forward.cpp keeps in
// f32, so that a check run differs from the CPU only by the order of f32 sums. Plain loops: slow.
//
// Contract (strides in elements, rows per token t < n_tokens, 1 <= n_tokens <= 65535):
// - attn_decode_f32: per token t (lane lanes[t], position p = positions[t]) and head h:
//   q_h = rope(offset_rmsnorm(query_h, q_norm)), k = rope(offset_rmsnorm(k, k_norm)) of every KV
//   head, f32 (RoPE: NeoX halves over the first rotary_dim dims, cos/sin of p * theta^(-2i/rotary_dim)
//   in f32; core/cpu/ops.h's rms_norm_offset, rope_tables, rope_neox; the RoPE position as
//   attention_decode.h's prep takes it: rope_thw's M-RoPE positions, else p + rope_offset[lane]);
//   k and v are encoded into the
//   pool at p in kv.dtype exactly as core/model/kv_codec.h's kv_encode_row (attention_decode.h's page
//   layout); q_h goes to q [t][n_heads * head_dim] (scratch). Then o_h = softmax(q_h . K_j *
//   head_dim^-0.5, j <= p) . V (K, V decoded from the pool as kv_decode_row), out_h = o_h *
//   sigmoid(gate_h), f32 -> out [t][n_heads * head_dim]. qg rows are [n_heads][query | gate]
//   (head_dim each), k and v [n_kv_heads * head_dim]. scores: attn_f32_scores_floats(n_tokens,
//   n_heads, max_context) floats of scratch. geo.exact is ignored (always f32).
//   Lanes may repeat only with consecutive positions (one lane's tokens: each sees the rows the
//   earlier ones wrote, all rows are stored before any is read).
// - gdn_decode_f32: one GDN step per token, slot slots[t] (distinct slots):
//   conv: c[ch] = silu(sum_j w[ch][j] * in_j), in = the slot's 3 previous inputs (conv_state
//   [slot][3][conv_dim] f32, oldest first) and qkv[t][ch]; the state shifts (holds the last 3
//   inputs, f32); c -> conv_out [t][conv_dim] (scratch).
//   recurrence per V head h (QK head r = h / (n_v / n_k)): q = l2norm(c_q,r) / sqrt(128),
//   k = l2norm(c_k,r) (x / sqrt(sum x^2 + 1e-6)), v = c_v,h, g = -exp(a_log[h]) * softplus(a[t][h] +
//   dt_bias[h]), beta = sigmoid(b[t][h]); S = exp(g) S; delta = beta (v - S^T k); S += k (x) delta;
//   o = S^T q (state [slot][n_v][128][128] f32, S[k][v]; the sums in core/cpu/gdn.cpp's order);
//   y[t][h*128 + j] = norm_w[j] * (o_j / sqrt(mean(o^2) + eps)) * silu(z[t][h*128 + j]), f32.
//   conv_w: [conv_dim][4] f32; norm_w: [128] f32; a_log, dt_bias: f32 [n_v_heads].
// - Every weight vector (q_norm, k_norm [head_dim], conv_w, norm_w, a_log, dt_bias) is f32, as the
//   CPU keeps it: a weight rounded to bf16 on the way moves the rows by ~1e-3 relative wherever the
//   stored value is not a bf16 value (random test weights), enough to flip a near-tied MoE route.
// - Requirements: head_dim 256 and attention_decode.h's geometry (attention); head dims 128,
//   n_v % n_k == 0, conv_dim == (2 n_k + n_v) * 128 (GDN). Violations the host can see return
//   cudaErrorInvalidValue and launch nothing; device-side indices are trusted.
// Thread safety: stateless apart from the caller's buffers; graph-capturable (plain launches).
#pragma once

#include "ninfer/kernels/attention_decode.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::kernels {

struct AttnF32Args {
    AttnGeometry geo;
    const float* qg = nullptr;
    int64_t qg_stride = 0;
    const float* k = nullptr;
    int64_t k_stride = 0;
    const float* v = nullptr;
    int64_t v_stride = 0;
    const float* q_norm = nullptr;
    const float* k_norm = nullptr;
    const int32_t* lanes = nullptr;
    const int32_t* positions = nullptr;
    KvPages kv;
    float* q = nullptr; // scratch: normed, roped queries
    int64_t q_stride = 0;
    float* scores = nullptr; // scratch
    int max_context = 0;
    float* out = nullptr;
    int64_t out_stride = 0;
    int n_tokens = 0;
    const int32_t* rope_thw = nullptr; // as AttnPrepArgs (attention_decode.h)
    const int32_t* rope_offset = nullptr;
};

struct GdnF32Args {
    const float* qkv = nullptr; // [t][conv_dim] projection rows (q | k | v)
    int64_t qkv_stride = 0;
    const float* z = nullptr;
    int64_t z_stride = 0;
    const float* a = nullptr; // [t][n_v_heads]
    const float* b = nullptr;
    int64_t ab_stride = 0;
    const float* conv_w = nullptr;
    float* conv_state = nullptr;
    float* conv_out = nullptr; // scratch
    int64_t conv_out_stride = 0;
    const float* a_log = nullptr;
    const float* dt_bias = nullptr;
    const float* norm_w = nullptr;
    float* state = nullptr;
    const int32_t* slots = nullptr;
    float* y = nullptr;
    int64_t y_stride = 0;
    int n_k_heads = 0;
    int n_v_heads = 0;
    int conv_dim = 0;
    int n_tokens = 0;
    float eps = 1e-6f;
};

size_t attn_f32_scores_floats(int n_tokens, int n_heads, int max_context);
cudaError_t attn_decode_f32(const AttnF32Args& args, cudaStream_t stream);
cudaError_t gdn_decode_f32(const GdnF32Args& args, cudaStream_t stream);

} // namespace ninfer::kernels
