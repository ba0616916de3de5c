// ninfer tests - ModelConfig parsing: HF text configs, wrappers, defaults, errors, round trip.
#include "core/model/config.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;

static const char* kDense27b = R"({
  "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
  "text_config": {"model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 5120,
    "num_hidden_layers": 8, "intermediate_size": 17408, "num_attention_heads": 24,
    "num_key_value_heads": 4, "head_dim": 256, "rms_norm_eps": 1e-06,
    "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
    "linear_num_value_heads": 48, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": true}}
})";

TEST_CASE("config: 27B-style wrapper config parses with derived sizes", "[config]") {
    ModelConfig c = ModelConfig::from_json(kDense27b);
    CHECK(c.arch == ModelArch::Dense);
    CHECK(c.model_type == "qwen3_5_text");
    CHECK(c.hidden_size == 5120);
    REQUIRE(c.layer_types.size() == 8);
    CHECK(c.layer_types[3] == LayerKind::FullAttention);
    CHECK(c.layer_types[2] == LayerKind::LinearAttention);
    CHECK(c.n_full_attention_layers() == 2);
    CHECK(c.rotary_dim() == 64);
    CHECK(c.rope_theta == 1e7);
    CHECK(c.gdn_conv_dim() == 10240);
    CHECK(c.gdn_value_dim() == 6144);
    CHECK(c.mrope_section == std::vector<uint32_t>{11, 11, 10});
}

TEST_CASE("config: explicit irregular layer_types and MoE fields", "[config]") {
    ModelConfig c = ModelConfig::from_json(R"({"model_type":"qwen3_5_moe_text","vocab_size":100,
      "hidden_size":32,"num_hidden_layers":3,"layer_types":["full_attention","linear_attention","full_attention"],
      "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"linear_num_key_heads":2,
      "linear_key_head_dim":8,"linear_num_value_heads":4,"linear_value_head_dim":12,
      "num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":16,
      "shared_expert_intermediate_size":16,"rope_parameters":{"rope_theta":1e7,"partial_rotary_factor":0.5}})");
    CHECK(c.is_moe());
    CHECK(c.layer_types == std::vector<LayerKind>{LayerKind::FullAttention, LayerKind::LinearAttention,
                                                   LayerKind::FullAttention});
    CHECK(c.gdn_conv_dim() == 2 * 16 + 48);
    CHECK(c.rotary_dim() == 8);
    CHECK(ModelConfig::from_json(c.to_json()) == c);
}

TEST_CASE("config: round trip of the wrapper config", "[config]") {
    ModelConfig c = ModelConfig::from_json(kDense27b);
    CHECK(ModelConfig::from_json(c.to_json()) == c);
    // Exact numbers, as upstream's configs store them (docs/ARTIFACT_FORMAT.md §4.4).
    CHECK_THAT(c.to_json(), Catch::Matchers::Contains("\"rms_norm_eps\":9.999999974752427e-07"));
    CHECK_THAT(c.to_json(), Catch::Matchers::Contains("\"rope_theta\":10000000.0"));
}

TEST_CASE("config: errors name the problem", "[config]") {
    using Catch::Matchers::Contains;
    CHECK_THROWS_WITH(ModelConfig::from_json("{"), Contains("invalid JSON"));
    CHECK_THROWS_WITH(ModelConfig::from_json(R"({"model_type":"llama"})"),
                      Contains("unsupported model_type \"llama\""));
    CHECK_THROWS_WITH(ModelConfig::from_json(R"({"model_type":"qwen3_5_text","vocab_size":-1})"),
                      Contains("vocab_size must be a non-negative integer"));
    CHECK_THROWS_WITH(ModelConfig::from_json(R"({"model_type":"qwen3_5_text","vocab_size":10,
        "hidden_size":8,"num_hidden_layers":2,"layer_types":["full_attention","mamba"]})"),
                      Contains("unknown layer type \"mamba\""));
    CHECK_THROWS_WITH(ModelConfig::from_json(R"({"model_type":"qwen3_5_text","vocab_size":10,
        "hidden_size":8,"num_hidden_layers":1,"layer_types":["full_attention"],"intermediate_size":8,
        "num_attention_heads":3,"num_key_value_heads":2,"head_dim":4})"),
                      Contains("multiple of num_key_value_heads"));
}
