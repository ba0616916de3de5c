// ninfer::core - conversion recipes: which tensor format each group of weights is stored in.
//
// Contract:
// - Every stored weight object belongs to one TensorGroup. Matrix groups (projections, embedding,
//   heads) take their format from the recipe and may be overridden with `--format GROUP=FORMAT`;
//   fixed groups (norms, biases, the GDN convolution, a_log / dt_bias) are always bf16 / fp32.
// - Recipes: "bf16" (every matrix bf16), "fp8" (matrices fp8_e4m3fn_row_bf16; the small
//   precision-sensitive GDN a/b projections and the MoE router stay bf16), "q8" (q8_g32_fp16, same
//   bf16 exceptions), "q4" (after the upstream 27B/35B recipes: q4 for Q/K, gate/up and routed
//   expert gate/up, q5 for attention/GDN V/gate/z and output and the down projections, q6 for the
//   vocabulary matrices, q8 for shared experts, MTP and the vision merger). kDefaultRecipe is fp8:
//   the natural fast format on the H200, and it keeps the synthetic `tiny` artifact small.
// - Recipe::parse / apply_override throw ninfer::Error("convert: ...") naming the bad recipe,
//   group or format and listing the valid ones.
// Thread safety: plain values.
#pragma once

#include "core/formats/tensor.h"

#include <array>
#include <string>
#include <string_view>

namespace ninfer::core {

enum class TensorGroup : uint8_t {
    // Overridable matrix groups.
    Embedding,        // text/token_embedding
    OutputHead,       // text/output_head
    AttentionQk,      // attention query + key (one parent)
    AttentionGv,      // attention gate + value (one parent)
    AttentionOutput,  // attention output projection
    GdnQk,            // GDN query + key
    GdnVz,            // GDN value + z
    GdnAb,            // GDN a + b projections
    GdnOutput,        // GDN output projection
    MlpGateUp,        // dense MLP gate + up
    MlpDown,          // dense MLP down
    MoeExpertsGateUp, // routed experts gate + up (all experts of a layer in one parent)
    MoeExpertsDown,   // routed experts down
    MoeShared,        // shared expert gate + up and down
    MoeRouter,        // router + shared-expert score
    Mtp,              // MTP input projection and its layer's projections
    VisionPatch,      // vision patch embedding
    VisionAttention,  // vision qkv + output
    VisionMlp,        // vision fc1 + fc2
    VisionMerger,     // vision merger fc1 + fc2
    // Fixed groups.
    Norm,      // RMSNorm / LayerNorm weights: bf16
    Bias,      // vision biases and position table: bf16
    Conv,      // GDN convolution [taps, channels]: bf16
    GdnScalar, // a_log, dt_bias: fp32
};
inline constexpr size_t kTensorGroupCount = size_t(TensorGroup::GdnScalar) + 1;
inline constexpr size_t kMatrixGroupCount = size_t(TensorGroup::VisionMerger) + 1;

std::string_view tensor_group_name(TensorGroup group); // "embedding", "attention_qk", ...
bool tensor_group_is_matrix(TensorGroup group);

inline constexpr std::string_view kDefaultRecipe = "fp8";

struct Recipe {
    std::string name;
    std::array<TensorFormat, kTensorGroupCount> formats{};

    static Recipe parse(std::string_view name); // "bf16", "fp8", "q8", "q4"
    // "GROUP=FORMAT" with a matrix group and any of the nine format names.
    void apply_override(std::string_view group_equals_format);
    TensorFormat format(TensorGroup group) const { return formats[size_t(group)]; }
    // The overrides relative to the named recipe as a JSON object {"group":"format",...}.
    std::string overrides_json() const;
};

// Text for --help: the recipes and the overridable group names.
std::string recipe_help_text();

} // namespace ninfer::core
