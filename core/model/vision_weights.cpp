// ninfer::core - bind the vision tower's parameters (docs/ARTIFACT_FORMAT.md §4.3 vision names).
#include "core/model/vision_weights.h"

#include "core/model/weight_binder.h"

namespace ninfer::core {

std::vector<ParameterSpec> vision_parameter_specs(const VisionConfig& c) {
    const uint64_t D = c.hidden_size, I = c.intermediate_size, M = c.merged_dim();
    std::vector<ParameterSpec> out = {
        {"vision/patch_embedding", {D, c.patch_dim()}},
        {"vision/patch_embedding_bias", {D}},
        {"vision/position_embedding", {c.num_position_embeddings, D}},
    };
    for (uint32_t b = 0; b < c.depth; ++b) {
        const std::string p = "vision/layers/" + std::to_string(b) + "/";
        for (const char* n : {"query", "key", "value", "output"}) {
            out.push_back({p + "attention/" + n, {D, D}});
            out.push_back({p + "attention/" + n + "_bias", {D}});
        }
        out.push_back({p + "mlp/fc1", {I, D}});
        out.push_back({p + "mlp/fc1_bias", {I}});
        out.push_back({p + "mlp/fc2", {D, I}});
        out.push_back({p + "mlp/fc2_bias", {D}});
        for (const char* n : {"norm1_weight", "norm1_bias", "norm2_weight", "norm2_bias"})
            out.push_back({p + n, {D}});
    }
    out.push_back({"vision/merger/norm_weight", {D}});
    out.push_back({"vision/merger/norm_bias", {D}});
    out.push_back({"vision/merger/fc1", {M, M}});
    out.push_back({"vision/merger/fc1_bias", {M}});
    out.push_back({"vision/merger/fc2", {c.out_hidden_size, M}});
    out.push_back({"vision/merger/fc2_bias", {c.out_hidden_size}});
    return out;
}

VisionWeights VisionWeights::bind(const VisionConfig& c, const BindingLookup& lookup) {
    c.validate();
    WeightBinder b(lookup);
    const uint64_t D = c.hidden_size, I = c.intermediate_size, M = c.merged_dim();
    VisionWeights w;
    w.config = c;
    w.patch_embedding = b.matrix("vision/patch_embedding", D, c.patch_dim());
    w.patch_embedding_bias = b.vector("vision/patch_embedding_bias", {D});
    w.position_embedding = b.matrix("vision/position_embedding", c.num_position_embeddings, D);
    w.blocks.reserve(c.depth);
    for (uint32_t i = 0; i < c.depth; ++i) {
        const std::string p = "vision/layers/" + std::to_string(i) + "/";
        VisionBlockWeights& k = w.blocks.emplace_back();
        k.norm1_weight = b.vector(p + "norm1_weight", {D});
        k.norm1_bias = b.vector(p + "norm1_bias", {D});
        k.query = b.matrix(p + "attention/query", D, D);
        k.key = b.matrix(p + "attention/key", D, D);
        k.value = b.matrix(p + "attention/value", D, D);
        k.output = b.matrix(p + "attention/output", D, D);
        k.query_bias = b.vector(p + "attention/query_bias", {D});
        k.key_bias = b.vector(p + "attention/key_bias", {D});
        k.value_bias = b.vector(p + "attention/value_bias", {D});
        k.output_bias = b.vector(p + "attention/output_bias", {D});
        k.norm2_weight = b.vector(p + "norm2_weight", {D});
        k.norm2_bias = b.vector(p + "norm2_bias", {D});
        k.fc1 = b.matrix(p + "mlp/fc1", I, D);
        k.fc1_bias = b.vector(p + "mlp/fc1_bias", {I});
        k.fc2 = b.matrix(p + "mlp/fc2", D, I);
        k.fc2_bias = b.vector(p + "mlp/fc2_bias", {D});
    }
    w.merger_norm_weight = b.vector("vision/merger/norm_weight", {D});
    w.merger_norm_bias = b.vector("vision/merger/norm_bias", {D});
    w.merger_fc1 = b.matrix("vision/merger/fc1", M, M);
    w.merger_fc1_bias = b.vector("vision/merger/fc1_bias", {M});
    w.merger_fc2 = b.matrix("vision/merger/fc2", c.out_hidden_size, M);
    w.merger_fc2_bias = b.vector("vision/merger/fc2_bias", {c.out_hidden_size});
    return w;
}

} // namespace ninfer::core
