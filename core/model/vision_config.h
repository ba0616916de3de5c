// ninfer::core - the vision tower's configuration (docs/MODEL.md §2.2, §9).
//
// Contract:
// - VisionConfig::parse reads a Hugging Face `vision_config` object (the checkpoint's, or the
//   `config` of an artifact's `vision` component, which the converter stores as the checkpoint's
//   text): depth, hidden_size, intermediate_size, num_heads, in_channels (default 3), patch_size,
//   temporal_patch_size, spatial_merge_size, num_position_embeddings, out_hidden_size, hidden_act
//   (default gelu_pytorch_tanh) and rope_parameters.rope_theta (default 1e4). Absent numbers
//   stay 0; parse checks only the JSON (ninfer::Error("config: vision_config ...")), so the
//   converter can carry a partial config; validate() checks that the tower can run on it.
// - validate(): every size positive, hidden_size = num_heads * head_dim with head_dim a multiple
//   of 4 (the 2-D rotary splits each head into height and width halves of rotate-half pairs),
//   num_position_embeddings a square (the learned grid), hidden_act gelu_pytorch_tanh;
//   ninfer::Error("config: vision_config ...") otherwise.
// - to_json() writes the Hugging Face spelling (model_type qwen3_5_vision, rope_parameters
//   {rope_type axial, rope_theta}); parse(to_json()) gives the same sizes back.
// - Derived sizes are methods so no caller recomputes them.
// Thread safety: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ninfer::core {

struct VisionConfig {
    uint32_t depth = 0, hidden_size = 0, intermediate_size = 0, num_heads = 0;
    uint32_t in_channels = 3, patch_size = 0, temporal_patch_size = 0, spatial_merge_size = 0;
    uint32_t num_position_embeddings = 0, out_hidden_size = 0;
    double rope_theta = 10000.0;
    std::string hidden_act = "gelu_pytorch_tanh";
    std::string config_json; // the object as given (minified), stored as the component config

    static VisionConfig parse(std::string_view json);
    void validate() const;
    std::string to_json() const;

    uint32_t head_dim() const { return num_heads ? hidden_size / num_heads : 0; }
    // Values of one patch: in_channels x temporal_patch_size x patch_size^2 (the Conv3d kernel).
    uint32_t patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
    uint32_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
    uint32_t merged_dim() const { return hidden_size * merge_unit(); } // the merger's input width
    uint32_t position_grid_side() const; // sqrt(num_position_embeddings)
};

} // namespace ninfer::core
