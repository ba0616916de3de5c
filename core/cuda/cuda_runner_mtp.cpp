// ninfer::core - the CUDA runner's MTP head pass (docs/MODEL.md §8): fc, one decoder layer, its norm.
#include "core/cuda/cuda_runner.h"

#include "core/cuda/multimodal_rows.h"
#include "core/util/error.h"
#include "ninfer/kernels/runner_ops.h"

namespace ninfer::core::cuda {

void Runner::alloc_mtp() {
    if (hs_ != int64_t(config_.hidden_size))
        throw Error("cuda: the MTP head needs hidden_size a multiple of 8");
    const int64_t rows = int64_t(kMaxStepTokens) * 2 * hs_;
    mtp_in_ = arena_.alloc_n<__nv_bfloat16>(rows, "MTP input rows");
    mtp_in_lo_ = arena_.alloc_n<__nv_bfloat16>(rows, "MTP input rows (low halves)");
    mtp_in32_ = arena_.alloc_n<float>(rows, "MTP input rows (f32)");
    const DeviceAttention& a = model_.mtp->layer.attention;
    if (!a.fused.view.data && !a.query_gate.view.data && !q_sep_) { // query and gate in two formats
        if (q_w_ != int64_t(config_.attn_q_dim()))
            throw Error("cuda: the CUDA kernels do not cover this model: query rows must be 8-aligned");
        q_sep_ = arena_.alloc_n<__nv_bfloat16>(2 * int64_t(kMaxStepTokens) * q_w_, "query, gate");
    }
}

void Runner::enqueue_mtp(int n, float* hidden, int64_t hidden_stride, const PrefillInputs* multimodal) {
    if (!model_.mtp)
        throw Error("cuda: the MTP head was not uploaded (the plan has no mtp)");
    if (n < 1 || n > kMaxStepTokens)
        throw Error("cuda: an MTP step takes 1.." + std::to_string(kMaxStepTokens) + " rows");
    if (multimodal && (multimodal->positions.size() != size_t(n) || multimodal->embedding_rows.size() != size_t(n)))
        throw Error("cuda: an MTP step's positions and embedding rows must be one per row");
    const DeviceMtp& m = *model_.mtp;
    const ModelConfig& c = config_;
    const float eps = c.rms_norm_eps;
    const int H = int(c.hidden_size);
    const int64_t in_w = 2 * hs_;
    // u = fc([norm_e(embed(x_{t+1})) | norm_h(h_t)]): the embedding half first (x_ is scratch here).
    cuda_check(kernels::embed_rows(model_.embedding.view, step_in_, n, x_, hs_, stream_), "MTP embedding");
    if (multimodal) { // a placeholder x_{t+1} of a prefill_with chunk: the tower's row; M-RoPE positions
        enqueue_embedding_rows(*multimodal, c.hidden_size, x_, hs_, stream_);
        enqueue_rope_positions(multimodal->positions, step_rope_, stream_);
    }
    cuda_check(kernels::add_rmsnorm(x_, hs_, nullptr, hs_, m.embedding_norm, mtp_in_, in_w, mtp_in32_, n, H, eps,
                                    stream_, mtp_in_lo_), "MTP embedding norm");
    cuda_check(kernels::add_rmsnorm(hidden, hidden_stride, nullptr, hs_, m.hidden_norm, mtp_in_ + hs_, in_w,
                                    mtp_in32_ + hs_, n, H, eps, stream_, mtp_in_lo_ + hs_), "MTP hidden norm");
    linear(m.input_projection, mtp_in_, mtp_in_lo_, mtp_in32_, in_w, n, x_, true, hs_);
    // One pre-norm decoder layer over u, as a text layer's (the GEMVs quantise their own int8 rows).
    const DeviceLayer& L = m.layer;
    cuda_check(kernels::add_rmsnorm(x_, hs_, nullptr, hs_, L.input_norm, xn_, hs_, xn32_, n, H, eps, stream_, xn_lo_),
               "MTP input norm");
    step_rope_now_ = multimodal != nullptr;
    attention(L, mtp_kv_layer(), n);
    step_rope_now_ = false;
    cuda_check(kernels::add_rmsnorm(x_, hs_, mix_, hs_, L.post_attention_norm, xn_, hs_, xn32_, n, H, eps, stream_,
                                    xn_lo_), "MTP post-attention norm");
    ffn(L, n);
    cuda_check(kernels::add_rmsnorm(x_, hs_, mix_, hs_, m.final_norm, xn_, hs_, xn32_, n, H, eps, stream_, xn_lo_),
               "MTP final norm");
}

} // namespace ninfer::core::cuda
