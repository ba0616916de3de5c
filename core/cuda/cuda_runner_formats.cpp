// ninfer::core - the CUDA runner's paths for the stored formats and KV dtypes its fast kernels do
// not take directly: the KV pool's dtype, query and gate in two formats, and the MoE layer in
// separate launches for nvfp4 (router, top-k, per-expert GEMVs, combine).
#include "core/cuda/cuda_runner.h"

#include "ninfer/kernels/runner_ops.h"

namespace ninfer::core::cuda {

namespace {

// The formats kernels::moe_decode reads (moe_decode.h: all but nvfp4); others take the launches below.
bool fused_moe_format(const DeviceLinear& w) { return w.view.format != kernels::WeightFormat::Nvfp4; }

} // namespace

kernels::KvDtype kernel_kv_dtype(KvDtype dtype) {
    switch (dtype) {
    case KvDtype::Fp8: return kernels::KvDtype::Fp8;
    case KvDtype::Int8: return kernels::KvDtype::Int8;
    case KvDtype::Bf16:
    case KvDtype::F32: break;
    }
    return kernels::KvDtype::Bf16;
}

kernels::KvPages Runner::kv_pages(uint32_t full_layer) const {
    kernels::KvPages kv;
    kv.page_table = page_table_;
    kv.max_pages = max_pages_;
    kv.dtype = kernel_kv_dtype(plan_.kv_dtype);
    if (kv.dtype == kernels::KvDtype::Bf16) {
        kv.k = reinterpret_cast<__nv_bfloat16*>(kv_k_[full_layer]);
        kv.v = reinterpret_cast<__nv_bfloat16*>(kv_v_[full_layer]);
    } else {
        kv.k_q = kv_k_[full_layer];
        kv.v_q = kv_v_[full_layer];
    }
    return kv;
}

// Query and gate in two formats (the upstream q4/q5 mix): two GEMVs into q_sep_, then
// interleave_query_gate.
void Runner::query_gate_apart(const DeviceAttention& w, int n) {
    linear(w.query, xn_, xn_lo_, xn32_, hs_, n, q_sep_, false, q_w_);
    linear(w.gate, xn_, xn_lo_, xn32_, hs_, n, q_sep_ + kMaxStepTokens * q_w_, false, q_w_);
    interleave_query_gate(qg_, q_sep_, sizeof(*q_sep_), n);
}

// Per token, a 2D copy puts each head's query and gate rows from sep ([query rows of kMaxStepTokens
// tokens][gate rows], stride q_w_) where the attention kernels read them ([query_h | gate_h] in qg,
// stride qgkv_w_); elements of elem_bytes (bf16 rows, or f32 in the f32-activation mode).
void Runner::interleave_query_gate(void* qg, const void* sep, size_t elem_bytes, int n) {
    const ModelConfig& c = config_;
    const size_t head_bytes = size_t(c.head_dim) * elem_bytes;
    auto* dst = static_cast<char*>(qg);
    const auto* src = static_cast<const char*>(sep);
    for (int t = 0; t < n; ++t)
        for (int half = 0; half < 2; ++half)
            cuda_check(cudaMemcpy2DAsync(dst + (t * qgkv_w_ + half * c.head_dim) * elem_bytes, 2 * head_bytes,
                                         src + (half * kMaxStepTokens + t) * q_w_ * elem_bytes, head_bytes,
                                         head_bytes, c.num_attention_heads, cudaMemcpyDeviceToDevice, stream_),
                       "interleaving query and gate");
}

bool Runner::needs_generic_moe() const {
    std::vector<const DeviceLayer*> layers; // the MTP head's layer too: one MoE path for all
    for (const DeviceLayer& L : model_.layers)
        layers.push_back(&L);
    if (model_.mtp)
        layers.push_back(&model_.mtp->layer);
    for (const DeviceLayer* L : layers) {
        const DeviceMoe& m = L->moe;
        for (const DeviceLinear* w : {&m.router, &m.shared_score, &m.experts_gate_up, &m.experts_down,
                                      &m.shared.gate_up, &m.shared.down})
            if (!fused_moe_format(*w))
                return true;
    }
    return false;
}

void Runner::alloc_generic_moe() {
    const ModelConfig& c = config_;
    const int64_t B = kMaxStepTokens, K = c.num_experts_per_tok, I = c.moe_intermediate_size;
    GenericMoe& g = generic_moe_;
    g.e_w = pad8(c.num_experts);
    g.egu_w = pad8(2 * I);
    g.eact_w = pad8(I);
    g.router = arena_.alloc_n<float>(B * g.e_w, "router logits");
    g.ids = arena_.alloc_n<int32_t>(B * K, "routed experts");
    g.weights = arena_.alloc_n<float>(B * K, "routing weights");
    g.expert_gu = arena_.alloc_n<float>(B * K * g.egu_w, "expert gate+up");
    g.expert_act = arena_.alloc_n<float>(B * K * g.eact_w, "expert SwiGLU");
    g.expert_out = arena_.alloc_n<float>(B * K * hs_, "expert outputs");
    g.shared_out = arena_.alloc_n<float>(B * hs_, "shared expert output");
    g.score = arena_.alloc_n<float>(B * 8, "shared expert score");
    g.enabled = true;
}

void Runner::moe_generic(const DeviceLayer& L, int n) {
    const ModelConfig& c = config_;
    const DeviceMoe& m = L.moe;
    const GenericMoe& g = generic_moe_;
    const int K = int(c.num_experts_per_tok), I = int(c.moe_intermediate_size);
    const int64_t inter = c.shared_expert_intermediate_size;
    linear(m.shared.gate_up, xn_, xn_lo_, xn32_, hs_, n, gate_up_, true, gu_w_);
    cuda_check(kernels::swiglu(gate_up_, gu_w_, int(inter), act_, act32_, act_w_, n, stream_, act_lo_), "SwiGLU");
    linear(m.shared.down, act_, act_lo_, act32_, act_w_, n, g.shared_out, true, hs_);
    cuda_check(kernels::gemv_f32x(m.shared_score.view, xn32_, hs_, n, g.score, true, 8, stream_), "shared expert score");
    cuda_check(kernels::gemv_f32x(m.router.view, xn32_, hs_, n, g.router, true, g.e_w, stream_), "router");
    cuda_check(kernels::moe_route(g.router, g.e_w, int(c.num_experts), K, g.ids, g.weights, n, stream_), "routing");
    kernels::MoeGemvArgs a;
    a.w = m.experts_gate_up.view;
    a.rows_per_expert = 2 * I;
    a.ids = g.ids;
    a.top_k = K;
    a.x = xn32_;
    a.x_stride = hs_;
    a.y = g.expert_gu;
    a.y_stride = g.egu_w;
    a.n_tokens = n;
    cuda_check(kernels::moe_gemv(a, stream_), "expert gate+up");
    cuda_check(kernels::swiglu(g.expert_gu, g.egu_w, I, nullptr, g.expert_act, g.eact_w, n * K, stream_),
               "expert SwiGLU");
    a.w = m.experts_down.view;
    a.rows_per_expert = int(c.hidden_size);
    a.x = g.expert_act;
    a.x_stride = g.eact_w;
    a.x_per_slot = true;
    a.y = g.expert_out;
    a.y_stride = hs_;
    cuda_check(kernels::moe_gemv(a, stream_), "expert down");
    cuda_check(kernels::moe_combine(g.expert_out, hs_, g.weights, K, g.shared_out, hs_, g.score, 8, mix_, hs_,
                                    int(c.hidden_size), n, stream_), "MoE combine");
}

} // namespace ninfer::core::cuda
