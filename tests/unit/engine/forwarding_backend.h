// ninfer tests - a Backend that forwards every call the scheduler makes to another one: the base of
// test wrappers that record or change a few calls (override them, and call the inner backend).
// verify_greedy is left to Backend's default, which calls this verify: a wrapper that overrides
// verify sees the scheduler's rounds.
#pragma once

#include "core/backend/backend.h"

#include <string>
#include <vector>

namespace ninfer::test {

class ForwardingBackend : public core::Backend {
  public:
    explicit ForwardingBackend(core::Backend& inner) : b_(inner) {}
    std::string name() const override { return b_.name(); }
    int n_lanes() const override { return b_.n_lanes(); }
    uint32_t vocab_size() const override { return b_.vocab_size(); }
    uint32_t max_context() const override { return b_.max_context(); }
    uint32_t lane_length(int lane) const override { return b_.lane_length(lane); }
    void reset_lane(int lane) override { b_.reset_lane(lane); }
    void prefill(int lane, std::span<const int32_t> t, core::LogitsOut out, std::vector<float>* logits) override {
        b_.prefill(lane, t, out, logits);
    }
    void prefill_begin(int lane, std::span<const int32_t> t, core::LogitsOut out, std::vector<float>* logits) override {
        b_.prefill_begin(lane, t, out, logits);
    }
    bool prefill_advance(int max_layers) override { return b_.prefill_advance(max_layers); }
    bool prefill_pending() const override { return b_.prefill_pending(); }
    core::DecodeResult sample_after_prefill(int lane, const core::SamplingParams& s, std::span<const int32_t> g,
                                            int n) override {
        return b_.sample_after_prefill(lane, s, g, n);
    }
    std::vector<core::DecodeResult> decode(std::span<const core::DecodeStep> steps) override { return b_.decode(steps); }
    void decode_begin(std::span<const core::DecodeStep> steps) override { b_.decode_begin(steps); }
    void decode_begin_forward(std::span<const core::DecodeStep> steps) override { b_.decode_begin_forward(steps); }
    void decode_sample(std::span<const core::DecodeStep> steps) override { b_.decode_sample(steps); }
    std::vector<core::DecodeResult> decode_end() override { return b_.decode_end(); }
    std::vector<float> last_logits(int lane) const override { return b_.last_logits(lane); }
    core::LaneImage save_lane(int lane) const override { return b_.save_lane(lane); }
    void restore_lane(int lane, const core::LaneImage& image) override { b_.restore_lane(lane, image); }
    bool has_mtp() const override { return b_.has_mtp(); }
    std::vector<std::vector<int32_t>> draft_mtp(std::span<const core::DraftRequest> requests,
                                                std::vector<std::vector<float>>* logits) override {
        return b_.draft_mtp(requests, logits);
    }
    void verify(std::span<const core::VerifyStep> steps, std::vector<float>& logits) override { b_.verify(steps, logits); }
    void accept_verified(int lane, uint32_t n_keep) override { b_.accept_verified(lane, n_keep); }

  protected:
    core::Backend& b_;
};

} // namespace ninfer::test
