// ninfer::kernels - the MoE feed-forward of one decode step (1..8 tokens) in three launches:
// (1) router + shared-expert score rows, softmax/top-k/renormalisation and the expert work list in
// the last router block, beside them the shared expert's gate/up + SwiGLU (it needs no routing);
// (2) every chosen expert's gate/up + SwiGLU, each expert's rows read from memory once for all tokens that
// chose it; (3) every (token, choice)'s down rows with the weighted combine, shared expert included.
// For one token the routing moves to (2): every block routes the token from the logits itself (a
// shorter dependent chain: no counter, no work-list round trip); the results are the same bits.
//
// Contract (docs/MODEL.md §7, core/cpu/forward.cpp ModelRunner::ffn):
// - x: n_tokens f32 rows (stride x_stride elements) of the post-attention-normed hidden state.
// - logits[t][e] = W_router.row(e) . x[t], score[t] = W_shared_score.row(0) . x[t] (f32 sums of
//   exact products: weights decoded exactly, x never rounded). p = softmax(logits[t]) in f32;
//   ids[t][0..K) = the K largest p (ties to the lower id) in ascending expert id; route weights
//   w[t][j] = p[ids[t][j]] / sum (the K probabilities summed largest first); w[t][K] =
//   sigmoid(score[t]). Experts are combined in ascending id, then the shared one, as core/cpu adds.
// - For every (t, j), expert e = ids[t][j] (j = K: the shared expert):
//   act[t][j][i] = silu(G_e.row(i) . x[t]) * (U_e.row(i) . x[t]), i < inter (f32), then
//   out[t][h] = sum_{j = 0..K} w[t][j] * (D_e.row(h) . act[t][j]), in that order of j, f32.
// - Weights (stored layout, WeightLayout::Artifact; each of bf16, fp8_e4m3fn_row_bf16, q4/q5/q6_g64_fp16,
//   q8_g32_fp16 (not nvfp4), the six views may differ in format, e.g. the upstream mix's q4 expert
//   gate/up, q5 expert down and q8 shared expert): router [E, H]; shared_score [1, H]; experts_gate_up [E * 2I, H] (expert e's gate rows at e*2I, its up rows at e*2I + I);
//   experts_down [E * H, I]; shared_gate_up [2Is, H] (gate rows, then up rows); shared_down [H, Is].
// - Scratch (caller-allocated device memory, sizes from the functions below; counter zeroed once
//   by the caller and left at zero by every call): logits [8][E + 1] (at one token every row holds
//   token 0's logits: the gate/up blocks read eight copies), ids [8][K] and weights
//   [8][K + 1] (readable after the call: the routing it used), work (the expert work list), act
//   (the SwiGLU rows in f32 where the down rows run FMA dots, then x and the SwiGLU rows split into
//   bf16 parts for the tensor cores).
// - q4 experts' gate/up run on tensor cores (x = hi + mid + lo bf16 parts, exact products, f32
//   sums), so does a q4 shared expert's gate/up (in the first launch, H <= 4096), and so do the
//   down rows when the routed and shared down are q4 and I, Is are multiples of 128 (act split the
//   same way where it is made); every other format takes the FMA path.
// - Determinism: every dot product's summation order depends on (format, k, the row) only, never
//   on n_tokens or on which tokens share an expert, so a batch equals its tokens run alone, bit for
//   bit, and a graph replay equals the eager call.
// - Requirements (else cudaErrorInvalidValue, nothing launched): 1 <= n_tokens <= 8,
//   1 <= K <= 32, K <= E <= 1024, H, I and Is multiples of 16, x, out and every weight 16-byte
//   aligned, x_stride a multiple of 4, the views' shapes as above, scratch pointers non-null.
// Graph-capturable, no host synchronisation; calls sharing a scratch must be ordered on one stream.
#pragma once

#include "ninfer/kernels/gemv.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::kernels {

constexpr int kMoeDecodeMaxTokens = 8;

struct MoeDecodeWeights {
    WeightView router, shared_score, experts_gate_up, experts_down, shared_gate_up, shared_down;
    int n_experts = 0, top_k = 0;
    int64_t inter = 0, shared_inter = 0; // I, Is
};

struct MoeDecodeScratch {
    float* logits = nullptr;     // moe_decode_logits_floats()
    int32_t* ids = nullptr;      // 8 * top_k
    float* weights = nullptr;    // 8 * (top_k + 1)
    int32_t* work = nullptr;     // moe_decode_work_ints()
    float* act = nullptr;        // moe_decode_act_floats()
    uint32_t* counter = nullptr; // 1, zero
};

size_t moe_decode_logits_floats(int n_experts);
size_t moe_decode_work_ints(int n_experts, int top_k);
size_t moe_decode_act_floats(int top_k, int64_t inter, int64_t shared_inter, int64_t hidden);

struct MoeDecodeArgs {
    MoeDecodeWeights w;
    MoeDecodeScratch scratch;
    const float* x = nullptr;
    int64_t x_stride = 0;
    int n_tokens = 0;
    float* out = nullptr;
    int64_t out_stride = 0;
};

cudaError_t moe_decode(const MoeDecodeArgs& args, cudaStream_t stream);

} // namespace ninfer::kernels
