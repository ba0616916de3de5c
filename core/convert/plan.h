// ninfer::core - the object plan of a converted artifact: which physical tensor objects it holds,
// which logical parameters (docs/ARTIFACT_FORMAT.md §4.3 v3 names) bind to which rows of them, and
// where each object's rows come from in a Hugging Face checkpoint.
//
// Contract:
// - plan_objects(config, options) lists every object of the requested components in writing
//   order. Shapes come only from the ModelConfig (and VisionConfig). Fused parents:
//   attention query|key and gate|value (q_proj is per-head interleaved [query|gate] and is split
//   per head), GDN query|key, value|z and a|b, MLP gate|up, MoE router|shared_score, all routed
//   experts' gate|up (row e*2I + p*I + r) and down (row e*H + h), shared gate|up. Every other
//   object holds one parameter.
// - An object's rows are its sources' rows concatenated. A source is rows [row_begin,row_end) of
//   a checkpoint tensor viewed as [numel/cols, cols] (cols = the object's last dim), so fused
//   experts [E,2I,H] and the 5-D patch embedding need no special case; `transpose_taps` marks the
//   GDN convolution (checkpoint [C,1,taps] -> object [taps,C]).
// - Synthetic generation uses the same plan and ignores the sources (SyntheticInit says how to
//   draw each object).
// - check_plan_formats throws ninfer::Error("convert: ...") if a recipe puts a format on an
//   object whose shape it cannot store (nvfp4 needs rows % 128 == 0 and columns % 64 == 0).
// Thread safety: pure functions over plain data.
#pragma once

#include "core/convert/recipe.h"
#include "core/model/config.h"
#include "core/model/vision_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::core {

// Checkpoint key spelling: text-only `model.` or multimodal `model.language_model.`.
struct CheckpointNaming {
    std::string text_prefix = "model.";
    std::string vision_prefix = "model.visual.";
    std::string output_head_key = "lm_head.weight";
    bool fused_experts = false; // mlp.experts.{gate_up_proj,down_proj} instead of per expert
};

struct PlanOptions {
    bool with_mtp = false;
    bool with_vision = false;
    VisionConfig vision;
    CheckpointNaming naming;
};

enum class SyntheticInit : uint8_t {
    Matrix,     // N(0, 0.02)
    OffsetNorm, // near 0 (the weight is used as 1 + w)
    GatedNorm,  // near 1 (plain weight)
    LayerNorm,  // near 1 (vision LayerNorm weight)
    Bias,       // near 0
    ALog,       // log(A), A in [1, 16]
    DtBias,     // softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]
    Conv,       // U(-0.5, 0.5), the depthwise conv init bound 1/sqrt(taps)
};

struct SourceRows {
    std::string key;
    std::vector<uint64_t> shape; // the checkpoint tensor's expected shape
    uint64_t row_begin = 0, row_end = 0;
};

struct PlannedBinding {
    std::string parameter;
    uint64_t elem_begin = 0, elem_end = 0; // logical element range of the object
};

struct PlannedObject {
    std::string id;
    TensorGroup group = TensorGroup::Norm;
    std::vector<uint64_t> shape;
    SyntheticInit init = SyntheticInit::Matrix;
    bool transpose_taps = false;
    std::vector<SourceRows> sources;
    std::vector<PlannedBinding> bindings;

    uint64_t cols() const { return shape.back(); }
    uint64_t rows() const;
};

std::vector<PlannedObject> plan_objects(const ModelConfig& config, const PlanOptions& options);
void check_plan_formats(const std::vector<PlannedObject>& plan, const Recipe& recipe);
uint64_t plan_encoded_bytes(const std::vector<PlannedObject>& plan, const Recipe& recipe);

} // namespace ninfer::core
