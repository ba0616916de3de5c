// ninfer::core - the vision tower on the CPU: images and video frame pairs -> embedding rows that
// replace the prompt's placeholder tokens (docs/MODEL.md §9; transformers' Qwen3_5VisionModel).
//
// Contract:
// - VisionTower(weights, pool) runs over weights in their stored format (rows decoded on the fly,
//   as the CPU backend does), all math f32; the learned position table is decoded once here.
//   The weights and pool must outlive the tower. Engine thread (or any one thread at a time).
// - encode(item) returns item.merged_tokens() rows of out_hidden_size floats, in the order the
//   placeholder tokens take them (temporal patch, then merged row, then merged column):
//     x  = patches . patch_embeddingᵀ + bias            (the Conv3d as a matmul, [N, hidden])
//        + the 48x48 position table bilinearly resampled to the grid (align_corners, as
//          transformers' get_vision_interpolation_indices_and_weights), the same for every frame
//     27 blocks: x += proj(attn(rope2d(qkv(LN1 x)))) ; x += fc2(gelu_tanh(fc1(LN2 x)))
//        attention is bidirectional within one temporal patch (cu_seqlens per frame pair), the
//        2-D rotary (theta from the config, 1e4) turns the first half of each head's rotate-half
//        pairs by the patch row and the second half by the patch column (head_dim/4 frequencies)
//     merger: LN per patch, 2x2 groups of consecutive rows -> fc1 -> exact (erf) GELU -> fc2.
//   Patches arrive in the processor's order (core/vision/vision_input.h): every 2x2 merge group is
//   four consecutive rows, so patch row r's grid cell is that order's inverse (patch_cell).
// - Work is split into batches of whole temporal patches of at most kMaxBatchRows rows (one
//   temporal patch may exceed it), so a long video never holds more than one batch's activations:
//   workspace_bytes(config, rows) is what a batch of `rows` patches holds, f32; host_bytes(config)
//   is what a tower holds besides its weights when its frames have at most kMaxBatchRows patches
//   (a 1024x1024 image): one batch's workspace and the decoded position table.
// - Errors: an item whose patch size, temporal patch size or merge size differs from the config,
//   whose grid is empty or not a multiple of the merge size, or whose patches do not hold
//   grid_t * grid_h * grid_w rows of C*T*P*P values: ninfer::Error("vision: ...").
#pragma once

#include "core/cpu/thread_pool.h"
#include "core/model/vision_weights.h"
#include "core/vision/vision_input.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ninfer::core {

struct PatchCell {
    uint32_t row = 0, col = 0; // patch row and column in the frame's grid
};

// Grid cell of row q (within one temporal patch) of the processor's merge-group order.
PatchCell patch_cell(size_t q, uint32_t grid_w, uint32_t merge);

// What every tower (CPU, GPU) computes per patch on the host: the four position-table rows and
// their bilinear weights for a cell of a grid_h x grid_w grid (align_corners), and the cell's
// rotary tables (head_dim / 2 cos and sin: pairs [0, head_dim/4) by the row, the rest by the
// column).
void position_taps(const VisionConfig& c, PatchCell cell, uint32_t grid_h, uint32_t grid_w, uint32_t taps[4],
                   float weights[4]);
void vision_rope_tables(const VisionConfig& c, PatchCell cell, float* cos_out, float* sin_out);
// One axis's half of them (head_dim / 4 cos and sin) for a row or column index: the cell's tables
// are its row's then its column's, so a grid's are built from grid_h + grid_w of these.
void vision_rope_axis(const VisionConfig& c, uint32_t index, float* cos_out, float* sin_out);
// The checks of VisionTower::check (the contract's errors) for a tower of config c.
void check_vision_input(const VisionConfig& c, const VisionInput& item);

class VisionTower {
  public:
    static constexpr size_t kMaxBatchRows = 4096;

    VisionTower(const VisionWeights& weights, ThreadPool& pool);

    uint32_t out_hidden() const { return w_.config.out_hidden_size; }
    void check(const VisionInput& item) const;
    std::vector<float> encode(const VisionInput& item);

    static uint64_t workspace_bytes(const VisionConfig& config, size_t rows);
    static uint64_t host_bytes(const VisionConfig& config);

  private:
    void embed(const VisionInput& item, size_t row0, size_t n_rows);
    void block(const VisionBlockWeights& b, const VisionInput& item, size_t n_rows);
    void attention(const VisionInput& item, size_t n_rows);
    void merge(size_t n_rows, float* out);

    const VisionWeights& w_;
    ThreadPool& pool_;
    std::vector<float> position_table_; // [num_position_embeddings][hidden]
    std::vector<float> x_, xn_, q_, k_, v_, attn_, mlp_; // the batch's activations
    std::vector<float> rope_cos_, rope_sin_;             // [rows][head_dim/2]
};

} // namespace ninfer::core
