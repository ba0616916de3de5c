// ninfer::core - a test-only Backend that replays scripted token ids instead of running a model.
//
// Contract:
// - Built from a list of scripts (token id sequences). Every generation (each
//   sample_after_prefill) takes the next script in round-robin order; the first token is
//   script[0], each decode step returns the next one, and past the end the last id repeats.
//   So streamed tool calls, reasoning and stop strings can be tested end to end over HTTP.
// - Lanes track only their length (prefill/decode append); save_lane/restore_lane copy token ids.
//   Given a lane layout (the plan's KV bytes per token and GDN bytes), save_lane adds zero-filled
//   kv and gdn sections of those sizes, so its images pass the slot-file checks of the daemon's
//   plan (--persist-slots, ninferctl slot) like a real backend's.
//   Logprobs are 0 (probability 1) and the top list holds the chosen token only.
// - The id -1 in a script is a device failure: producing it throws ninfer::Error(Internal,
//   "backend: scripted device failure"), as a failing GPU would (tests of the engine's failure path).
// - Errors: ninfer::Error("backend: ...") for an empty script list or a lane out of range.
// Engine thread only, like every backend.
#pragma once

#include "core/backend/backend.h"

#include <vector>

namespace ninfer::core {

// The sizes of a real backend's lane-image sections under the daemon's plan.
struct ScriptLaneLayout {
    uint64_t kv_bytes_per_token = 0, gdn_bytes = 0; // 0, 0: images hold token ids only
};

class ScriptBackend final : public Backend {
  public:
    ScriptBackend(std::vector<std::vector<int32_t>> scripts, int n_lanes, uint32_t vocab_size, uint32_t max_context,
                  ScriptLaneLayout layout = {});
    std::string name() const override { return "script"; }
    int n_lanes() const override { return int(lanes_.size()); }
    uint32_t vocab_size() const override { return vocab_size_; }
    uint32_t max_context() const override { return max_context_; }
    uint32_t lane_length(int lane) const override;
    void reset_lane(int lane) override;
    void prefill(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) override;
    DecodeResult sample_after_prefill(int lane, const SamplingParams& sampling, std::span<const int32_t> generated,
                                      int n_top_logprobs) override;
    std::vector<DecodeResult> decode(std::span<const DecodeStep> steps) override;
    // Scripted ids ignore sampling, masks included: a step begun before its sampling is known is
    // the plain step, and the later sampling changes nothing (sampling again would take the next
    // script instead).
    void decode_begin_forward(std::span<const DecodeStep> steps) override { decode_begin(steps); }
    void decode_sample(std::span<const DecodeStep>) override {}
    std::vector<float> last_logits(int lane) const override;
    LaneImage save_lane(int lane) const override;
    void restore_lane(int lane, const LaneImage& image) override;

  private:
    struct Lane {
        std::vector<int32_t> tokens;
        size_t script = 0;
        size_t cursor = 0;
    };
    Lane& lane_at(int lane);
    DecodeResult next(Lane& lane, int n_top_logprobs);

    std::vector<std::vector<int32_t>> scripts_;
    std::vector<Lane> lanes_;
    uint32_t vocab_size_;
    uint32_t max_context_;
    ScriptLaneLayout layout_;
    size_t next_script_ = 0;
};

} // namespace ninfer::core
