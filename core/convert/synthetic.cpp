// ninfer::core - synthetic artifacts: named shapes and seeded random weights drawn like an init.
#include "core/convert/synthetic.h"

#include "core/artifact/artifact.h"
#include "core/convert/hf_source.h"
#include "core/convert/plan.h"
#include "core/convert/synthetic_fill.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <filesystem>
#include <thread>

namespace ninfer::core {
namespace {

constexpr uint64_t kSyntheticVocab = 151936; // rows of the Qwen3 tokenizer's embedding

ModelConfig base_config(ModelArch arch) {
    ModelConfig c;
    c.arch = arch;
    c.model_type = arch == ModelArch::Dense ? "qwen3_5_text" : "qwen3_5_moe_text";
    c.vocab_size = kSyntheticVocab;
    c.rms_norm_eps = 1e-6f;
    c.max_position_embeddings = 262144;
    c.rope_theta = 1e7;
    c.partial_rotary_factor = 0.25;
    c.mrope_interleaved = true;
    c.linear_conv_kernel_dim = 4;
    return c;
}

void set_layers(ModelConfig& c, uint32_t n) {
    c.num_hidden_layers = n;
    c.layer_types.clear();
    for (uint32_t i = 0; i < n; ++i)
        c.layer_types.push_back((i + 1) % 4 == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
}

} // namespace

std::vector<std::string_view> synthetic_shape_names() {
    return {"tiny", "tiny-moe", "qwen3.6-27b", "qwen3.6-35b-a3b"};
}

ModelConfig synthetic_shape_config(std::string_view shape) {
    if (shape == "tiny" || shape == "tiny-moe") {
        ModelConfig c = base_config(shape == "tiny" ? ModelArch::Dense : ModelArch::Moe);
        c.hidden_size = 64;
        set_layers(c, 4);
        c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 64;
        c.mrope_section = {3, 3, 2};
        c.linear_num_key_heads = 2, c.linear_key_head_dim = 32;
        c.linear_num_value_heads = 4, c.linear_value_head_dim = 48;
        if (c.is_moe())
            c.num_experts = 8, c.num_experts_per_tok = 2, c.moe_intermediate_size = 32,
            c.shared_expert_intermediate_size = 64;
        else
            c.intermediate_size = 128;
        c.validate();
        return c;
    }
    if (shape == "qwen3.6-27b" || shape == "qwen3.6-35b-a3b") {
        bool dense = shape == "qwen3.6-27b";
        ModelConfig c = base_config(dense ? ModelArch::Dense : ModelArch::Moe);
        c.hidden_size = dense ? 5120 : 2048;
        set_layers(c, dense ? 64 : 40);
        c.num_attention_heads = dense ? 24 : 16, c.num_key_value_heads = dense ? 4 : 2, c.head_dim = 256;
        c.mrope_section = {11, 11, 10};
        c.linear_num_key_heads = 16, c.linear_key_head_dim = 128;
        c.linear_num_value_heads = dense ? 48 : 32, c.linear_value_head_dim = 128;
        if (dense)
            c.intermediate_size = 17408;
        else
            c.num_experts = 256, c.num_experts_per_tok = 8, c.moe_intermediate_size = 512,
            c.shared_expert_intermediate_size = 512;
        c.validate();
        return c;
    }
    std::string names;
    for (std::string_view n : synthetic_shape_names())
        names += (names.empty() ? "" : ", ") + std::string(n);
    throw Error("convert: unknown synthetic shape \"" + std::string(shape) + "\" (shapes: " + names + ")");
}

VisionConfig synthetic_shape_vision(std::string_view shape) {
    const ModelConfig text = synthetic_shape_config(shape);
    VisionConfig v;
    v.patch_size = 16, v.temporal_patch_size = 2, v.spatial_merge_size = 2;
    v.out_hidden_size = text.hidden_size;
    if (shape == "tiny" || shape == "tiny-moe")
        v.depth = 2, v.hidden_size = 64, v.intermediate_size = 128, v.num_heads = 4, v.num_position_embeddings = 16;
    else
        v.depth = 27, v.hidden_size = 1152, v.intermediate_size = 4304, v.num_heads = 16, v.num_position_embeddings = 2304;
    v.validate();
    v.config_json = v.to_json();
    return v;
}

// The processor configs the media decoder reads (transformers' Qwen2VLImageProcessor and
// Qwen3VLVideoProcessor with the pixel bounds of docs/MODEL.md §9).
std::vector<std::pair<std::string, std::string>> synthetic_vision_resources(const VisionConfig& v) {
    auto common = [&](JsonWriter& w) {
        w.member("patch_size", v.patch_size).member("temporal_patch_size", v.temporal_patch_size);
        w.member("merge_size", v.spatial_merge_size).member("rescale_factor", 1.0 / 255.0);
        for (const char* key : {"image_mean", "image_std"}) {
            w.key(key).begin_array();
            for (int i = 0; i < 3; ++i)
                w.value(0.5);
            w.end_array();
        }
    };
    JsonWriter image, video;
    image.begin_object().member("image_processor_type", "Qwen2VLImageProcessor");
    common(image);
    image.key("size").begin_object().member("shortest_edge", 65536).member("longest_edge", 16777216).end_object();
    image.end_object();
    video.begin_object().member("video_processor_type", "Qwen3VLVideoProcessor");
    common(video);
    video.key("size").begin_object().member("shortest_edge", 4096).member("longest_edge", 25165824).end_object();
    video.member("fps", 2.0).member("min_frames", 4).member("max_frames", 768);
    video.end_object();
    return {{"preprocessor_config.json", image.take()}, {"video_preprocessor_config.json", video.take()}};
}

uint64_t write_synthetic(const SyntheticRequest& req) {
    ModelConfig config = synthetic_shape_config(req.shape);
    if (req.num_layers) {
        set_layers(config, req.num_layers);
        config.validate();
    }
    PlanOptions options;
    options.with_mtp = req.with_mtp;
    options.with_vision = req.with_vision;
    if (req.with_vision)
        options.vision = synthetic_shape_vision(req.shape);
    const std::vector<PlannedObject> plan = plan_objects(config, options);
    unsigned threads = req.n_threads ? req.n_threads : std::max(1u, std::thread::hardware_concurrency());
    SyntheticFiller filler(req.seed, threads, req.band_bytes);
    if (req.generate_only) {
        uint64_t bytes = 0;
        for (const PlannedObject& o : plan)
            filler.produce(o, req.recipe.format(o.group), [&](uint64_t, std::span<const uint8_t> b) { bytes += b.size(); });
        return bytes;
    }

    EmitRequest e;
    e.out_path = req.out_path;
    e.force = req.force;
    e.config = &config;
    e.plan = &plan;
    e.recipe = &req.recipe;
    const std::string dir = req.tokenizer_dir;
    e.text_resources.tokenizer_json = read_file_text(dir + "/tokenizer.json");
    e.text_resources.tokenizer_config_json = read_file_text(dir + "/tokenizer_config.json");
    e.text_resources.chat_template = chat_template_of(e.text_resources.tokenizer_config_json);
    if (e.text_resources.chat_template.empty())
        throw Error("convert: " + dir + "/tokenizer_config.json has no chat_template");
    std::vector<TokenText> specials =
        special_tokens(e.text_resources.tokenizer_json, e.text_resources.tokenizer_config_json);
    std::optional<uint64_t> im_end = find_token_id(specials, "<|im_end|>");
    std::optional<uint64_t> eot = find_token_id(specials, "<|endoftext|>");
    if (!im_end || !eot)
        throw Error("convert: " + dir + "/tokenizer.json lacks <|im_end|> or <|endoftext|>");
    e.text_resources.generation_config_json = generation_config_for({*im_end, *eot}, eot);
    check_token_ids(config.vocab_size, e.text_resources);
    e.with_mtp = req.with_mtp;
    e.with_vision = req.with_vision;
    if (req.with_vision) {
        e.vision_config_json = options.vision.config_json;
        e.vision_resources = synthetic_vision_resources(options.vision);
    }
    e.name = req.name.empty() ? std::filesystem::path(req.out_path).stem().string() : req.name;
    e.synthetic = true;
    e.provenance_json = "{\"source\":\"synthetic\",\"shape\":" + json_quote(req.shape) +
                        ",\"recipe\":" + json_quote(req.recipe.name) +
                        ",\"formats\":" + req.recipe.overrides_json() +
                        ",\"seed\":" + std::to_string(req.seed) + "}";
    e.produce_stream = [&](const PlannedObject& o, TensorFormat f, const ObjectSink& sink) {
        filler.produce(o, f, sink);
    };
    e.progress = req.progress;
    return emit_artifact(e);
}

std::string warn_if_synthetic(const Artifact& artifact) {
    if (!artifact.is_synthetic())
        return {};
    std::string line = "warning: " + artifact.path() + " (" + artifact.metadata_name() +
                       ") holds synthetic random weights; its output is meaningless";
    std::fprintf(stderr, "%s\n", line.c_str());
    return line;
}

} // namespace ninfer::core
