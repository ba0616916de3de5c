// ninfer::core - ModelConfig: parse and write the Hugging Face style text config.
#include "core/model/config.h"

#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <simdjson.h>

#include <cmath>

namespace ninfer::core {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

[[noreturn]] void fail(const std::string& why) { throw Error("config: " + why); }

// Reads an optional unsigned member; `fallback` when absent. Refuses negatives and non-integers.
uint32_t get_u32(const object& o, const char* key, uint32_t fallback) {
    element e;
    if (o[key].get(e) != simdjson::SUCCESS || e.is_null())
        return fallback;
    uint64_t u = 0;
    if (e.get_uint64().get(u) != simdjson::SUCCESS || u > 0xffffffffull)
        fail(std::string(key) + " must be a non-negative integer");
    return uint32_t(u);
}

double get_double(const object& o, const char* key, double fallback) {
    element e;
    if (o[key].get(e) != simdjson::SUCCESS || e.is_null())
        return fallback;
    double d = 0;
    if (e.get_double().get(d) != simdjson::SUCCESS) {
        int64_t i = 0;
        if (e.get_int64().get(i) != simdjson::SUCCESS)
            fail(std::string(key) + " must be a number");
        d = double(i);
    }
    if (!std::isfinite(d))
        fail(std::string(key) + " must be finite");
    return d;
}

bool get_bool(const object& o, const char* key, bool fallback) {
    element e;
    if (o[key].get(e) != simdjson::SUCCESS || e.is_null())
        return fallback;
    bool b = false;
    if (e.get_bool().get(b) != simdjson::SUCCESS)
        fail(std::string(key) + " must be a boolean");
    return b;
}

std::string get_string(const object& o, const char* key) {
    std::string_view s;
    if (o[key].get_string().get(s) != simdjson::SUCCESS)
        return {};
    return std::string(s);
}

void parse_rope(const object& o, ModelConfig& c) {
    // Qwen3.5 keeps RoPE settings in rope_parameters; older configs have them at the top level.
    c.rope_theta = get_double(o, "rope_theta", 10000.0);
    c.partial_rotary_factor = get_double(o, "partial_rotary_factor", 1.0);
    object rope;
    if (o["rope_parameters"].get_object().get(rope) != simdjson::SUCCESS)
        return;
    c.rope_theta = get_double(rope, "rope_theta", c.rope_theta);
    c.partial_rotary_factor = get_double(rope, "partial_rotary_factor", c.partial_rotary_factor);
    c.mrope_interleaved = get_bool(rope, "mrope_interleaved", false);
    simdjson::dom::array section;
    if (rope["mrope_section"].get_array().get(section) == simdjson::SUCCESS) {
        for (element v : section) {
            uint64_t u = 0;
            if (v.get_uint64().get(u) != simdjson::SUCCESS)
                fail("rope_parameters.mrope_section must hold non-negative integers");
            c.mrope_section.push_back(uint32_t(u));
        }
    }
}

void parse_layer_types(const object& o, ModelConfig& c) {
    simdjson::dom::array types;
    if (o["layer_types"].get_array().get(types) == simdjson::SUCCESS) {
        for (element v : types) {
            std::string_view s;
            if (v.get_string().get(s) != simdjson::SUCCESS)
                fail("layer_types must hold strings");
            if (s == "full_attention")
                c.layer_types.push_back(LayerKind::FullAttention);
            else if (s == "linear_attention")
                c.layer_types.push_back(LayerKind::LinearAttention);
            else
                fail("unknown layer type \"" + std::string(s) + "\"");
        }
        return;
    }
    uint32_t interval = get_u32(o, "full_attention_interval", 4);
    if (interval == 0)
        fail("full_attention_interval must be positive");
    for (uint32_t i = 0; i < c.num_hidden_layers; ++i)
        c.layer_types.push_back((i + 1) % interval == 0 ? LayerKind::FullAttention
                                                        : LayerKind::LinearAttention);
}

} // namespace

ModelConfig ModelConfig::from_json(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(json);
    element root;
    if (parser.parse(padded).get(root) != simdjson::SUCCESS)
        fail("invalid JSON");
    object o;
    if (root.get_object().get(o) != simdjson::SUCCESS)
        fail("the configuration must be a JSON object");
    // A multimodal wrapper keeps the text model's settings in text_config.
    object text;
    if (o["text_config"].get_object().get(text) == simdjson::SUCCESS)
        o = text;

    ModelConfig c;
    c.model_type = get_string(o, "model_type");
    if (c.model_type == "qwen3_5_text" || c.model_type == "qwen3_5")
        c.arch = ModelArch::Dense;
    else if (c.model_type == "qwen3_5_moe_text" || c.model_type == "qwen3_5_moe")
        c.arch = ModelArch::Moe;
    else
        fail("unsupported model_type \"" + c.model_type +
             "\" (supported: qwen3_5_text, qwen3_5_moe_text)");
    c.model_type = c.arch == ModelArch::Dense ? "qwen3_5_text" : "qwen3_5_moe_text";

    c.vocab_size = get_u32(o, "vocab_size", 0);
    c.hidden_size = get_u32(o, "hidden_size", 0);
    c.num_hidden_layers = get_u32(o, "num_hidden_layers", 0);
    c.rms_norm_eps = float(get_double(o, "rms_norm_eps", 1e-6));
    c.max_position_embeddings = get_u32(o, "max_position_embeddings", 262144);
    c.tie_word_embeddings = get_bool(o, "tie_word_embeddings", false);
    c.num_attention_heads = get_u32(o, "num_attention_heads", 0);
    c.num_key_value_heads = get_u32(o, "num_key_value_heads", c.num_attention_heads);
    c.head_dim = get_u32(o, "head_dim", c.num_attention_heads ? c.hidden_size / c.num_attention_heads : 0);
    parse_rope(o, c);
    c.linear_num_key_heads = get_u32(o, "linear_num_key_heads", 0);
    c.linear_key_head_dim = get_u32(o, "linear_key_head_dim", 0);
    c.linear_num_value_heads = get_u32(o, "linear_num_value_heads", 0);
    c.linear_value_head_dim = get_u32(o, "linear_value_head_dim", 0);
    c.linear_conv_kernel_dim = get_u32(o, "linear_conv_kernel_dim", 4);
    if (c.arch == ModelArch::Dense) {
        c.intermediate_size = get_u32(o, "intermediate_size", 0);
    } else {
        c.num_experts = get_u32(o, "num_experts", 0);
        c.num_experts_per_tok = get_u32(o, "num_experts_per_tok", 0);
        c.moe_intermediate_size = get_u32(o, "moe_intermediate_size", 0);
        c.shared_expert_intermediate_size = get_u32(o, "shared_expert_intermediate_size", 0);
    }
    parse_layer_types(o, c);
    c.validate();
    return c;
}

