// ninfer tests - writes small Hugging Face Qwen3.5/3.6 checkpoint directories (config, tokenizer,
// safetensors in either key layout, fused or per-expert MoE, optional MTP and vision) and keeps
// every source tensor as f32 so tests can compare an artifact's decoded parameters against it.
#pragma once

#include "core/artifact/artifact.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>
#include <unistd.h>

namespace ninfer::test {

namespace fs = std::filesystem;

struct SourceTensor {
    std::string dtype = "BF16"; // BF16, F16 or F32 (stored); values are exact in that dtype
    std::vector<uint64_t> shape;
    std::vector<float> values;
};

inline std::vector<uint8_t> tensor_bytes(const SourceTensor& t) {
    std::vector<uint8_t> out;
    for (float v : t.values) {
        if (t.dtype == "F32") {
            uint8_t b[4];
            std::memcpy(b, &v, 4);
            out.insert(out.end(), b, b + 4);
        } else {
            uint16_t w = t.dtype == "F16" ? core::f32_to_f16(v) : core::f32_to_bf16(v);
            out.push_back(uint8_t(w));
            out.push_back(uint8_t(w >> 8));
        }
    }
    return out;
}

inline void write_safetensors(const std::string& path, const std::map<std::string, SourceTensor>& tensors) {
    std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
    std::vector<uint8_t> data;
    for (auto& [name, t] : tensors) {
        std::vector<uint8_t> b = tensor_bytes(t);
        header += ",\"" + name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
        for (size_t i = 0; i < t.shape.size(); ++i)
            header += (i ? "," : "") + std::to_string(t.shape[i]);
        header += "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
                  std::to_string(data.size() + b.size()) + "]}";
        data.insert(data.end(), b.begin(), b.end());
    }
    header += "}";
    while (header.size() % 8)
        header += ' ';
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header;
    out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
}

inline std::string read_file_text_for_test(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

struct FixtureOptions {
    bool moe = false;
    bool multimodal = false;    // model.language_model.* keys + Qwen3_5*ForConditionalGeneration
    bool fused_experts = false; // mlp.experts.gate_up_proj / down_proj
    bool mtp = false;
    bool vision = false;
    int shards = 1;
    std::string dtype = "BF16";
    uint64_t vocab = 320;
    uint64_t special_base = 300; // ids of the added tokens
    uint32_t seed = 7;
};

// Dimensions: small, but with GQA group 2, 4 GDN value heads over 2 key heads, value head dim
// (24) != key head dim (16), partial rotary, every K a multiple of 32.
struct Fixture {
    static constexpr uint64_t H = 64, L = 4, NQ = 4, NKV = 2, D = 32, HK = 2, DK = 16, HV = 4, DV = 24,
                              TAPS = 4, I = 96, E = 4, MI = 32, SI = 48, VH = 32, VI = 64, VDEPTH = 1,
                              PATCH = 4, TPATCH = 2, MERGE = 2, VOUT = H, NPOS = 16;
    FixtureOptions opt;
    std::string dir;
    std::map<std::string, SourceTensor> tensors; // HF key -> values

    std::string text_prefix() const { return opt.multimodal ? "model.language_model." : "model."; }
    const std::vector<float>& at(const std::string& key) const { return tensors.at(key).values; }
};

inline std::string fixture_config_json(const FixtureOptions& o, uint64_t vocab) {
    using F = Fixture;
    std::string text = std::string("{\"model_type\":\"") + (o.moe ? "qwen3_5_moe_text" : "qwen3_5_text") +
                       "\",\"vocab_size\":" + std::to_string(vocab) + ",\"hidden_size\":64,\"num_hidden_layers\":4," +
                       "\"layer_types\":[\"linear_attention\",\"linear_attention\",\"linear_attention\",\"full_attention\"]," +
                       "\"rms_norm_eps\":1e-06,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":32," +
                       "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000.0,\"partial_rotary_factor\":0.25," +
                       "\"mrope_section\":[2,1,1],\"mrope_interleaved\":true},\"linear_num_key_heads\":2," +
                       "\"linear_key_head_dim\":16,\"linear_num_value_heads\":4,\"linear_value_head_dim\":24," +
                       "\"linear_conv_kernel_dim\":4,\"tie_word_embeddings\":false,\"mtp_num_hidden_layers\":1," +
                       (o.moe ? "\"num_experts\":4,\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,"
                                "\"shared_expert_intermediate_size\":48"
                              : "\"intermediate_size\":96") +
                       "}";
    if (!o.multimodal)
        return std::string("{\"architectures\":[\"") + (o.moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM") +
               "\"]," + text.substr(1);
    std::string vision = "{\"model_type\":\"qwen3_5_vision\",\"depth\":" + std::to_string(F::VDEPTH) +
                         ",\"hidden_size\":" + std::to_string(F::VH) + ",\"intermediate_size\":" + std::to_string(F::VI) +
                         ",\"num_heads\":2,\"patch_size\":4,\"temporal_patch_size\":2,\"spatial_merge_size\":2," +
                         "\"num_position_embeddings\":16,\"out_hidden_size\":64,\"in_channels\":3}";
    return std::string("{\"architectures\":[\"") +
           (o.moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration") +
           "\"],\"model_type\":\"" + (o.moe ? "qwen3_5_moe" : "qwen3_5") + "\",\"text_config\":" + text +
           ",\"vision_config\":" + vision + "}";
}

inline void write_tokenizer_files(const fs::path& dir, uint64_t special_base, bool with_tokenizer_json = true) {
    auto id = [&](int k) { return std::to_string(special_base + k); };
    if (with_tokenizer_json)
        write_text(dir / "tokenizer.json",
                   "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":" + id(0) +
                       ",\"content\":\"<|endoftext|>\",\"special\":true},{\"id\":" + id(1) +
                       ",\"content\":\"<|im_start|>\",\"special\":true},{\"id\":" + id(2) +
                       ",\"content\":\"<|im_end|>\",\"special\":true}],\"model\":{\"type\":\"BPE\","
                       "\"vocab\":{\"a\":0,\"b\":1,\"c\":2},\"merges\":[]}}");
    write_text(dir / "tokenizer_config.json",
               "{\"eos_token\":\"<|im_end|>\",\"pad_token\":\"<|endoftext|>\",\"chat_template\":\"{% for m in "
               "messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}<|im_end|>\\n{% endfor %}\","
               "\"added_tokens_decoder\":{\"" + id(0) + "\":{\"content\":\"<|endoftext|>\",\"special\":true}}}");
    write_text(dir / "generation_config.json", "{\"eos_token_id\":[" + id(2) + "," + id(0) + "]}");
}

// Builds every HF tensor of the options' layout with seeded values exact in opt.dtype.
inline Fixture make_hf_checkpoint(const std::string& dir, const FixtureOptions& o) {
    using F = Fixture;
    Fixture f;
    f.opt = o;
    f.dir = dir;
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::mt19937 rng(o.seed);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    auto add = [&](const std::string& key, std::vector<uint64_t> shape, float offset = 0) {
        SourceTensor t;
        t.dtype = o.dtype;
        t.shape = shape;
        uint64_t n = 1;
        for (uint64_t d : shape)
            n *= d;
        for (uint64_t i = 0; i < n; ++i) {
            float v = offset + normal(rng);
            // Round to the stored dtype so the stored value is the reference value.
            v = o.dtype == "F32" ? v : o.dtype == "F16" ? core::f16_to_f32(core::f32_to_f16(v))
                                                        : core::bf16_to_f32(core::f32_to_bf16(v));
            t.values.push_back(v);
        }
        f.tensors[key] = std::move(t);
    };
    const std::string tp = f.text_prefix();
    add(tp + "embed_tokens.weight", {o.vocab, F::H});
    add(tp + "norm.weight", {F::H});
    add("lm_head.weight", {o.vocab, F::H});
    auto ffn = [&](const std::string& k) {
        if (!o.moe) {
            add(k + "mlp.gate_proj.weight", {F::I, F::H});
            add(k + "mlp.up_proj.weight", {F::I, F::H});
            add(k + "mlp.down_proj.weight", {F::H, F::I});
            return;
        }
        add(k + "mlp.gate.weight", {F::E, F::H});
        add(k + "mlp.shared_expert_gate.weight", {1, F::H});
        add(k + "mlp.shared_expert.gate_proj.weight", {F::SI, F::H});
        add(k + "mlp.shared_expert.up_proj.weight", {F::SI, F::H});
        add(k + "mlp.shared_expert.down_proj.weight", {F::H, F::SI});
        if (o.fused_experts) {
            add(k + "mlp.experts.gate_up_proj", {F::E, 2 * F::MI, F::H});
            add(k + "mlp.experts.down_proj", {F::E, F::H, F::MI});
        } else {
            for (uint64_t e = 0; e < F::E; ++e) {
                std::string ek = k + "mlp.experts." + std::to_string(e) + ".";
                add(ek + "gate_proj.weight", {F::MI, F::H});
                add(ek + "up_proj.weight", {F::MI, F::H});
                add(ek + "down_proj.weight", {F::H, F::MI});
            }
        }
    };
    auto attention = [&](const std::string& k) {
        add(k + "self_attn.q_proj.weight", {2 * F::NQ * F::D, F::H});
        add(k + "self_attn.k_proj.weight", {F::NKV * F::D, F::H});
        add(k + "self_attn.v_proj.weight", {F::NKV * F::D, F::H});
        add(k + "self_attn.o_proj.weight", {F::H, F::NQ * F::D});
        add(k + "self_attn.q_norm.weight", {F::D});
        add(k + "self_attn.k_norm.weight", {F::D});
    };
    for (uint64_t l = 0; l < F::L; ++l) {
        std::string k = tp + "layers." + std::to_string(l) + ".";
        add(k + "input_layernorm.weight", {F::H});
        add(k + "post_attention_layernorm.weight", {F::H});
        if (l == 3) {
            attention(k);
        } else {
            const uint64_t conv = 2 * F::HK * F::DK + F::HV * F::DV;
            add(k + "linear_attn.in_proj_qkv.weight", {conv, F::H});
            add(k + "linear_attn.in_proj_z.weight", {F::HV * F::DV, F::H});
            add(k + "linear_attn.in_proj_a.weight", {F::HV, F::H});
            add(k + "linear_attn.in_proj_b.weight", {F::HV, F::H});
            add(k + "linear_attn.conv1d.weight", {conv, 1, F::TAPS});
            add(k + "linear_attn.A_log", {F::HV}, 1.0f);
            add(k + "linear_attn.dt_bias", {F::HV}, 1.0f);
            add(k + "linear_attn.norm.weight", {F::DV}, 1.0f);
            add(k + "linear_attn.out_proj.weight", {F::H, F::HV * F::DV});
        }
        ffn(k);
    }
    if (o.mtp) {
        add("mtp.fc.weight", {F::H, 2 * F::H});
        add("mtp.pre_fc_norm_embedding.weight", {F::H});
        add("mtp.pre_fc_norm_hidden.weight", {F::H});
        add("mtp.norm.weight", {F::H});
        add("mtp.layers.0.input_layernorm.weight", {F::H});
        add("mtp.layers.0.post_attention_layernorm.weight", {F::H});
        attention("mtp.layers.0.");
        ffn("mtp.layers.0.");
    }
    if (o.vision) {
        const std::string v = "model.visual.";
        add(v + "patch_embed.proj.weight", {F::VH, 3, F::TPATCH, F::PATCH, F::PATCH});
        add(v + "patch_embed.proj.bias", {F::VH});
        add(v + "pos_embed.weight", {F::NPOS, F::VH});
        for (uint64_t b = 0; b < F::VDEPTH; ++b) {
            std::string k = v + "blocks." + std::to_string(b) + ".";
            add(k + "attn.qkv.weight", {3 * F::VH, F::VH});
            add(k + "attn.qkv.bias", {3 * F::VH});
            add(k + "attn.proj.weight", {F::VH, F::VH});
            add(k + "attn.proj.bias", {F::VH});
            add(k + "mlp.linear_fc1.weight", {F::VI, F::VH});
            add(k + "mlp.linear_fc1.bias", {F::VI});
            add(k + "mlp.linear_fc2.weight", {F::VH, F::VI});
            add(k + "mlp.linear_fc2.bias", {F::VH});
            for (const char* n : {"norm1", "norm2"}) {
                add(k + n + ".weight", {F::VH}, 1.0f);
                add(k + n + ".bias", {F::VH});
            }
        }
        const uint64_t m = F::VH * F::MERGE * F::MERGE;
        add(v + "merger.norm.weight", {F::VH}, 1.0f);
        add(v + "merger.norm.bias", {F::VH});
        add(v + "merger.linear_fc1.weight", {m, m});
        add(v + "merger.linear_fc1.bias", {m});
        add(v + "merger.linear_fc2.weight", {F::VOUT, m});
        add(v + "merger.linear_fc2.bias", {F::VOUT});
    }

    write_text(fs::path(dir) / "config.json", fixture_config_json(o, o.vocab));
    write_tokenizer_files(dir, o.special_base);
    if (o.shards <= 1) {
        write_safetensors((fs::path(dir) / "model.safetensors").string(), f.tensors);
        return f;
    }
    std::vector<std::map<std::string, SourceTensor>> shards(o.shards);
    std::string index = "{\"metadata\":{},\"weight_map\":{";
    int i = 0;
    for (auto& [name, t] : f.tensors) {
        int s = i++ % o.shards;
        shards[s][name] = t;
        char file[64];
        std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, o.shards);
        index += std::string(i > 1 ? "," : "") + "\"" + name + "\":\"" + file + "\"";
    }
    write_text(fs::path(dir) / "model.safetensors.index.json", index + "}}");
    for (int s = 0; s < o.shards; ++s) {
        char file[64];
        std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, o.shards);
        write_safetensors((fs::path(dir) / file).string(), shards[s]);
    }
    return f;
}

// A logical parameter of an artifact decoded to f32, pieces concatenated.
inline std::vector<float> decode_parameter(const core::Artifact& a, const std::string& name) {
    const core::WeightBinding& b = a.binding(name);
    std::vector<float> out;
    for (const core::WeightPiece& p : b.pieces) {
        const core::StoredTensor& t = *p.tensor;
        size_t at = out.size();
        out.resize(at + (p.elem_end - p.elem_begin));
        if (core::format_is_direct(t.format)) {
            core::decode_elements(t, p.elem_begin, p.elem_end, out.data() + at);
        } else {
            uint64_t k = t.shape.back();
            core::decode_rows(t, p.elem_begin / k, (p.elem_end - p.elem_begin) / k, out.data() + at);
        }
    }
    return out;
}

inline fs::path temp_root() {
    return fs::temp_directory_path() / ("ninfer-test-convert-" + std::to_string(::getpid()));
}

// Removes this process's temp files when the test executable exits.
struct TempRootCleanup {
    ~TempRootCleanup() {
        std::error_code ec;
        fs::remove_all(temp_root(), ec);
    }
};
inline TempRootCleanup temp_root_cleanup;

inline std::string temp_dir(const std::string& name) {
    fs::path p = temp_root() / name;
    fs::create_directories(p.parent_path());
    return p.string();
}

} // namespace ninfer::test
