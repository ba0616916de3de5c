// ninfer::core - conversion recipes and `--format GROUP=FORMAT` overrides.
#include "core/convert/recipe.h"

#include "core/formats/format.h"
#include "core/util/error.h"

namespace ninfer::core {
namespace {

using F = TensorFormat;
using G = TensorGroup;

constexpr std::string_view kGroupNames[kTensorGroupCount] = {
    "embedding",       "output_head",         "attention_qk",     "attention_gv",
    "attention_output", "gdn_qk",             "gdn_vz",           "gdn_ab",
    "gdn_output",      "mlp_gate_up",         "mlp_down",         "moe_experts_gate_up",
    "moe_experts_down", "moe_shared",         "moe_router",       "mtp",
    "vision_patch",    "vision_attention",    "vision_mlp",       "vision_merger",
    "norm",            "bias",                "conv",             "gdn_scalar",
};

constexpr std::string_view kRecipeNames[] = {"bf16", "fp8", "q8", "q4"};

// Fixed groups are the same in every recipe: precision there costs nothing and matters.
void set_fixed(Recipe& r) {
    r.formats[size_t(G::Norm)] = F::Bf16;
    r.formats[size_t(G::Bias)] = F::Bf16;
    r.formats[size_t(G::Conv)] = F::Bf16;
    r.formats[size_t(G::GdnScalar)] = F::Fp32;
}

void set_all_matrices(Recipe& r, F format) {
    for (size_t g = 0; g < kMatrixGroupCount; ++g)
        r.formats[g] = format;
}

// The spirit of upstream's qwen3_6_27b / qwen3_6_35b_a3b groupwise recipes: 4 bits where the
// matrices are widest and errors average out (Q/K, gate/up), 5 bits on the value path and the
// down/output projections, 6 bits on the vocabulary matrices, 8 bits on the small or shared parts.
void set_q4(Recipe& r) {
    set_all_matrices(r, F::Q8G32Fp16);
    r.formats[size_t(G::Embedding)] = F::Q6G64Fp16;
    r.formats[size_t(G::OutputHead)] = F::Q6G64Fp16;
    r.formats[size_t(G::AttentionQk)] = F::Q4G64Fp16;
    r.formats[size_t(G::AttentionGv)] = F::Q5G64Fp16;
    r.formats[size_t(G::AttentionOutput)] = F::Q5G64Fp16;
    r.formats[size_t(G::GdnQk)] = F::Q4G64Fp16;
    r.formats[size_t(G::GdnVz)] = F::Q5G64Fp16;
    r.formats[size_t(G::GdnAb)] = F::Bf16;
    r.formats[size_t(G::GdnOutput)] = F::Q5G64Fp16;
    r.formats[size_t(G::MlpGateUp)] = F::Q4G64Fp16;
    r.formats[size_t(G::MlpDown)] = F::Q5G64Fp16;
    r.formats[size_t(G::MoeExpertsGateUp)] = F::Q4G64Fp16;
    r.formats[size_t(G::MoeExpertsDown)] = F::Q5G64Fp16;
    r.formats[size_t(G::MoeShared)] = F::Q8G32Fp16;
    r.formats[size_t(G::MoeRouter)] = F::Bf16;
    r.formats[size_t(G::Mtp)] = F::Q8G32Fp16;
    r.formats[size_t(G::VisionPatch)] = F::Q6G64Fp16;
    r.formats[size_t(G::VisionAttention)] = F::Q5G64Fp16;
    r.formats[size_t(G::VisionMlp)] = F::Q5G64Fp16;
    r.formats[size_t(G::VisionMerger)] = F::Q8G32Fp16;
}

std::string list(const std::string_view* names, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i)
        s += (i ? ", " : "") + std::string(names[i]);
    return s;
}

std::string matrix_group_list() { return list(kGroupNames, kMatrixGroupCount); }

} // namespace

std::string_view tensor_group_name(TensorGroup group) { return kGroupNames[size_t(group)]; }

bool tensor_group_is_matrix(TensorGroup group) { return size_t(group) < kMatrixGroupCount; }

Recipe Recipe::parse(std::string_view name) {
    Recipe r;
    r.name = std::string(name);
    if (name == "bf16") {
        set_all_matrices(r, F::Bf16);
    } else if (name == "fp8" || name == "q8") {
        set_all_matrices(r, name == "fp8" ? F::Fp8E4m3fnRowBf16 : F::Q8G32Fp16);
        r.formats[size_t(G::GdnAb)] = F::Bf16;
        r.formats[size_t(G::MoeRouter)] = F::Bf16;
    } else if (name == "q4") {
        set_q4(r);
    } else {
        throw Error("convert: unknown recipe \"" + std::string(name) + "\" (recipes: " +
                    list(kRecipeNames, std::size(kRecipeNames)) + ")");
    }
    set_fixed(r);
    return r;
}

void Recipe::apply_override(std::string_view spec) {
    size_t eq = spec.find('=');
    if (eq == std::string_view::npos)
        throw Error("convert: --format expects GROUP=FORMAT, got \"" + std::string(spec) + "\"");
    std::string_view group = spec.substr(0, eq), format = spec.substr(eq + 1);
    for (size_t g = 0; g < kTensorGroupCount; ++g) {
        if (kGroupNames[g] != group)
            continue;
        if (g >= kMatrixGroupCount)
            throw Error("convert: group " + std::string(group) +
                        " has a fixed format (norms, biases, conv: bf16; a_log, dt_bias: fp32)");
        try {
            formats[g] = format_from_name(format);
        } catch (const Error&) {
            throw Error("convert: unknown format \"" + std::string(format) +
                        "\" in --format " + std::string(spec) +
                        " (formats: bf16, fp32, q4_g64_fp16, q5_g64_fp16, q6_g64_fp16, "
                        "q8_g32_fp16, fp8_e4m3fn_row_bf16, nvfp4)");
        }
        if (formats[g] == F::Int32)
            throw Error("convert: int32 is not a weight format (--format " + std::string(spec) + ")");
        return;
    }
    throw Error("convert: unknown tensor group \"" + std::string(group) +
                "\" (groups: " + matrix_group_list() + ")");
}

std::string Recipe::overrides_json() const {
    Recipe base = parse(name);
    std::string s = "{";
    for (size_t g = 0; g < kTensorGroupCount; ++g) {
        if (formats[g] == base.formats[g])
            continue;
        s += (s.size() > 1 ? "," : "") + std::string("\"") + std::string(kGroupNames[g]) +
             "\":\"" + std::string(format_name(formats[g])) + "\"";
    }
    return s + "}";
}

std::string recipe_help_text() {
    std::string s = "recipes: " + list(kRecipeNames, std::size(kRecipeNames)) + " (default " +
                    std::string(kDefaultRecipe) + ")\n";
    s += "groups for --format GROUP=FORMAT: " + matrix_group_list() + "\n";
    s += "formats: bf16, fp32, q4_g64_fp16, q5_g64_fp16, q6_g64_fp16, q8_g32_fp16, "
         "fp8_e4m3fn_row_bf16, nvfp4 (nvfp4 needs rows % 128 == 0 and columns % 64 == 0)\n";
    return s;
}

} // namespace ninfer::core