void ModelConfig::validate() const {
    auto need = [](bool ok, const char* what) {
        if (!ok)
            fail(what);
    };
    need(vocab_size > 0, "vocab_size must be positive");
    need(hidden_size > 0, "hidden_size must be positive");
    need(num_hidden_layers > 0, "num_hidden_layers must be positive");
    need(layer_types.size() == num_hidden_layers, "layer_types must have num_hidden_layers entries");
    need(rms_norm_eps > 0, "rms_norm_eps must be positive");
    if (n_full_attention_layers() > 0) {
        need(num_attention_heads > 0 && num_key_value_heads > 0 && head_dim > 0,
             "attention heads and head_dim must be positive");
        need(num_attention_heads % num_key_value_heads == 0,
             "num_attention_heads must be a multiple of num_key_value_heads");
        need(partial_rotary_factor > 0 && partial_rotary_factor <= 1,
             "partial_rotary_factor must be in (0, 1]");
        need(rotary_dim() % 2 == 0, "the rotary dimension must be even");
        need(rope_theta > 0, "rope_theta must be positive");
        uint32_t pairs = 0;
        for (uint32_t s : mrope_section)
            pairs += s;
        need(mrope_section.empty() || pairs == rotary_dim() / 2,
             "mrope_section must sum to half the rotary dimension");
    }
    if (n_linear_attention_layers() > 0) {
        need(linear_num_key_heads > 0 && linear_key_head_dim > 0 && linear_num_value_heads > 0 &&
                 linear_value_head_dim > 0 && linear_conv_kernel_dim > 0,
             "linear attention heads, head dims and conv kernel must be positive");
        need(linear_num_value_heads % linear_num_key_heads == 0,
             "linear_num_value_heads must be a multiple of linear_num_key_heads");
    }
    if (arch == ModelArch::Dense) {
        need(intermediate_size > 0, "intermediate_size must be positive");
    } else {
        need(num_experts > 0 && moe_intermediate_size > 0 && shared_expert_intermediate_size > 0,
             "num_experts and expert sizes must be positive");
        need(num_experts_per_tok > 0 && num_experts_per_tok <= num_experts,
             "num_experts_per_tok must be in 1..num_experts");
    }
}

uint32_t ModelConfig::n_full_attention_layers() const {
    uint32_t n = 0;
    for (LayerKind k : layer_types)
        n += k == LayerKind::FullAttention;
    return n;
}

uint32_t ModelConfig::n_linear_attention_layers() const {
    return uint32_t(layer_types.size()) - n_full_attention_layers();
}

std::string ModelConfig::to_json() const {
    // Member order follows the HF text config so the stored config reads like the checkpoint's.
    // rms_norm_eps prints the f32's exact value (9.999999974752427e-07), as upstream configs do.
    JsonWriter w;
    w.begin_object();
    w.member("model_type", model_type);
    w.member("vocab_size", vocab_size).member("hidden_size", hidden_size);
    w.member("num_hidden_layers", num_hidden_layers);
    w.key("layer_types").begin_array();
    for (LayerKind k : layer_types)
        w.value(k == LayerKind::FullAttention ? "full_attention" : "linear_attention");
    w.end_array();
    w.member("rms_norm_eps", double(rms_norm_eps));
    w.member("max_position_embeddings", max_position_embeddings);
    w.member("tie_word_embeddings", tie_word_embeddings);
    w.member("num_attention_heads", num_attention_heads);
    w.member("num_key_value_heads", num_key_value_heads).member("head_dim", head_dim);
    w.key("rope_parameters").begin_object();
    w.member("rope_type", "default").member("rope_theta", rope_theta);
    w.member("partial_rotary_factor", partial_rotary_factor);
    if (!mrope_section.empty()) {
        w.key("mrope_section").begin_array();
        for (uint32_t v : mrope_section)
            w.value(v);
        w.end_array();
        w.member("mrope_interleaved", mrope_interleaved);
    }
    w.end_object();
    w.member("linear_num_key_heads", linear_num_key_heads);
    w.member("linear_key_head_dim", linear_key_head_dim);
    w.member("linear_num_value_heads", linear_num_value_heads);
    w.member("linear_value_head_dim", linear_value_head_dim);
    w.member("linear_conv_kernel_dim", linear_conv_kernel_dim);
    if (arch == ModelArch::Dense) {
        w.member("intermediate_size", intermediate_size);
    } else {
        w.member("num_experts", num_experts).member("num_experts_per_tok", num_experts_per_tok);
        w.member("moe_intermediate_size", moe_intermediate_size);
        w.member("shared_expert_intermediate_size", shared_expert_intermediate_size);
    }
    w.end_object();
    return w.take();
}

} // namespace ninfer::core
