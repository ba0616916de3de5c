// ninfer::core - the CPU forward pass of the Qwen3.5/3.6 text model over several lanes at once.
//
// Contract:
// - A step is a list of RowSegments: rows [row, row + n) of the step carry tokens at positions
//   [start, start + n) of one lane (a prefill chunk is one segment; a batched decode is one
//   one-token segment per lane). Lanes in one step are distinct.
// - forward() embeds the tokens, runs every layer (projections batched over all rows of the step,
//   mixers per lane: paged attention, GDN with the recurrent form for one-token segments and the
//   chunked form, chunks aligned to absolute positions, for longer ones unless
//   options.gdn_chunked is false), writes the lanes' K/V rows (pages must be reserved), advances
//   their GDN states, and leaves the final-normed hidden rows in hidden() ([rows][H]).
// - RoPE positions: a segment's own M-RoPE positions when it has them, else the text position
//   start + i + lane->rope_offset on all three axes, which interleaved M-RoPE turns into exactly
//   1-D partial RoPE (docs/MODEL.md §5). KV rows and the causal extent follow the token index.
// - logits(rows, out) applies the output head to the chosen rows.
// - A segment with keep_snapshots (a verify window, at most plan.max_draft_tokens + 1 tokens) runs
//   its GDN layers in the recurrent form and writes, after each of its first n - 1 tokens i, the
//   lane's whole GDN state (conv history + recurrent state, the layouts of LaneState::conv and
//   ::recurrent) into snapshot i of LaneState::verify_conv / ::verify_recurrent.
// - mtp_forward runs the MTP head (docs/MODEL.md §8) over the step's rows: row r holds the main
//   model's final-normed hidden state h_t (hidden_rows + r*H) and the token x_{t+1}, at MTP
//   position t (segment start + i). It writes the MTP layer's K/V rows at those positions (KV layer
//   n_full_attention_layers of the pool, the lane's pages) and leaves d = mtp.norm(u) in hidden(),
//   so logits() gives the draft logits and hidden() the state fed back by the next draft step. A
//   segment's positions and embedding rows apply there as in forward() (multimodal lanes).
//   Needs weights.mtp and a plan with mtp.
// - set_route_hook(hook): while set, every MoE layer a forward or mtp_forward runs calls it with its
//   router logits (before the softmax, [rows][num_experts], writable) and the layer (l of the main
//   model, num_hidden_layers for the MTP head's), so tests can see how near a route is to a tie
//   and what another choice does (tests/unit/cpu/route_margins.h); unset (the default): no call.
// Thread safety: engine thread only; uses the pool for data parallelism.
#pragma once

#include "core/backend/mrope.h"
#include "core/cpu/lane_state.h"
#include "core/cpu/thread_pool.h"
#include "core/model/memory_plan.h"
#include "core/model/weights.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ninfer::core::cpu {

struct RowSegment {
    LaneState* lane = nullptr;
    uint32_t start = 0; // position of the first token
    uint32_t n = 0;
    size_t row = 0;     // first row of the step
    bool keep_snapshots = false; // a verify window: recurrent GDN + per-token state snapshots
    // Multimodal prefill (backend.h prefill_with): per token an M-RoPE position, and an index into
    // `embeddings` (rows of H) replacing the token's embedding when >= 0. Null: text.
    const MropePosition* positions = nullptr;
    const int32_t* embedding_rows = nullptr;
    const float* embeddings = nullptr;
};

struct ForwardOptions {
    bool gdn_chunked = true;
};

class ModelRunner {
  public:
    ModelRunner(const ModelWeights& weights, const MemoryPlan& plan, KvStore& kv, ThreadPool& pool,
                ForwardOptions options = {});

    void forward(std::span<const RowSegment> segments, std::span<const int32_t> tokens);
    void mtp_forward(std::span<const RowSegment> segments, std::span<const int32_t> next_tokens,
                     const float* hidden_rows);
    const float* hidden(size_t row) const { return x_.data() + row * hidden_size_; }
    void logits(std::span<const size_t> rows, float* out);
    using RouteHook = std::function<void(uint32_t layer, size_t rows, float* logits)>;
    void set_route_hook(RouteHook hook) { route_hook_ = std::move(hook); }

    // Sizes of one lane's GDN state (floats).
    size_t conv_floats() const;
    size_t recurrent_floats() const;

  private:
    void set_rows(std::span<const RowSegment> segs, size_t R);
    void embed(std::span<const int32_t> tokens, float* out);
    void override_embeddings(std::span<const RowSegment> segs, float* out); // segments' embedding rows
    void norm_rows(const std::vector<float>& weight, const float* in, float* out, size_t R);
    // One pre-norm decoder layer over x_ (mixer, residual, FFN, residual).
    void layer(const LayerWeights& L, uint32_t kv_or_gdn_index, std::span<const RowSegment> segs,
               size_t R);
    void attention(const LayerWeights& L, uint32_t kv_layer, std::span<const RowSegment> segs, size_t R);
    void gdn(const LayerWeights& L, uint32_t gdn_index, std::span<const RowSegment> segs, size_t R);
    void ffn(const LayerWeights& L, size_t R);
    void mlp(const MlpWeights& w, const float* x, size_t R, float* out);

    const ModelWeights& w_;
    const ModelConfig& c_;
    const MemoryPlan& plan_;
    KvStore& kv_;
    ThreadPool& pool_;
    ForwardOptions options_;
    size_t hidden_size_;
    std::vector<uint32_t> row_position_;   // token index (KV row, causal extent)
    std::vector<MropePosition> row_rope_;  // RoPE position
    std::vector<const RowSegment*> row_segment_;
    std::vector<float> x_, xn_, mix_;                        // [R][H]
    std::vector<float> q_, gate_, k_, v_, attn_;             // attention
    std::vector<float> qkv_, z_, alpha_, beta_, conv_, o_;   // Gated DeltaNet
    std::vector<float> router_, gathered_, expert_out_, shared_out_, score_; // MoE
    std::vector<float> mlp_gate_, mlp_up_;
    std::vector<float> mtp_in_;                              // MTP [R][2H]: [e | h]
    RouteHook route_hook_;
};

} // namespace ninfer::core::cpu
