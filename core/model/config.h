// ninfer::core - the text model's configuration: every dimension the model math needs.
//
// Contract:
// - ModelConfig::from_json parses a Hugging Face style text config (the `text_config` object of a
//   Qwen3.5/3.6 checkpoint's config.json, a text-only config.json, or the `config` of an
//   artifact's `text` component; all three use the same member names). Nothing is hard-coded:
//   `layer_types` (else built from `full_attention_interval`, default 4), head counts and dims,
//   `rope_parameters` (`rope_theta`, `partial_rotary_factor`, `mrope_section`), expert counts.
//   Unknown `model_type`: ninfer::Error("config: unsupported model_type X ...").
// - to_json writes the canonical form the converter stores in the artifact's `text` component;
//   from_json(to_json(c)) == c.
// - Derived sizes (key_dim, conv_dim, rotary_dim, ...) are methods so no caller recomputes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

enum class LayerKind : uint8_t { LinearAttention, FullAttention };

enum class ModelArch : uint8_t { Dense, Moe };

struct ModelConfig {
    ModelArch arch = ModelArch::Dense;
    std::string model_type; // "qwen3_5_text" or "qwen3_5_moe_text"
    uint32_t vocab_size = 0;
    uint32_t hidden_size = 0;
    uint32_t num_hidden_layers = 0;
    std::vector<LayerKind> layer_types;
    float rms_norm_eps = 1e-6f;
    uint32_t max_position_embeddings = 0;
    bool tie_word_embeddings = false;

    // Gated full attention.
    uint32_t num_attention_heads = 0;
    uint32_t num_key_value_heads = 0;
    uint32_t head_dim = 0;
    double rope_theta = 10000.0;
    double partial_rotary_factor = 1.0;
    std::vector<uint32_t> mrope_section; // empty = plain 1-D RoPE
    bool mrope_interleaved = false;

    // Gated DeltaNet.
    uint32_t linear_num_key_heads = 0;
    uint32_t linear_key_head_dim = 0;
    uint32_t linear_num_value_heads = 0;
    uint32_t linear_value_head_dim = 0;
    uint32_t linear_conv_kernel_dim = 0;

    // Feed-forward: dense SwiGLU or MoE.
    uint32_t intermediate_size = 0; // dense only
    uint32_t num_experts = 0;       // MoE only
    uint32_t num_experts_per_tok = 0;
    uint32_t moe_intermediate_size = 0;
    uint32_t shared_expert_intermediate_size = 0;

    static ModelConfig from_json(std::string_view json);
    std::string to_json() const;
    void validate() const; // throws ninfer::Error("config: ...") on inconsistent values

    uint32_t n_full_attention_layers() const;
    uint32_t n_linear_attention_layers() const;
    uint32_t rotary_dim() const { return uint32_t(double(head_dim) * partial_rotary_factor); }
    uint32_t attn_q_dim() const { return num_attention_heads * head_dim; }
    uint32_t attn_kv_dim() const { return num_key_value_heads * head_dim; }
    uint32_t gdn_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
    uint32_t gdn_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
    uint32_t gdn_conv_dim() const { return 2 * gdn_key_dim() + gdn_value_dim(); }
    bool is_moe() const { return arch == ModelArch::Moe; }

    bool operator==(const ModelConfig&) const = default;
};

} // namespace ninfer::core
