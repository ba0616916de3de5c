// ninfer::core - VisionConfig: read a Hugging Face vision_config and check the tower can run on it.
#include "core/model/vision_config.h"

#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <simdjson.h>

#include <cmath>

namespace ninfer::core {
namespace {

[[noreturn]] void fail_vision(const std::string& why) { throw Error("config: vision_config " + why); }

struct SizeField {
    const char* key;
    uint32_t VisionConfig::*member;
};

constexpr SizeField kSizeFields[] = {
    {"depth", &VisionConfig::depth},
    {"hidden_size", &VisionConfig::hidden_size},
    {"intermediate_size", &VisionConfig::intermediate_size},
    {"num_heads", &VisionConfig::num_heads},
    {"in_channels", &VisionConfig::in_channels},
    {"patch_size", &VisionConfig::patch_size},
    {"temporal_patch_size", &VisionConfig::temporal_patch_size},
    {"spatial_merge_size", &VisionConfig::spatial_merge_size},
    {"num_position_embeddings", &VisionConfig::num_position_embeddings},
    {"out_hidden_size", &VisionConfig::out_hidden_size},
};

} // namespace

VisionConfig VisionConfig::parse(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(json);
    simdjson::dom::object o;
    if (parser.parse(padded).get_object().get(o) != simdjson::SUCCESS)
        fail_vision("must be a JSON object");
    VisionConfig c;
    for (const SizeField& f : kSizeFields) {
        simdjson::dom::element e;
        if (o[f.key].get(e) != simdjson::SUCCESS || e.is_null())
            continue; // absent: the default (0, or 3 channels)
        uint64_t u = 0;
        if (e.get_uint64().get(u) != simdjson::SUCCESS || u > 0xffffffffu)
            fail_vision(std::string(f.key) + " must be a non-negative integer");
        c.*f.member = uint32_t(u);
    }
    std::string_view act;
    if (o["hidden_act"].get_string().get(act) == simdjson::SUCCESS)
        c.hidden_act = std::string(act);
    simdjson::dom::object rope;
    if (o["rope_parameters"].get_object().get(rope) == simdjson::SUCCESS) {
        simdjson::dom::element theta;
        if (rope["rope_theta"].get(theta) == simdjson::SUCCESS) {
            double d = 0;
            int64_t i = 0;
            if (theta.get_double().get(d) != simdjson::SUCCESS) {
                if (theta.get_int64().get(i) != simdjson::SUCCESS)
                    fail_vision("rope_parameters.rope_theta must be a number");
                d = double(i);
            }
            c.rope_theta = d;
        }
    }
    c.config_json = simdjson::minify(o);
    return c;
}

std::string VisionConfig::to_json() const {
    JsonWriter w;
    w.begin_object();
    w.member("model_type", "qwen3_5_vision");
    for (const SizeField& f : kSizeFields)
        w.member(f.key, this->*f.member);
    w.member("hidden_act", hidden_act);
    w.key("rope_parameters").begin_object();
    w.member("rope_type", "axial").member("rope_theta", rope_theta);
    w.end_object();
    w.end_object();
    return w.take();
}

uint32_t VisionConfig::position_grid_side() const {
    return uint32_t(std::lround(std::sqrt(double(num_position_embeddings))));
}

void VisionConfig::validate() const {
    for (const SizeField& f : kSizeFields)
        if (this->*f.member == 0)
            fail_vision(std::string(f.key) + " must be positive");
    if (hidden_size % num_heads != 0 || head_dim() % 4 != 0)
        fail_vision("hidden_size " + std::to_string(hidden_size) + " over " + std::to_string(num_heads) +
                    " heads must give a head_dim that is a multiple of 4 (2-D rotary halves)");
    const uint32_t side = position_grid_side();
    if (side * side != num_position_embeddings)
        fail_vision("num_position_embeddings " + std::to_string(num_position_embeddings) +
                    " must be a square (the learned position grid)");
    if (hidden_act != "gelu_pytorch_tanh")
        fail_vision("hidden_act \"" + hidden_act + "\" is not supported (gelu_pytorch_tanh)");
    if (!(rope_theta > 0) || !std::isfinite(rope_theta))
        fail_vision("rope_parameters.rope_theta must be positive");
}

} // namespace ninfer::core
