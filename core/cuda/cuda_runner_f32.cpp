// ninfer::core - the CUDA runner's f32-activation check mode: f32 projection rows and the f32 mixers.
#include "core/cuda/cuda_runner.h"

#include "core/util/error.h"
#include "ninfer/kernels/mixers_f32.h"

namespace ninfer::core::cuda {

void Runner::alloc_f32_mixers() {
    const ModelConfig& c = config_;
    const int64_t B = kMaxStepTokens;
    f32m_.qgkv = arena_.alloc_n<float>(B * qgkv_w_, "query+gate+key+value (f32)");
    if (q_sep_)
        f32m_.q_sep = arena_.alloc_n<float>(2 * B * q_w_, "query, gate (f32)");
    f32m_.q = arena_.alloc_n<float>(B * q_w_, "queries (f32)");
    f32m_.attn = arena_.alloc_n<float>(B * q_w_, "attention output (f32)");
    f32m_.scores = arena_.alloc_n<float>(
        kernels::attn_f32_scores_floats(int(B), int(c.num_attention_heads), int(plan_.max_context)), "attention scores");
    f32m_.qkvz = arena_.alloc_n<float>(B * qkvz_w_, "GDN qkv+z (f32)");
    f32m_.conv_out = arena_.alloc_n<float>(B * cd_w_, "GDN conv output (f32)");
    f32m_.y = arena_.alloc_n<float>(B * vd_w_, "GDN output (f32)");
    for (uint32_t g = 0; g < c.n_linear_attention_layers(); ++g) {
        f32m_.conv.push_back(arena_.alloc_n<float>(plan_.n_lanes * conv_elems_per_lane(), "GDN conv state (f32)"));
        cuda_check(cudaMemset(f32m_.conv.back(), 0, plan_.n_lanes * conv_elems_per_lane() * 4), "clearing GDN state");
    }
}

// Projections as the CPU's matmuls (f32 in, f32 out), then kernels/mixers_f32.h's attention.
void Runner::attention_f32(const DeviceLayer& L, uint32_t fi, int n) {
    const ModelConfig& c = config_;
    const DeviceAttention& w = L.attention;
    if (w.fused.view.data)
        throw Error("cuda: f32-activation mode has no fused projections");
    float* qg = f32m_.qgkv;
    float* k = qg + 2 * c.attn_q_dim();
    float* v = k + c.attn_kv_dim();
    if (w.query_gate.view.data) {
        linear(w.query_gate, nullptr, nullptr, xn32_, hs_, n, qg, true, qgkv_w_);
    } else { // query and gate in two formats, interleaved as query_gate_apart does
        linear(w.query, nullptr, nullptr, xn32_, hs_, n, f32m_.q_sep, true, q_w_);
        linear(w.gate, nullptr, nullptr, xn32_, hs_, n, f32m_.q_sep + kMaxStepTokens * q_w_, true, q_w_);
        interleave_query_gate(qg, f32m_.q_sep, sizeof(*f32m_.q_sep), n);
    }
    linear(w.key, nullptr, nullptr, xn32_, hs_, n, k, true, qgkv_w_);
    linear(w.value, nullptr, nullptr, xn32_, hs_, n, v, true, qgkv_w_);
    kernels::AttnF32Args a;
    a.geo = attention_geometry(c);
    a.qg = qg;
    a.qg_stride = qgkv_w_;
    a.k = k;
    a.k_stride = qgkv_w_;
    a.v = v;
    a.v_stride = qgkv_w_;
    a.q_norm = w.query_norm_f32;
    a.k_norm = w.key_norm_f32;
    a.lanes = step_in_ + kMaxStepTokens;
    a.positions = step_in_ + 2 * kMaxStepTokens;
    a.rope_thw = step_rope_now_ ? step_rope_ : nullptr;
    a.rope_offset = rope_offsets_;
    a.kv = kv_pages(fi);
    a.q = f32m_.q;
    a.q_stride = q_w_;
    a.scores = f32m_.scores;
    a.max_context = int(plan_.max_context);
    a.out = f32m_.attn;
    a.out_stride = q_w_;
    a.n_tokens = n;
    cuda_check(kernels::attn_decode_f32(a, stream_), "attention (f32)");
    linear(w.output, nullptr, nullptr, f32m_.attn, q_w_, n, mix_, true, hs_);
}

// Projections into f32 rows, then per step kernels/mixers_f32.h's conv + recurrence (one lane's
// tokens one at a time, as Runner::gdn).
void Runner::gdn_f32(const DeviceLayer& L, uint32_t gi, int n, bool one_lane) {
    const ModelConfig& c = config_;
    const DeviceGdn& w = L.gdn;
    if (w.in_proj.view.data)
        throw Error("cuda: f32-activation mode has no fused projections");
    const int64_t kd = c.gdn_key_dim();
    float* qkv = f32m_.qkvz;
    float* z = qkv + c.gdn_conv_dim();
    float* b = a_ + pad8(c.linear_num_value_heads);
    if (w.qkv.view.data) {
        linear(w.qkv, nullptr, nullptr, xn32_, hs_, n, qkv, true, qkvz_w_);
    } else {
        linear(w.query, nullptr, nullptr, xn32_, hs_, n, qkv, true, qkvz_w_);
        linear(w.key, nullptr, nullptr, xn32_, hs_, n, qkv + kd, true, qkvz_w_);
        linear(w.value, nullptr, nullptr, xn32_, hs_, n, qkv + 2 * kd, true, qkvz_w_);
    }
    linear(w.z, nullptr, nullptr, xn32_, hs_, n, z, true, qkvz_w_);
    linear(w.a, nullptr, nullptr, xn32_, hs_, n, a_, true, ab_w_);
    linear(w.b, nullptr, nullptr, xn32_, hs_, n, b, true, ab_w_);
    // The rows from row 0; a launch over rows [r0, r0 + per) offsets them.
    kernels::GdnF32Args g;
    g.qkv = qkv;
    g.qkv_stride = qkvz_w_;
    g.z = z;
    g.z_stride = qkvz_w_;
    g.a = a_;
    g.b = b;
    g.ab_stride = ab_w_;
    g.conv_w = w.conv_f32;
    g.conv_state = f32m_.conv[gi];
    g.conv_out = f32m_.conv_out;
    g.conv_out_stride = cd_w_;
    g.a_log = w.a_log;
    g.dt_bias = w.dt_bias;
    g.norm_w = w.norm_f32;
    g.state = recurrent_[gi];
    g.slots = step_in_ + kMaxStepTokens; // a lane's GDN slot is its index
    g.y = f32m_.y;
    g.y_stride = vd_w_;
    g.n_k_heads = int(c.linear_num_key_heads);
    g.n_v_heads = int(c.linear_num_value_heads);
    g.conv_dim = int(c.gdn_conv_dim());
    g.eps = c.rms_norm_eps;
    if (gdn_windows_)
        cuda_check(kernels::gdn_decode_f32_window(g, gdn_windows(gi), stream_), "GDN conv + recurrence (f32, verify windows)");
    for (int i = 0, steps = gdn_windows_ ? 0 : gdn_launches(n, one_lane); i < steps; ++i) {
        const int r0 = one_lane ? i : 0;
        kernels::GdnF32Args step = g;
        step.qkv += r0 * qkvz_w_;
        step.z += r0 * qkvz_w_;
        step.a += r0 * ab_w_;
        step.b += r0 * ab_w_;
        step.conv_out += r0 * cd_w_;
        step.slots += r0;
        step.y += r0 * vd_w_;
        step.n_tokens = one_lane ? 1 : n;
        cuda_check(kernels::gdn_decode_f32(step, stream_), "GDN conv + recurrence (f32)");
    }
    linear(w.output, nullptr, nullptr, f32m_.y, vd_w_, n, mix_, true, hs_);
}

} // namespace ninfer::core::cuda
