// ninfer tests - a tiny random vision tower of the real structure (2 blocks, 2 heads of 16, patch 2,
// temporal patch 2, merge 2, a 4x4 learned position grid) and random patchified inputs.
#pragma once

#include "core/model/random_model.h"
#include "core/model/vision_weights.h"
#include "core/vision/cpu_vision_encoder.h"
#include "core/vision/vision_input.h"
#include "tests/unit/cpu/tiny_models.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ninfer::test {

using namespace ninfer::core;

inline VisionConfig tiny_vision_config(uint32_t out_hidden = 24) {
    VisionConfig c;
    c.depth = 2;
    c.hidden_size = 32;
    c.intermediate_size = 48;
    c.num_heads = 2;
    c.in_channels = 3;
    c.patch_size = 2;
    c.temporal_patch_size = 2;
    c.spatial_merge_size = 2;
    c.num_position_embeddings = 16;
    c.out_hidden_size = out_hidden;
    c.rope_theta = 10000.0;
    return c;
}

// The tower's parameters drawn N(0, 1/fan_in) (LayerNorm weights 1 + N(0, 0.1²), biases N(0, 0.1²),
// the position table N(0, 1)), matrices in `format`, vectors in fp32, bound into `model`.
inline VisionWeights random_vision_weights(InMemoryModel& model, const VisionConfig& c, uint64_t seed,
                                           TensorFormat format = TensorFormat::Bf16) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const ParameterSpec& s : vision_parameter_specs(c)) {
        uint64_t n = 1;
        for (uint64_t d : s.shape)
            n *= d;
        std::vector<float> v(n);
        const bool ln_weight = s.name.find("norm") != std::string::npos && s.name.find("weight") != std::string::npos;
        const bool bias = s.name.find("bias") != std::string::npos;
        for (float& x : v)
            x = ln_weight ? 1.0f + 0.1f * normal(rng)
                : bias    ? 0.1f * normal(rng)
                : s.name == "vision/position_embedding" ? normal(rng)
                          : normal(rng) / std::sqrt(float(s.shape[1]));
        const bool matrix = s.shape.size() == 2 && s.name != "vision/position_embedding";
        const StoredTensor& t = model.add_tensor(s.name, matrix ? format : TensorFormat::Fp32, s.shape, v);
        model.bind_rows(s.name, t, 0, s.shape);
    }
    return VisionWeights::bind(c, [&](std::string_view name) -> const WeightBinding* {
        auto it = model.bindings().find(std::string(name));
        return it == model.bindings().end() ? nullptr : &it->second;
    });
}

// A patchified item of the config's sizes with values uniform in [-1, 1] (normalised pixels).
inline VisionInput random_vision_input(const VisionConfig& c, VisionInput::Kind kind, int t, int h, int w,
                                       uint64_t seed) {
    VisionInput in;
    in.kind = kind;
    in.grid_t = t;
    in.grid_h = h;
    in.grid_w = w;
    in.patch_size = int(c.patch_size);
    in.temporal_patch_size = int(c.temporal_patch_size);
    in.merge_size = int(c.spatial_merge_size);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    in.patches.resize(in.n_patches() * in.patch_dim());
    for (float& x : in.patches)
        x = u(rng);
    return in;
}

// The tiny text model and a tiny tower with a CPU encoder and a CPU backend of `lanes` lanes, F32 KV
// (the scheduler tests of media: image placeholder 200, video placeholder 201, vocabulary of 211).
constexpr int32_t kImagePad = 200, kVideoPad = 201;

struct VisionRig {
    ModelConfig c = tiny_config(false);
    std::unique_ptr<InMemoryModel> model = InMemoryModel::random(c, {.seed = 5});
    ModelWeights w = model->weights();
    InMemoryModel vision_model;
    VisionConfig vc = tiny_vision_config(c.hidden_size);
    VisionWeights vw = random_vision_weights(vision_model, vc, 9);
    std::unique_ptr<VisionEncoder> encoder = make_cpu_vision_encoder(vw, 2, kImagePad, kVideoPad);
    MemoryPlan plan;
    std::unique_ptr<Backend> backend;
    explicit VisionRig(int lanes) : plan(tiny_plan(c, lanes, KvDtype::F32)), backend(make_cpu_backend(w, plan)) {}
};

} // namespace ninfer::test
