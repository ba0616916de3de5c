// ninfer::core - the vision tower's weights (docs/MODEL.md §9), bound by name and shape-checked.
//
// Contract:
// - VisionWeights::bind(config, lookup) validates the config and resolves every parameter of
//   vision_parameter_specs(config) (docs/ARTIFACT_FORMAT.md §4.3 names: vision/patch_embedding
//   [hidden, C*T*P*P] (the Conv3d kernel flattened C-order), vision/patch_embedding_bias,
//   vision/position_embedding [num_position_embeddings, hidden], vision/layers/{b}/attention/
//   {query,key,value,output}[_bias], .../mlp/{fc1,fc2}[_bias], .../norm{1,2}_{weight,bias},
//   vision/merger/{norm_weight,norm_bias,fc1,fc1_bias,fc2,fc2_bias}); a missing or misshapen one
//   throws ninfer::Error("weights: NAME ..."). Matrices stay in their stored format; biases and
//   LayerNorm parameters are decoded to f32 once; the position table stays a Matrix (rows decoded
//   when an image's grid needs them).
// - ModelWeights::from_artifact binds them when the artifact has a `vision` component with
//   vision/patch_embedding (core/model/weights.h).
// Thread safety: immutable after bind.
#pragma once

#include "core/model/vision_config.h"
#include "core/model/weights.h"

#include <vector>

namespace ninfer::core {

struct VisionBlockWeights {
    std::vector<float> norm1_weight, norm1_bias, norm2_weight, norm2_bias; // LayerNorm [hidden]
    Matrix query, key, value, output;                                      // [hidden, hidden]
    std::vector<float> query_bias, key_bias, value_bias, output_bias;      // [hidden]
    Matrix fc1, fc2;                                                       // [I, hidden], [hidden, I]
    std::vector<float> fc1_bias, fc2_bias;
};

struct VisionWeights {
    VisionConfig config;
    Matrix patch_embedding;    // [hidden, patch_dim]
    std::vector<float> patch_embedding_bias;
    Matrix position_embedding; // [num_position_embeddings, hidden], row = grid_row * side + grid_col
    std::vector<VisionBlockWeights> blocks;
    std::vector<float> merger_norm_weight, merger_norm_bias; // LayerNorm [hidden], per patch
    Matrix merger_fc1, merger_fc2;                           // [4 hidden, 4 hidden], [out, 4 hidden]
    std::vector<float> merger_fc1_bias, merger_fc2_bias;

    static VisionWeights bind(const VisionConfig& config, const BindingLookup& lookup);
};

std::vector<ParameterSpec> vision_parameter_specs(const VisionConfig& config);

} // namespace ninfer::core
