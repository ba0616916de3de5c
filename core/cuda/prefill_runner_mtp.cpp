// ninfer::core - the MTP head's prompt catch-up on the tensor cores (PrefillRunner::enqueue_mtp).
#include "core/cuda/prefill_runner.h"

#include "core/cuda/multimodal_rows.h"
#include "core/util/error.h"
#include "ninfer/kernels/runner_ops.h"

namespace ninfer::core::cuda {

bool PrefillRunner::can_run_mtp() const {
    const uint64_t H = config_.hidden_size;
    // The [norm_e(e) | norm_h(h)] rows borrow the query+gate buffer (its rows are qg_w_ wide).
    return run_.has_mtp() && 2 * hs_ <= qg_w_ && 2 * H * H <= wbuf_elems_;
}

void PrefillRunner::enqueue_mtp(int lane, uint32_t mtp_start, int n, int ids_offset, float* first_hidden,
                                const PrefillInputs* multimodal) {
    if (!can_run_mtp())
        throw Error("cuda: the tensor-core prefill cannot run this model's MTP head");
    if (n < 1 || n > max_tokens_ || ids_offset < 0 || ids_offset + n > max_tokens_ || (mtp_start == 0 && first_hidden))
        throw Error("cuda: MTP prefill rows out of range");
    if (multimodal && (multimodal->positions.size() != size_t(n) || multimodal->embedding_rows.size() != size_t(n)))
        throw Error("cuda: MTP prefill rows' positions and embedding rows must be one per row");
    const DeviceMtp& m = *run_.model().mtp;
    const ModelConfig& c = config_;
    const float eps = c.rms_norm_eps;
    const int H = int(c.hidden_size);
    __nv_bfloat16* in = qg_; // [n][2H] of qg_w_ stride: the embedding half first
    cuda_check(kernels::embed_rows(run_.model().embedding.view, ids_ + ids_offset, n, x_, hs_, stream_),
               "MTP embedding");
    if (multimodal) { // placeholder ids: the tower's rows; the rows' M-RoPE positions (the chunk's are used)
        enqueue_embedding_rows(*multimodal, config_.hidden_size, x_, hs_, stream_);
        enqueue_rope_positions(multimodal->positions, rope_thw_, stream_);
    }
    cuda_check(kernels::add_rmsnorm(x_, hs_, nullptr, hs_, m.embedding_norm, in, qg_w_, nullptr, n, H, eps, stream_),
               "MTP embedding norm");
    const int shift = first_hidden ? 1 : 0; // row i's hidden state is the chunk's row i - shift
    if (first_hidden)
        cuda_check(kernels::add_rmsnorm(first_hidden, hs_, nullptr, hs_, m.hidden_norm, in + hs_, qg_w_, nullptr, 1,
                                        H, eps, stream_), "MTP hidden norm");
    if (n > shift)
        cuda_check(kernels::add_rmsnorm(xn32_, hs_, nullptr, hs_, m.hidden_norm, in + shift * qg_w_ + hs_, qg_w_,
                                        nullptr, n - shift, H, eps, stream_), "MTP hidden norm");
    linear(m.input_projection, in, qg_w_, n, x_, true, hs_);
    // The head's decoder layer, as a text layer of enqueue_forward; no final norm (nothing reads it).
    const DeviceLayer& L = m.layer;
    cuda_check(kernels::add_rmsnorm(x_, hs_, nullptr, hs_, L.input_norm, xn_, hs_, nullptr, n, H, eps, stream_),
               "MTP input norm");
    attention(L, run_.mtp_kv_layer(), lane, mtp_start, n, multimodal != nullptr);
    cuda_check(kernels::add_rmsnorm(x_, hs_, mix_, hs_, L.post_attention_norm, xn_, hs_, c.is_moe() ? xn32_ : nullptr,
                                    n, H, eps, stream_), "MTP post-attention norm");
    if (c.is_moe())
        moe(L, n);
    else
        mlp(L.mlp, n, mix_);
}

} // namespace ninfer::core::cuda
