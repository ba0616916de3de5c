// ninfer::core - CUDA runner forward pass: buffers planned at start, one step enqueued per call.
#include "core/cuda/cuda_runner.h"

#include "core/cuda/multimodal_rows.h"
#include "core/util/error.h"
#include "ninfer/kernels/attention_decode.h"
#include "ninfer/kernels/gdn_decode.h"
#include "ninfer/kernels/runner_ops.h"

#include <algorithm>
#include <cstdlib>

namespace ninfer::core::cuda {

namespace {

void require(bool ok, const std::string& what) {
    if (!ok)
        throw Error("cuda: the CUDA kernels do not cover this model: " + what);
}

void check_geometry(const ModelConfig& c, const MemoryPlan& plan) {
    require(c.head_dim == 256, "attention head_dim is " + std::to_string(c.head_dim) + ", need 256");
    require(c.num_key_value_heads >= 1 && c.num_attention_heads % c.num_key_value_heads == 0 &&
                c.num_attention_heads / c.num_key_value_heads <= 8, "GQA group must divide and be <= 8");
    require(c.rotary_dim() % 2 == 0 && c.rotary_dim() <= c.head_dim, "rotary dims must be even and <= 256");
    if (c.n_linear_attention_layers() > 0) {
        require(c.linear_key_head_dim == 128 && c.linear_value_head_dim == 128,
                "GDN head dims are " + std::to_string(c.linear_key_head_dim) + "/" +
                    std::to_string(c.linear_value_head_dim) + ", need 128/128");
        require(c.linear_conv_kernel_dim == 4, "GDN conv kernel must be 4");
        require(c.linear_num_value_heads % c.linear_num_key_heads == 0, "GDN value heads must be a multiple of key heads");
    }
    require(c.hidden_size % 16 == 0, "hidden_size must be a multiple of 16");
    if (c.is_moe()) {
        require(c.moe_intermediate_size % 16 == 0 && c.shared_expert_intermediate_size % 16 == 0,
                "expert widths must be multiples of 16");
        require(c.num_experts <= 1024 && c.num_experts_per_tok <= 32, "at most 1024 experts, top-k <= 32");
    } else {
        require(c.intermediate_size % 16 == 0, "intermediate_size must be a multiple of 16");
    }
    require(plan.kv_dtype != KvDtype::F32, "KV dtype must be bf16, fp8 or int8 (f32 is the CPU reference's)");
}

} // namespace

kernels::AttnGeometry attention_geometry(const ModelConfig& c) {
    kernels::AttnGeometry geo;
    geo.n_heads = int(c.num_attention_heads);
    geo.n_kv_heads = int(c.num_key_value_heads);
    geo.head_dim = int(c.head_dim);
    geo.rotary_dim = int(c.rotary_dim());
    geo.rope_theta = float(c.rope_theta);
    geo.eps = c.rms_norm_eps;
    geo.exact = true;
    if (c.mrope_section.size() >= 3) {
        for (int i = 0; i < 3; ++i) geo.mrope_section[i] = int(c.mrope_section[size_t(i)]);
        geo.mrope_interleaved = c.mrope_interleaved;
    }
    return geo;
}

namespace {
// Who quantises x for the int8 route (the same bytes either way, so a token's bits do not depend
// on it): the GEMV blocks at batch 1, where it hides in the weights' first-load latency; the norm
// and SwiGLU kernels, once, at batch 2..8, where every GEMV block quantising 8 tokens' x cost more
// than the int8 route saved (kernels/PERF_NOTES.md "W4A8").
bool producer_writes_int8_x(int n_tokens) { return n_tokens >= 2; }
// Clears a flag however the scope ends: a cuda_check that throws inside enqueue_forward or ffn must
// not leave x8_now_ / act8_live_ set, or a later linear() (the head after a prefill's stage_rows,
// the MoE shared expert's down projection) would attach int8 rows written for other x.
struct ClearOnExit {
    bool& flag;
    ~ClearOnExit() { flag = false; }
};
} // namespace

Runner::Runner(const ModelWeights& weights, const MemoryPlan& plan, bool f32_activations)
    : config_(weights.config), plan_(plan), f32_(f32_activations) {
    const ModelConfig& c = config_;
    check_geometry(c, plan);
    // The f32-activation check mode reads projections in the stored layout (gemv_f32x).
    model_ = DeviceModel::upload(weights, arena_, /*tiled=*/!f32_activations, plan.mtp,
                                 /*f32_vectors=*/f32_activations);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the stream");
    const int B = kMaxStepTokens;
    hs_ = pad8(c.hidden_size);
    logits_stride_ = pad8(c.vocab_size);
    max_pages_ = int((plan.max_context + kKvPageTokens - 1) / kKvPageTokens);
    step_in_ = arena_.alloc_n<int32_t>(3 * B, "step inputs");
    cuda_check(cudaMemset(step_in_, 0, 3 * B * sizeof(int32_t)), "clearing step inputs");
    page_table_ = arena_.alloc_n<int32_t>(uint64_t(plan.n_lanes) * max_pages_, "page tables");
    cuda_check(cudaMemset(page_table_, 0, uint64_t(plan.n_lanes) * max_pages_ * 4), "clearing page tables");
    rope_offsets_ = arena_.alloc_n<int32_t>(plan.n_lanes, "RoPE offsets");
    cuda_check(cudaMemset(rope_offsets_, 0, plan.n_lanes * sizeof(int32_t)), "clearing RoPE offsets");
    step_rope_ = arena_.alloc_n<int32_t>(3 * B, "step M-RoPE positions");
    x_ = arena_.alloc_n<float>(B * hs_, "residual");
    mix_ = arena_.alloc_n<float>(B * hs_, "mixer output");
    xn_ = arena_.alloc_n<__nv_bfloat16>(B * hs_, "normed rows");
    xn32_ = arena_.alloc_n<float>(B * hs_, "normed rows (f32)");
    xn_lo_ = arena_.alloc_n<__nv_bfloat16>(B * hs_, "normed rows (low halves)");
    // Segments at multiples of 8 elements (16 bytes, gemv.h): q_dim and kv_dim are head_dim multiples.
    qgkv_w_ = pad8(2 * c.attn_q_dim() + 2 * c.attn_kv_dim());
    q_w_ = pad8(c.attn_q_dim());
    qg_ = arena_.alloc_n<__nv_bfloat16>(B * qgkv_w_, "query+gate+key+value");
    k_ = qg_ + 2 * c.attn_q_dim();
    v_ = k_ + c.attn_kv_dim();
    for (const DeviceLayer& L : model_.layers)
        if (L.kind == LayerKind::FullAttention && !L.attention.fused.view.data && !L.attention.query_gate.view.data &&
            !q_sep_) {
            require(q_w_ == int64_t(c.attn_q_dim()), "query rows must be 8-aligned");
            q_sep_ = arena_.alloc_n<__nv_bfloat16>(2 * B * q_w_, "query, gate");
        }
    q_ = arena_.alloc_n<__nv_bfloat16>(B * q_w_, "queries");
    attn_ = arena_.alloc_n<__nv_bfloat16>(B * q_w_, "attention output");
    attn_scratch_floats_ = kernels::attn_decode_scratch_floats(B, int(c.num_attention_heads), int(plan.max_context));
    attn_scratch_ = arena_.alloc_n<float>(attn_scratch_floats_, "attention scratch");
    cd_w_ = pad8(c.gdn_conv_dim());
    vd_w_ = pad8(c.gdn_value_dim());
    qkvz_w_ = pad8(c.gdn_conv_dim() + c.gdn_value_dim());
    ab_w_ = 2 * pad8(c.linear_num_value_heads);
    qkv_ = arena_.alloc_n<__nv_bfloat16>(B * qkvz_w_, "GDN qkv+z");
    z_ = qkv_ + c.gdn_conv_dim(); // where the fused projection's z rows land
    conv_out_ = arena_.alloc_n<__nv_bfloat16>(B * cd_w_, "GDN conv output");
    a_ = arena_.alloc_n<float>(B * ab_w_, "GDN a+b");
    y_ = arena_.alloc_n<__nv_bfloat16>(B * vd_w_, "GDN output");
    const int64_t inter = c.is_moe() ? c.shared_expert_intermediate_size : c.intermediate_size;
    gu_w_ = pad8(2 * inter);
    act_w_ = pad8(inter);
    gate_up_ = arena_.alloc_n<float>(B * gu_w_, "gate+up");
    act_ = arena_.alloc_n<__nv_bfloat16>(B * act_w_, "SwiGLU output");
    act32_ = arena_.alloc_n<float>(B * act_w_, "SwiGLU output (f32)");
    act_lo_ = arena_.alloc_n<__nv_bfloat16>(B * act_w_, "SwiGLU output (low halves)");
    if (q4_int8_x() && B <= kernels::kGemvMaxTokens) {
        auto int8_rows = [&](int64_t k, const char* what) {
            kernels::Int8X r;
            r.row_bytes = kernels::int8_x_units(k) * 64;
            r.q = arena_.alloc_n<uint8_t>(size_t(kernels::kGemvMaxTokens * r.row_bytes), what);
            r.d = arena_.alloc_n<float>(size_t(kernels::int8_x_units(k) * 8), what);
            return r;
        };
        // The normed rows' consumers (k = hidden_size) are on the ring, so on the int8 route, only
        // above kGemvRegisterMaxK (the 27B's 5120, not the 35B-A3B's 2048); add_rmsnorm writes int8
        // rows up to kAddRmsnormInt8MaxDim wide (wider: the GEMVs quantise, as at batch 1).
        if (c.hidden_size % 16 == 0 && int64_t(c.hidden_size) > kernels::kGemvRegisterMaxK &&
            c.hidden_size <= uint32_t(kernels::kAddRmsnormInt8MaxDim))
            xn8_ = int8_rows(c.hidden_size, "normed rows (int8)");
        if (inter % 16 == 0) act8_ = int8_rows(inter, "SwiGLU output (int8)");
    }
    if (c.is_moe()) {
        if (!model_.layers.empty() && !model_.layers[0].moe.shared.gate_up.view.data)
            throw Error("cuda: the CUDA kernels do not cover this model: the shared expert's gate and up must share "
                        "a format");
        const int E = int(c.num_experts), K = int(c.num_experts_per_tok);
        moe_.logits = arena_.alloc_n<float>(kernels::moe_decode_logits_floats(E), "router logits");
        moe_.ids = arena_.alloc_n<int32_t>(B * K, "routed experts");
        moe_.weights = arena_.alloc_n<float>(B * (K + 1), "routing weights");
        moe_.work = arena_.alloc_n<int32_t>(kernels::moe_decode_work_ints(E, K), "expert work list");
        moe_.act = arena_.alloc_n<float>(
            kernels::moe_decode_act_floats(K, c.moe_intermediate_size, c.shared_expert_intermediate_size, c.hidden_size),
            "expert SwiGLU");
        moe_.counter = arena_.alloc_n<uint32_t>(1, "routing counter");
        cuda_check(cudaMemset(moe_.counter, 0, 4), "clearing the routing counter");
        if (needs_generic_moe())
            alloc_generic_moe();
    }
    logits_ = arena_.alloc_n<float>(B * logits_stride_, "step logits");
    lane_logits_ = arena_.alloc_n<float>(uint64_t(plan.n_lanes) * logits_stride_, "lane logits");
    scratch_.n_floats = kernels::gemv_scratch_floats(model_.max_rows);
    scratch_.n_counters = kernels::gemv_scratch_counters(model_.max_rows);
    scratch_.partials = arena_.alloc_n<float>(scratch_.n_floats, "GEMV split-K partials");
    scratch_.counters = arena_.alloc_n<uint32_t>(scratch_.n_counters, "GEMV split-K counters");
    cuda_check(cudaMemset(scratch_.counters, 0, scratch_.n_counters * 4), "clearing GEMV counters");
    for (uint32_t f = 0; f < c.n_full_attention_layers() + (has_mtp() ? 1 : 0); ++f) { // the MTP layer's last
        kv_k_.push_back(arena_.alloc_n<uint8_t>(uint64_t(plan.kv_pages) * kv_page_bytes(), "KV pool (K)"));
        kv_v_.push_back(arena_.alloc_n<uint8_t>(uint64_t(plan.kv_pages) * kv_page_bytes(), "KV pool (V)"));
    }
    for (uint32_t g = 0; g < c.n_linear_attention_layers() && !f32_; ++g) {
        conv_.push_back(arena_.alloc_n<__nv_bfloat16>(plan.n_lanes * conv_elems_per_lane(), "GDN conv state"));
        cuda_check(cudaMemset(conv_.back(), 0, plan.n_lanes * conv_elems_per_lane() * 2), "clearing GDN state");
    }
    for (uint32_t g = 0; g < c.n_linear_attention_layers(); ++g) {
        recurrent_.push_back(arena_.alloc_n<float>(plan.n_lanes * recurrent_floats_per_lane(), "GDN state"));
        cuda_check(cudaMemset(recurrent_.back(), 0, plan.n_lanes * recurrent_floats_per_lane() * 4), "clearing GDN state");
    }
    if (has_mtp()) // before the f32 mixers, which mirror q_sep_
        alloc_mtp();
    if (f32_)
        alloc_f32_mixers();
    cuda_check(cudaDeviceSynchronize(), "finishing the upload");
}

Runner::~Runner() {
    if (stream_)
        cudaStreamDestroy(stream_);
}

uint64_t Runner::kv_page_bytes() const {
    return kernels::kv_page_bytes(kernel_kv_dtype(plan_.kv_dtype), int(config_.num_key_value_heads), int(config_.head_dim));
}
uint64_t Runner::conv_elems_per_lane() const {
    return uint64_t(config_.linear_conv_kernel_dim - 1) * config_.gdn_conv_dim();
}
uint64_t Runner::recurrent_floats_per_lane() const {
    return uint64_t(config_.linear_num_value_heads) * config_.linear_key_head_dim * config_.linear_value_head_dim;
}

void Runner::linear(const DeviceLinear& w, const __nv_bfloat16* x, const __nv_bfloat16* x_lo, const float* x32,
                    int64_t x_stride, int n, void* y, bool y_fp32, int64_t y_stride, float* y_tail, int64_t tail_row0,
                    int64_t tail_stride) {
    if (f32_ && x32) {
        if (y_tail)
            throw Error("cuda: f32-activation mode has no fused projections");
        cuda_check(kernels::gemv_f32x(w.view, x32, x_stride, n, y, y_fp32, y_stride, stream_), "f32 gemv");
        return;
    }
    kernels::GemvArgs a;
    a.w = w.view;
    a.x = x;
    a.x_lo = w.view.layout == kernels::WeightLayout::Tiled ? x_lo : nullptr;
    a.n_tokens = n;
    a.x_stride = x_stride;
    a.y = y;
    a.y_fp32 = y_fp32;
    a.y_stride = y_stride;
    a.y_tail = y_tail;
    a.tail_row0 = tail_row0;
    a.y_tail_stride = tail_stride;
    a.scratch = scratch_;
    a.x_int8 = q4_int8_x();
    if (x8_now_ && x == xn_ && x_lo == xn_lo_) a.x8 = xn8_; // written by the norm that wrote x
    else if (act8_live_ && x == act_ && x_lo == act_lo_) a.x8 = act8_;
    cuda_check(kernels::gemv(a, stream_), "gemv");
}

bool Runner::runs_int8(const DeviceLinear& w, int n) const {
    kernels::GemvArgs a;
    a.w = w.view;
    a.n_tokens = n;
    a.scratch = scratch_;
    a.x_int8 = q4_int8_x();
    return kernels::gemv_runs_int8_x(a);
}

void Runner::enqueue_forward(int n, bool one_lane, const PrefillInputs* multimodal) {
    const ModelConfig& c = config_;
    const float eps = c.rms_norm_eps;
    x8_now_ = xn8_.q && producer_writes_int8_x(n);
    const ClearOnExit clear_x8{x8_now_};
    const kernels::Int8X xn8 = x8_now_ ? xn8_ : kernels::Int8X{};
    cuda_check(kernels::embed_rows(model_.embedding.view, step_in_, n, x_, hs_, stream_), "embedding");
    step_rope_now_ = multimodal != nullptr;
    const ClearOnExit clear_rope{step_rope_now_};
    if (multimodal) {
        enqueue_embedding_rows(*multimodal, c.hidden_size, x_, hs_, stream_);
        enqueue_rope_positions(multimodal->positions, step_rope_, stream_);
    }
    uint32_t full = 0, gdn_index = 0;
    for (uint32_t l = 0; l < c.num_hidden_layers; ++l) {
        const DeviceLayer& L = model_.layers[l];
        cuda_check(kernels::add_rmsnorm(x_, hs_, l == 0 ? nullptr : mix_, hs_, L.input_norm, xn_, hs_, xn32_, n,
                                        int(c.hidden_size), eps, stream_, xn_lo_, xn8), "input norm");
        if (L.kind == LayerKind::FullAttention)
            attention(L, full++, n);
        else
            gdn(L, gdn_index++, n, one_lane);
        cuda_check(kernels::add_rmsnorm(x_, hs_, mix_, hs_, L.post_attention_norm, xn_, hs_, xn32_, n,
                                        int(c.hidden_size), eps, stream_, xn_lo_, xn8), "post-attention norm");
        ffn(L, n);
    }
    x8_now_ = false; // the head (enqueue_head) may read rows that another path wrote into xn_
    cuda_check(kernels::add_rmsnorm(x_, hs_, mix_, hs_, model_.final_norm, xn_, hs_, xn32_, n, int(c.hidden_size), eps,
                                    stream_, xn_lo_), "final norm");
}

void Runner::enqueue_head(int row, int n) {
    linear(model_.output_head, xn_ + row * hs_, xn_lo_ + row * hs_, xn32_ + row * hs_, hs_, n, logits_, true,
           logits_stride_);
}

void Runner::attention(const DeviceLayer& L, uint32_t fi, int n) {
    if (f32_) {
        attention_f32(L, fi, n);
        return;
    }
    const ModelConfig& c = config_;
    const DeviceAttention& w = L.attention;
    if (w.fused.view.data) {
        linear(w.fused, xn_, xn_lo_, xn32_, hs_, n, qg_, false, qgkv_w_);
    } else {
        if (w.query_gate.view.data)
            linear(w.query_gate, xn_, xn_lo_, xn32_, hs_, n, qg_, false, qgkv_w_);
        else
            query_gate_apart(w, n);
        linear(w.key, xn_, xn_lo_, xn32_, hs_, n, k_, false, qgkv_w_);
        linear(w.value, xn_, xn_lo_, xn32_, hs_, n, v_, false, qgkv_w_);
    }
    const kernels::AttnGeometry geo = attention_geometry(c);
    const kernels::KvPages kv = kv_pages(fi);
    kernels::AttnPrepArgs p;
    p.geo = geo;
    p.qg = qg_;
    p.qg_stride = qgkv_w_;
    p.k = k_;
    p.k_stride = qgkv_w_;
    p.v = v_;
    p.v_stride = qgkv_w_;
    p.q_norm = w.query_norm;
    p.k_norm = w.key_norm;
    p.lanes = step_in_ + kMaxStepTokens;
    p.positions = step_in_ + 2 * kMaxStepTokens;
    p.rope_thw = step_rope_now_ ? step_rope_ : nullptr;
    p.rope_offset = rope_offsets_;
    p.kv = kv;
    p.q_out = q_;
    p.q_out_stride = q_w_;
    p.n_tokens = n;
    cuda_check(kernels::attn_decode_prep(p, stream_), "attention prep");
    kernels::AttnDecodeArgs d;
    d.geo = geo;
    d.q = q_;
    d.q_stride = q_w_;
    d.qg = qg_;
    d.qg_stride = qgkv_w_;
    d.lanes = p.lanes;
    d.positions = p.positions;
    d.kv = kv;
    d.out = attn_;
    d.out_stride = q_w_;
    d.n_tokens = n;
    d.max_context = int(plan_.max_context);
    d.scratch = attn_scratch_;
    d.scratch_floats = attn_scratch_floats_;
    cuda_check(kernels::attn_decode(d, stream_), "attention");
    linear(w.output, attn_, nullptr, nullptr, q_w_, n, mix_, true, hs_);
}

void Runner::gdn(const DeviceLayer& L, uint32_t gi, int n, bool one_lane) {
    if (f32_) {
        gdn_f32(L, gi, n, one_lane);
        return;
    }
    const ModelConfig& c = config_;
    const DeviceGdn& w = L.gdn;
    const int64_t kd = c.gdn_key_dim();
    // b follows a directly in the fused projection's f32 tail; a b GEMV of its own needs a 16-byte
    // aligned start.
    const bool b_follows_a = w.in_proj.view.data || w.ab.view.data;
    float* b = a_ + (b_follows_a ? c.linear_num_value_heads : pad8(c.linear_num_value_heads));
    if (w.in_proj.view.data) {
        // [q; k; v; z] rows land contiguously in qkv_ (z_ = qkv_ + conv_dim), [a; b] in a_ as f32.
        linear(w.in_proj, xn_, xn_lo_, xn32_, hs_, n, qkv_, false, qkvz_w_, a_, c.gdn_conv_dim() + c.gdn_value_dim(),
               ab_w_);
    } else {
        if (w.qkv.view.data) {
            linear(w.qkv, xn_, xn_lo_, xn32_, hs_, n, qkv_, false, qkvz_w_);
        } else if (w.qk.view.data) {
            linear(w.qk, xn_, xn_lo_, xn32_, hs_, n, qkv_, false, qkvz_w_);
        } else {
            linear(w.query, xn_, xn_lo_, xn32_, hs_, n, qkv_, false, qkvz_w_);
            linear(w.key, xn_, xn_lo_, xn32_, hs_, n, qkv_ + kd, false, qkvz_w_);
        }
        if (w.vz.view.data) { // [v; z]: z's rows land at z_ = qkv_ + conv_dim
            linear(w.vz, xn_, xn_lo_, xn32_, hs_, n, qkv_ + 2 * kd, false, qkvz_w_);
        } else {
            if (w.value.view.data)
                linear(w.value, xn_, xn_lo_, xn32_, hs_, n, qkv_ + 2 * kd, false, qkvz_w_);
            linear(w.z, xn_, xn_lo_, xn32_, hs_, n, z_, false, qkvz_w_);
        }
        if (w.ab.view.data) {
            linear(w.ab, xn_, xn_lo_, xn32_, hs_, n, a_, true, ab_w_);
        } else {
            linear(w.a, xn_, xn_lo_, xn32_, hs_, n, a_, true, ab_w_);
            linear(w.b, xn_, xn_lo_, xn32_, hs_, n, b, true, ab_w_);
        }
    }
    // The rows from row 0; a launch over rows [r0, r0 + per) offsets them.
    kernels::GdnConvArgs cv;
    cv.qkv = qkv_;
    cv.qkv_stride = qkvz_w_;
    cv.conv_w = w.conv;
    cv.conv_state = conv_[gi];
    cv.slots = step_in_ + kMaxStepTokens; // a lane's GDN slot is its index
    cv.out = conv_out_;
    cv.out_stride = cd_w_;
    cv.conv_dim = int(c.gdn_conv_dim());
    cv.exact = true;
    kernels::GdnRecurrentArgs r;
    r.conv_out = conv_out_;
    r.conv_stride = cd_w_;
    r.z = z_;
    r.z_stride = qkvz_w_;
    r.a_f32 = a_;
    r.a_stride = ab_w_;
    r.b_f32 = b;
    r.b_stride = ab_w_;
    r.exact = true;
    r.a_log = w.a_log;
    r.dt_bias = w.dt_bias;
    r.norm_w = w.norm;
    r.state = recurrent_[gi];
    r.slots = cv.slots;
    r.y = y_;
    r.y_stride = vd_w_;
    r.n_k_heads = int(c.linear_num_key_heads);
    r.n_v_heads = int(c.linear_num_value_heads);
    r.eps = c.rms_norm_eps;
    // Two launches, not gdn_decode_step's one: the same bits, and faster at every batch size
    // (kernels/PERF_NOTES.md "Session 4 run 5"; the one launch's clusters span a QK head's
    // 2 x n_v/n_k blocks).
    if (gdn_windows_) {
        // Each lane's state was last written by an earlier, synchronised forward (or a rollback
        // copy, a plain launch that has finished before these start), as a decode step's.
        cv.state_settled = r.state_settled = true;
        const kernels::GdnWindows windows = gdn_windows(gi);
        cuda_check(kernels::gdn_conv_window(cv, windows, stream_), "GDN conv (verify windows)");
        cuda_check(kernels::gdn_recurrent_window(r, windows, stream_), "GDN recurrence (verify windows)");
    }
    // One lane's tokens go one at a time (each step reads the state the previous one left).
    for (int i = 0, steps = gdn_windows_ ? 0 : gdn_launches(n, one_lane); i < steps; ++i) {
        const int r0 = one_lane ? i : 0, per = one_lane ? 1 : n;
        kernels::GdnConvArgs cvi = cv;
        cvi.qkv += r0 * qkvz_w_;
        cvi.slots += r0;
        cvi.out += r0 * cd_w_;
        cvi.n_tokens = per;
        kernels::GdnRecurrentArgs ri = r;
        ri.conv_out += r0 * cd_w_;
        ri.z += r0 * qkvz_w_;
        ri.a_f32 += r0 * ab_w_;
        ri.b_f32 += r0 * ab_w_;
        ri.slots += r0;
        ri.y += r0 * vd_w_;
        ri.n_tokens = per;
        // Step 0's slots and state were last written by an earlier, synchronised forward (or a host
        // copy / memset before upload_step's sync); step i > 0 reads what step i - 1 writes.
        cvi.state_settled = ri.state_settled = i == 0;
        cuda_check(kernels::gdn_conv_decode(cvi, stream_), "GDN conv");
        cuda_check(kernels::gdn_recurrent_decode(ri, stream_), "GDN recurrence");
    }
    linear(w.output, y_, nullptr, nullptr, vd_w_, n, mix_, true, hs_);
}

void Runner::ffn(const DeviceLayer& L, int n) {
    const ModelConfig& c = config_;
    if (c.is_moe()) {
        moe(L, n);
        return;
    }
    const DeviceMlp& mlp = L.mlp;
    const int64_t inter = mlp.down.view.k;
    if (mlp.gate_up.view.data) {
        linear(mlp.gate_up, xn_, xn_lo_, xn32_, hs_, n, gate_up_, true, gu_w_);
    } else {
        linear(mlp.gate, xn_, xn_lo_, xn32_, hs_, n, gate_up_, true, gu_w_);
        linear(mlp.up, xn_, xn_lo_, xn32_, hs_, n, gate_up_ + inter, true, gu_w_);
    }
    // SwiGLU writes the int8 rows only for a down projection on the int8 route (one block per row then).
    const kernels::Int8X act8 = x8_now_ && act8_.q && runs_int8(mlp.down, n) ? act8_ : kernels::Int8X{};
    cuda_check(kernels::swiglu(gate_up_, gu_w_, int(inter), act_, act32_, act_w_, n, stream_, act_lo_, act8), "SwiGLU");
    act8_live_ = act8.q != nullptr;
    const ClearOnExit clear_act8{act8_live_};
    linear(mlp.down, act_, act_lo_, act32_, act_w_, n, mix_, true, hs_);
}

// Router, experts and shared expert from the f32 normed rows in three launches (moe_decode.h).
void Runner::moe(const DeviceLayer& L, int n) {
    if (generic_moe_.enabled) {
        moe_generic(L, n);
        return;
    }
    const ModelConfig& c = config_;
    const DeviceMoe& m = L.moe;
    kernels::MoeDecodeArgs a;
    a.w.router = m.router.view;
    a.w.shared_score = m.shared_score.view;
    a.w.experts_gate_up = m.experts_gate_up.view;
    a.w.experts_down = m.experts_down.view;
    a.w.shared_gate_up = m.shared.gate_up.view;
    a.w.shared_down = m.shared.down.view;
    a.w.n_experts = int(c.num_experts);
    a.w.top_k = int(c.num_experts_per_tok);
    a.w.inter = c.moe_intermediate_size;
    a.w.shared_inter = c.shared_expert_intermediate_size;
    a.scratch = moe_;
    a.x = xn32_;
    a.x_stride = hs_;
    a.n_tokens = n;
    a.out = mix_;
    a.out_stride = hs_;
    cuda_check(kernels::moe_decode(a, stream_), "MoE");
}

} // namespace ninfer::core::cuda
