// ninfer::core - CUDA prefill pass: a chunk of one lane's tokens through every layer on tensor cores.
#include "core/cuda/prefill_runner.h"

#include "core/cuda/multimodal_rows.h"
#include "core/util/error.h"
#include "ninfer/kernels/attention_prefill.h"
#include "ninfer/kernels/gdn_prefill.h"
#include "ninfer/kernels/gemm.h"
#include "ninfer/kernels/moe_prefill.h"
#include "ninfer/kernels/runner_ops.h"

#include <algorithm>
#include <type_traits>

namespace ninfer::core::cuda {

namespace {

int64_t pad8(int64_t v) { return (v + 7) / 8 * 8; }

// Widths (elements) of one token's rows in every buffer (padded to 8 for 16-byte row starts).
struct Widths {
    int64_t hs, qg, kv, q, cd, vd, hv, gu, act, e, egu, eact;
    explicit Widths(const ModelConfig& c) {
        hs = pad8(c.hidden_size);
        qg = pad8(2 * c.attn_q_dim());
        kv = pad8(c.attn_kv_dim());
        q = pad8(c.attn_q_dim());
        cd = pad8(c.gdn_conv_dim());
        vd = pad8(c.gdn_value_dim());
        hv = pad8(c.linear_num_value_heads);
        const int64_t inter = c.is_moe() ? c.shared_expert_intermediate_size : c.intermediate_size;
        gu = pad8(2 * inter);
        act = pad8(inter);
        e = c.is_moe() ? pad8(c.num_experts) : 0;
        egu = c.is_moe() ? pad8(2 * c.moe_intermediate_size) : 0;
        eact = c.is_moe() ? pad8(c.moe_intermediate_size) : 0;
    }
};

// The largest matrix the prefill multiplies through the scratch (bf16 elements). The output head is
// applied by the decode GEMV (stage_rows), so it is not counted.
uint64_t largest_matrix(const ModelConfig& c) {
    const uint64_t H = c.hidden_size;
    // Concatenated row blocks (device_weights.h): attention [q+gate; k; v], GDN [q; k; v; z; a; b].
    const uint64_t attn_rows = 2ull * c.attn_q_dim() + 2ull * c.attn_kv_dim();
    const uint64_t gdn_rows = uint64_t(c.gdn_conv_dim()) + c.gdn_value_dim() + 2ull * c.linear_num_value_heads;
    uint64_t m = std::max<uint64_t>({attn_rows * H, uint64_t(c.attn_q_dim()) * H, gdn_rows * H,
                                     uint64_t(c.gdn_value_dim()) * H});
    if (c.is_moe()) {
        const uint64_t I = c.moe_intermediate_size, S = c.shared_expert_intermediate_size;
        m = std::max<uint64_t>({m, uint64_t(c.num_experts) * 2 * I * H, 2 * S * H});
    } else {
        m = std::max<uint64_t>(m, 2ull * c.intermediate_size * H);
    }
    return m;
}

// Scratch of the GDN and attention prefill kernels for a chunk of T tokens (they run one after the
// other, so they share it).
uint64_t kernel_scratch_bytes(const ModelConfig& c, int T) {
    uint64_t s = 256;
    if (c.n_linear_attention_layers() > 0)
        s = std::max<uint64_t>(s, kernels::gdn_prefill_scratch_bytes(T, int(c.linear_num_key_heads),
                                                                     int(c.linear_num_value_heads)));
    if (c.n_full_attention_layers() > 0)
        s = std::max<uint64_t>(s, kernels::attn_prefill_scratch_bytes(T, int(c.num_attention_heads)));
    return s;
}

int cap_tokens(const ModelConfig& c, int max_tokens) {
    // Per-row launches (swiglu over expert rows) take at most 65535 rows.
    const int limit = c.is_moe() ? int(65535 / std::max<uint32_t>(1, c.num_experts_per_tok)) : 65535;
    return std::clamp(max_tokens, 1, limit);
}

} // namespace

template <class Visit> void PrefillBuffers::visit(const ModelConfig& c, uint64_t T, Visit&& v) {
    const Widths w(c);
    v(ids_, T, "prefill token ids");
    v(rope_thw_, T * 3, "prefill M-RoPE positions");
    v(x_, T * w.hs, "prefill residual");
    v(mix_, T * w.hs, "prefill mixer output");
    v(xn32_, T * w.hs, "prefill normed rows (f32)");
    v(xn_, T * w.hs, "prefill normed rows");
    v(xn_lo_, T * w.hs, "prefill normed rows (low halves)");
    v(qg_, T * w.qg, "prefill query+gate");
    v(k_, T * w.kv, "prefill keys");
    v(v_, T * w.kv, "prefill values");
    v(attn_, T * w.q, "prefill attention output");
    v(qkv_, T * w.cd, "prefill GDN qkv");
    v(z_, T * w.vd, "prefill GDN z");
    v(y_, T * w.vd, "prefill GDN output");
    v(a_, T * w.hv, "prefill GDN a");
    v(b_, T * w.hv, "prefill GDN b");
    v(gate_up_, T * w.gu, "prefill gate+up");
    v(act_, T * w.act, "prefill SwiGLU output");
    if (c.is_moe()) {
        const uint64_t K = c.num_experts_per_tok;
        v(router_, T * w.e, "prefill router logits");
        v(route_ids_, T * K, "prefill routed experts");
        v(route_w_, T * K, "prefill routing weights");
        v(score_, T * 8, "prefill shared expert score");
        v(shared_out_, T * w.hs, "prefill shared expert output");
        v(counts_, c.num_experts, "prefill expert counts");
        v(offsets_, c.num_experts + 1, "prefill expert offsets");
        v(order_, T * K, "prefill expert order");
        v(position_, T * K, "prefill expert positions");
        v(e_x_, T * K * w.hs, "prefill expert inputs");
        v(e_gu_, T * K * w.egu, "prefill expert gate+up");
        v(e_act_, T * K * w.eact, "prefill expert SwiGLU");
        v(e_out_, T * K * w.hs, "prefill expert outputs");
    }
    wbuf_elems_ = largest_matrix(c);
    v(wbuf_, wbuf_elems_, "prefill dequantised weights");
    scratch_bytes_ = kernel_scratch_bytes(c, int(T));
    v(scratch_, scratch_bytes_, "prefill kernel scratch");
}

uint64_t PrefillRunner::workspace_bytes(const ModelConfig& c, int max_tokens) {
    // DeviceArena::alloc is one cudaMalloc per buffer, whose blocks are rounded to at least 256 bytes.
    uint64_t total = 0;
    PrefillBuffers plan;
    plan.visit(c, uint64_t(cap_tokens(c, max_tokens)), [&](auto*& p, uint64_t count, const char*) {
        total += (std::max<uint64_t>(count * sizeof(*p), 256) + 255) / 256 * 256;
    });
    return total;
}

PrefillRunner::PrefillRunner(Runner& run, int max_tokens)
    : run_(run), config_(run.config()), max_tokens_(cap_tokens(run.config(), max_tokens)), stream_(run.stream()) {
    const Widths w(config_);
    hs_ = w.hs, qg_w_ = w.qg, kv_w_ = w.kv, q_w_ = w.q, cd_w_ = w.cd, vd_w_ = w.vd, hv_w_ = w.hv, gu_w_ = w.gu,
    act_w_ = w.act, e_w_ = w.e, egu_w_ = w.egu, eact_w_ = w.eact;
    visit(config_, uint64_t(max_tokens_), [&](auto*& p, uint64_t count, const char* name) {
        p = arena_.alloc_n<std::remove_reference_t<decltype(*p)>>(count, name);
    });
}

const __nv_bfloat16* PrefillRunner::weights_bf16(const kernels::WeightView& w) {
    if (w.format == kernels::WeightFormat::Bf16 && w.layout == kernels::WeightLayout::Artifact)
        return static_cast<const __nv_bfloat16*>(w.data);
    if (uint64_t(w.n) * uint64_t(w.k) > wbuf_elems_)
        throw Error("cuda: prefill weight scratch too small for a [" + std::to_string(w.n) + ", " +
                    std::to_string(w.k) + "] matrix");
    cuda_check(kernels::dequant_bf16(w, 0, w.n, wbuf_, w.k, stream_), "dequantising weights");
    return wbuf_;
}

void PrefillRunner::gemm_rows(const __nv_bfloat16* w, int64_t k, int64_t row0, int64_t rows,
                              const __nv_bfloat16* x, int64_t x_stride, int m, void* y, bool y_fp32,
                              int64_t y_stride) {
    const kernels::GemmArgs g{.a = x, .lda = x_stride, .b = w + row0 * k, .ldb = k, .c = y, .ldc = y_stride,
                              .c_fp32 = y_fp32, .m = m, .n = int(rows), .k = int(k)};
    cuda_check(kernels::gemm_bf16(g, stream_), "prefill GEMM");
}

void PrefillRunner::linear(const DeviceLinear& w, const __nv_bfloat16* x, int64_t x_stride, int m, void* y,
                           bool y_fp32, int64_t y_stride) {
    gemm_rows(weights_bf16(w.view), w.view.k, 0, w.view.n, x, x_stride, m, y, y_fp32, y_stride);
}

// Query and gate stored in two formats (the upstream groupwise mix): both are dequantised, head by
// head, into one [query_h | gate_h]-interleaved bf16 matrix in the weight scratch, then one GEMM.
void PrefillRunner::query_gate_apart(const DeviceAttention& w, int n) {
    const int64_t hd = config_.head_dim, k = w.query.view.k, rows = 2 * w.query.view.n;
    if (uint64_t(rows) * uint64_t(k) > wbuf_elems_)
        throw Error("cuda: prefill weight scratch too small for the query and gate");
    for (int64_t h = 0; h * hd < w.query.view.n; ++h) {
        cuda_check(kernels::dequant_bf16(w.query.view, h * hd, hd, wbuf_ + 2 * h * hd * k, k, stream_), "dequantising weights");
        cuda_check(kernels::dequant_bf16(w.gate.view, h * hd, hd, wbuf_ + (2 * h + 1) * hd * k, k, stream_),
                   "dequantising weights");
    }
    gemm_rows(wbuf_, k, 0, rows, xn_, hs_, n, qg_, false, qg_w_);
}

void PrefillRunner::enqueue_forward(int lane, uint32_t start, std::span<const int32_t> ids,
                                    const PrefillInputs* multimodal) {
    enqueue_begin(lane, start, ids, multimodal);
    enqueue_layers(int(config_.num_hidden_layers));
    enqueue_end();
}

void PrefillRunner::enqueue_begin(int lane, uint32_t start, std::span<const int32_t> ids,
                                  const PrefillInputs* multimodal) {
    const int n = int(ids.size());
    if (n < 1 || n > max_tokens_)
        throw Error("cuda: prefill chunk of " + std::to_string(n) + " tokens (1.." + std::to_string(max_tokens_) + ")");
    cuda_check(cudaMemcpyAsync(ids_, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, stream_), "prefill ids");
    cuda_check(kernels::embed_rows(run_.model().embedding.view, ids_, n, x_, hs_, stream_), "embedding");
    if (multimodal) {
        enqueue_embedding_rows(*multimodal, config_.hidden_size, x_, hs_, stream_);
        enqueue_rope_positions(multimodal->positions, rope_thw_, stream_);
    }
    chunk_ = {lane, start, n, 0, 0, 0, multimodal != nullptr};
}

int PrefillRunner::enqueue_layers(int count) {
    const ModelConfig& c = config_;
    const DeviceModel& model = run_.model();
    const float eps = c.rms_norm_eps;
    const int H = int(c.hidden_size), n = chunk_.n;
    if (n < 1)
        throw Error("cuda: prefill layers with no chunk begun");
    for (; count > 0 && chunk_.next_layer < c.num_hidden_layers; --count) {
        const uint32_t l = chunk_.next_layer++;
        const DeviceLayer& L = model.layers[l];
        cuda_check(kernels::add_rmsnorm(x_, hs_, l == 0 ? nullptr : mix_, hs_, L.input_norm, xn_, hs_, nullptr, n, H,
                                        eps, stream_), "input norm");
        if (L.kind == LayerKind::FullAttention)
            attention(L, chunk_.full++, chunk_.lane, chunk_.start, n, chunk_.multimodal);
        else
            gdn(L, chunk_.gdn++, chunk_.lane, chunk_.start, n);
        cuda_check(kernels::add_rmsnorm(x_, hs_, mix_, hs_, L.post_attention_norm, xn_, hs_,
                                        c.is_moe() ? xn32_ : nullptr, n, H, eps, stream_), "post-attention norm");
        if (c.is_moe())
            moe(L, n);
        else
            mlp(L.mlp, n, mix_);
    }
    return int(c.num_hidden_layers - chunk_.next_layer);
}

void PrefillRunner::enqueue_end() {
    const ModelConfig& c = config_;
    if (chunk_.n < 1 || chunk_.next_layer != c.num_hidden_layers)
        throw Error("cuda: prefill final norm before the chunk's last layer");
    cuda_check(kernels::add_rmsnorm(x_, hs_, mix_, hs_, run_.model().final_norm, xn_, hs_, xn32_, chunk_.n,
                                    int(c.hidden_size), c.rms_norm_eps, stream_, xn_lo_), "final norm");
    chunk_.n = 0;
}

void PrefillRunner::stage_rows(int row, int n) {
    if (row < 0 || n < 1 || n > kMaxStepTokens || row + n > max_tokens_)
        throw Error("cuda: staging prefill rows out of range");
    const size_t bytes16 = size_t(n) * hs_ * 2, bytes32 = size_t(n) * hs_ * 4;
    cuda_check(cudaMemcpyAsync(run_.step_rows(), xn_ + int64_t(row) * hs_, bytes16, cudaMemcpyDeviceToDevice, stream_),
               "staging rows");
    cuda_check(cudaMemcpyAsync(run_.step_rows_f32(), xn32_ + int64_t(row) * hs_, bytes32, cudaMemcpyDeviceToDevice,
                               stream_), "staging rows");
    cuda_check(cudaMemcpyAsync(run_.step_rows_lo(), xn_lo_ + int64_t(row) * hs_, bytes16, cudaMemcpyDeviceToDevice,
                               stream_), "staging rows");
}

void PrefillRunner::mlp(const DeviceMlp& mlp, int n, float* out) {
    const int64_t inter = mlp.down.view.k;
    if (mlp.gate_up.view.data) {
        linear(mlp.gate_up, xn_, hs_, n, gate_up_, true, gu_w_);
    } else {
        linear(mlp.gate, xn_, hs_, n, gate_up_, true, gu_w_);
        linear(mlp.up, xn_, hs_, n, gate_up_ + inter, true, gu_w_);
    }
    cuda_check(kernels::swiglu(gate_up_, gu_w_, int(inter), act_, nullptr, act_w_, n, stream_), "SwiGLU");
    linear(mlp.down, act_, act_w_, n, out, true, hs_);
}

void PrefillRunner::moe(const DeviceLayer& L, int n) {
    const ModelConfig& c = config_;
    const DeviceMoe& m = L.moe;
    const int K = int(c.num_experts_per_tok), I = int(c.moe_intermediate_size), H = int(c.hidden_size);
    const int E = int(c.num_experts), pairs = n * K;
    // Shared expert (dense GEMMs), then its score and the router in f32 from f32 rows, as decode does.
    mlp(m.shared, n, shared_out_);
    cuda_check(kernels::gemv_f32x(m.shared_score.view, xn32_, hs_, n, score_, true, 8, stream_), "shared score");
    cuda_check(kernels::gemv_f32x(m.router.view, xn32_, hs_, n, router_, true, e_w_, stream_), "router");
    cuda_check(kernels::moe_route(router_, e_w_, E, K, route_ids_, route_w_, n, stream_), "routing");
    // Routed experts: rows grouped by expert, one grouped GEMM per projection.
    cuda_check(kernels::moe_group_by_expert(route_ids_, n, K, E, counts_, offsets_, order_, position_, stream_),
               "grouping by expert");
    cuda_check(kernels::moe_gather_rows(xn_, hs_, order_, K, pairs, H, e_x_, hs_, stream_), "gathering rows");
    kernels::GroupedGemmArgs g;
    g.a = e_x_;
    g.lda = hs_;
    g.b = weights_bf16(m.experts_gate_up.view);
    g.ldb = H;
    g.b_group_stride = int64_t(2) * I * H;
    g.c = e_gu_;
    g.ldc = egu_w_;
    g.c_fp32 = true;
    g.m = pairs;
    g.n = 2 * I;
    g.k = H;
    g.group_offsets = offsets_;
    g.n_groups = E;
    g.max_group_rows = n; // top-k experts are distinct: an expert takes each token at most once
    cuda_check(kernels::gemm_bf16_grouped(g, stream_), "expert gate+up");
    cuda_check(kernels::swiglu(e_gu_, egu_w_, I, e_act_, nullptr, eact_w_, pairs, stream_), "expert SwiGLU");
    g.a = e_act_;
    g.lda = eact_w_;
    g.b = weights_bf16(m.experts_down.view);
    g.ldb = I;
    g.b_group_stride = int64_t(H) * I;
    g.c = e_out_;
    g.ldc = hs_;
    g.n = H;
    g.k = I;
    cuda_check(kernels::gemm_bf16_grouped(g, stream_), "expert down");
    cuda_check(kernels::moe_combine_grouped(e_out_, hs_, position_, route_w_, K, shared_out_, hs_, score_, 8, mix_,
                                            hs_, H, n, stream_), "MoE combine");
}

void PrefillRunner::gdn(const DeviceLayer& L, uint32_t gi, int lane, uint32_t start, int n) {
    const ModelConfig& c = config_;
    const DeviceGdn& w = L.gdn;
    const int64_t kd = c.gdn_key_dim(), cd = c.gdn_conv_dim(), vd = c.gdn_value_dim(), hv = c.linear_num_value_heads;
    if (w.in_proj.view.data) { // [q; k; v; z; a; b] rows in one matrix: one expansion, four GEMMs
        const __nv_bfloat16* wb = weights_bf16(w.in_proj.view);
        const int64_t k = w.in_proj.view.k;
        gemm_rows(wb, k, 0, cd, xn_, hs_, n, qkv_, false, cd_w_);
        gemm_rows(wb, k, cd, vd, xn_, hs_, n, z_, false, vd_w_);
        gemm_rows(wb, k, cd + vd, hv, xn_, hs_, n, a_, true, hv_w_);
        gemm_rows(wb, k, cd + vd + hv, hv, xn_, hs_, n, b_, true, hv_w_);
    } else {
        if (w.qkv.view.data) {
            linear(w.qkv, xn_, hs_, n, qkv_, false, cd_w_);
        } else if (w.qk.view.data) {
            linear(w.qk, xn_, hs_, n, qkv_, false, cd_w_);
        } else {
            linear(w.query, xn_, hs_, n, qkv_, false, cd_w_);
            linear(w.key, xn_, hs_, n, qkv_ + kd, false, cd_w_);
        }
        if (w.vz.view.data) { // [v; z]: one expansion, two GEMMs
            const __nv_bfloat16* wb = weights_bf16(w.vz.view);
            gemm_rows(wb, w.vz.view.k, 0, vd, xn_, hs_, n, qkv_ + 2 * kd, false, cd_w_);
            gemm_rows(wb, w.vz.view.k, vd, vd, xn_, hs_, n, z_, false, vd_w_);
        } else {
            if (w.value.view.data)
                linear(w.value, xn_, hs_, n, qkv_ + 2 * kd, false, cd_w_);
            linear(w.z, xn_, hs_, n, z_, false, vd_w_);
        }
        if (w.ab.view.data) { // [a; b]: one expansion, two GEMMs
            const __nv_bfloat16* wb = weights_bf16(w.ab.view);
            gemm_rows(wb, w.ab.view.k, 0, hv, xn_, hs_, n, a_, true, hv_w_);
            gemm_rows(wb, w.ab.view.k, hv, hv, xn_, hs_, n, b_, true, hv_w_);
        } else {
            linear(w.a, xn_, hs_, n, a_, true, hv_w_);
            linear(w.b, xn_, hs_, n, b_, true, hv_w_);
        }
    }
    kernels::GdnPrefillArgs g;
    g.qkv = qkv_;
    g.qkv_stride = cd_w_;
    g.z = z_;
    g.z_stride = vd_w_;
    g.a_f32 = a_;
    g.b_f32 = b_;
    g.a_stride = hv_w_;
    g.b_stride = hv_w_;
    g.conv_w = w.conv;
    g.conv_state = run_.conv_state(gi);
    g.state = run_.recurrent_state(gi);
    g.slot = lane; // a lane's GDN slot is its index
    g.a_log = w.a_log;
    g.dt_bias = w.dt_bias;
    g.norm_w = w.norm;
    g.y = y_;
    g.y_stride = vd_w_;
    g.n_k_heads = int(c.linear_num_key_heads);
    g.n_v_heads = int(c.linear_num_value_heads);
    g.conv_dim = int(c.gdn_conv_dim());
    g.eps = c.rms_norm_eps;
    g.n_tokens = n;
    g.start_pos = start; // chunked GDN: chunks at absolute multiples of 64, whatever the call split
    g.exact = true;
    g.scratch = scratch_;
    g.scratch_bytes = scratch_bytes_;
    cuda_check(kernels::gdn_prefill(g, stream_), "GDN prefill");
    linear(w.output, y_, vd_w_, n, mix_, true, hs_);
}

void PrefillRunner::attention(const DeviceLayer& L, uint32_t fi, int lane, uint32_t start, int n, bool multimodal) {
    const ModelConfig& c = config_;
    const DeviceAttention& w = L.attention;
    if (w.fused.view.data) { // [query+gate; key; value] rows in one matrix
        const __nv_bfloat16* wb = weights_bf16(w.fused.view);
        const int64_t k = w.fused.view.k, qg = 2 * c.attn_q_dim(), kv = c.attn_kv_dim();
        gemm_rows(wb, k, 0, qg, xn_, hs_, n, qg_, false, qg_w_);
        gemm_rows(wb, k, qg, kv, xn_, hs_, n, k_, false, kv_w_);
        gemm_rows(wb, k, qg + kv, kv, xn_, hs_, n, v_, false, kv_w_);
    } else {
        if (w.query_gate.view.data)
            linear(w.query_gate, xn_, hs_, n, qg_, false, qg_w_);
        else
            query_gate_apart(w, n);
        linear(w.key, xn_, hs_, n, k_, false, kv_w_);
        linear(w.value, xn_, hs_, n, v_, false, kv_w_);
    }
    kernels::AttnPrefillArgs a;
    a.geo = attention_geometry(c);
    a.qg = qg_;
    a.qg_stride = qg_w_;
    a.k = k_;
    a.k_stride = kv_w_;
    a.v = v_;
    a.v_stride = kv_w_;
    a.q_norm = w.query_norm;
    a.k_norm = w.key_norm;
    a.kv = run_.kv_pages(fi);
    a.lane = lane;
    a.start_pos = int(start);
    a.n_tokens = n;
    a.rope_thw = multimodal ? rope_thw_ : nullptr;
    a.rope_offset = run_.rope_offsets();
    a.scratch = scratch_;
    a.scratch_bytes = scratch_bytes_;
    a.out = attn_;
    a.out_stride = q_w_;
    cuda_check(kernels::attn_prefill_prep(a, stream_), "attention prefill prep");
    cuda_check(kernels::attn_prefill(a, stream_), "attention prefill");
    linear(w.output, attn_, q_w_, n, mix_, true, hs_);
}

} // namespace ninfer::core::cuda
