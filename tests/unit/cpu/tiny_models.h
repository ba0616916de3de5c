// ninfer tests - tiny random Qwen3.5-shaped models with every structural feature (irregular layer
// types with two full-attention layers, GQA group 2, more value heads than key heads, value head
// dim != key head dim, partial rotary, theta 1e7), dense and MoE, and a CPU backend over them.
#pragma once

#include "core/cpu/cpu_backend.h"
#include "core/model/config.h"
#include "core/model/memory_plan.h"
#include "core/model/random_model.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

namespace ninfer::test {

using namespace ninfer::core;

inline ModelConfig tiny_config(bool moe) {
    ModelConfig c;
    c.arch = moe ? ModelArch::Moe : ModelArch::Dense;
    c.model_type = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
    c.vocab_size = 211;
    c.hidden_size = 48;
    c.num_hidden_layers = 5;
    c.layer_types = {LayerKind::LinearAttention, LayerKind::FullAttention, LayerKind::LinearAttention,
                     LayerKind::LinearAttention, LayerKind::FullAttention};
    c.rms_norm_eps = 1e-6f;
    c.max_position_embeddings = 4096;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 32;
    c.rope_theta = 1e7;
    c.partial_rotary_factor = 0.25;
    c.mrope_section = {2, 1, 1};
    c.mrope_interleaved = true;
    c.linear_num_key_heads = 2;
    c.linear_key_head_dim = 16;
    c.linear_num_value_heads = 4;
    c.linear_value_head_dim = 24;
    c.linear_conv_kernel_dim = 4;
    if (moe) {
        c.num_experts = 6;
        c.num_experts_per_tok = 3;
        c.moe_intermediate_size = 16;
        c.shared_expert_intermediate_size = 24;
    } else {
        c.intermediate_size = 64;
    }
    return c;
}

inline MemoryPlan tiny_plan(const ModelConfig& c, int lanes, KvDtype dtype = KvDtype::Bf16,
                            uint32_t max_context = 1024) {
    MemoryRequest r;
    r.max_context = max_context;
    r.max_concurrency = lanes;
    r.kv_dtype = dtype;
    r.available_bytes = 1ull << 32;
    return MemoryPlan::make(c, r);
}

// A plan for speculative decoding: verify windows of up to k + 1 tokens, the MTP layer's KV with mtp.
inline MemoryPlan tiny_speculative_plan(const ModelConfig& c, int lanes, uint32_t k, bool mtp,
                                        KvDtype dtype = KvDtype::F32, uint32_t max_context = 1024) {
    MemoryRequest r;
    r.max_context = max_context;
    r.max_concurrency = lanes;
    r.kv_dtype = dtype;
    r.available_bytes = 1ull << 32;
    r.max_draft_tokens = k;
    r.mtp = mtp;
    return MemoryPlan::make(c, r);
}

inline std::vector<int32_t> random_tokens(size_t n, uint32_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t)
        x = int32_t(rng() % vocab);
    return t;
}

// max |a - b| / max |b|
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::fabs(double(b[i])));
    }
    return scale > 0 ? diff / scale : diff;
}

// Mean over rows of KL(p || q) where p = softmax(ref row), q = softmax(test row).
inline double mean_kl(const std::vector<float>& ref, const std::vector<float>& test, size_t vocab) {
    const size_t rows = ref.size() / vocab;
    double total = 0;
    for (size_t r = 0; r < rows; ++r) {
        std::span<const float> p(ref.data() + r * vocab, vocab), q(test.data() + r * vocab, vocab);
        const double lp = log_sum_exp(p), lq = log_sum_exp(q);
        double kl = 0;
        for (size_t i = 0; i < vocab; ++i) {
            const double a = double(p[i]) - lp, b = double(q[i]) - lq;
            kl += std::exp(a) * (a - b);
        }
        total += kl;
    }
    return total / double(rows);
}

} // namespace ninfer::test
