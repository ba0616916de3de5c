// ninfer::core - when a speculating lane takes a round, and when a plain step instead (issue 28 item
// 6: speculation on by default must never cost a user more than it gives).
//
// A round costs more than a plain step (the bench's "round = N x a step": 1.4-2.5 x at batch 1 and
// K = 3, more at batch 4, on the GPU) and pays only through accepted drafts; drafts that keep
// failing (a head that does not fit the text, n-gram lookup on text that does not repeat) and
// large batches (where a plain step already fills the GPU) make it a loss. Two rules, both
// deterministic (no timing):
// - Batch (vLLM's disable_by_batch_size): no lane speculates while more than max_lanes lanes
//   decode (0: no limit).
// - Acceptance, per lane: after each round the lane's accepted / drafted over its last kWindow
//   rounds is compared with min_acceptance; below it the lane takes plain steps for `pause`
//   steps, then probes again: kProbe rounds, judged alone (a lane whose drafts stopped fitting
//   pays kProbe rounds a probe, not a whole window: on the H100 with drafts that never fit, 256
//   tokens of mtp:3 at batch 1 took 32 rounds with 8-round probes and 0.93 x the plain speed,
//   session 21). Each failed probe doubles the pause (from kFirstPause up to kMaxPause: a lane
//   whose drafts never fit spends well under 1% of its steps in rounds); a probe or window that
//   meets the bar resets it, and the lane goes on with the usual sliding window. min_acceptance 0
//   turns the rule off.
// And for a round as a whole (the scheduler's, fit_one_pass): its windows fit one verify pass of
// the backend (Backend::verify_rows_per_pass; CUDA: 8 rows), K lowered to rows / lanes - 1: at
// batch 4 and K = 3 the GPU's 16 rows took two passes and the round 2.66 x a step (session 19),
// where K = 1 fits 8 rows in one pass, about a batch-8 step (1.2 x).
//
// Contract: SpeculationGate is one lane's state, reset (reset()) at admission. allows() says
// whether the lane may take a round now (acceptance rule only; the batch rule is the caller's,
// batch_allows). after_round(drafted, accepted, policy) records a round; after_plain_step()
// counts a plain step the lane took while paused. Pure bookkeeping, no allocation.
// Thread safety: engine thread only (one per lane).
#pragma once

#include <array>
#include <cstdint>

namespace ninfer::core {

// The engine's default is no gating (every eligible lane takes rounds: what the exactness tests
// and `ninferctl run --speculative` want); ninferd sets both from its options
// (--speculative-max-lanes, --speculative-min-acceptance).
struct SpeculationPolicy {
    uint32_t max_lanes = 0;      // rounds only while at most this many lanes decode (0: any)
    float min_acceptance = 0.f;  // accepted / drafted over a lane's last kWindow rounds (0: off)
    // A round's windows fit one verify pass (Backend::verify_rows_per_pass): K lowered to rows /
    // lanes - 1, no round under 2 rows a lane. ninferd: on; off, windows beyond a pass take more.
    bool fit_one_pass = false;
};

inline bool batch_allows(const SpeculationPolicy& policy, uint32_t decoding_lanes) {
    return policy.max_lanes == 0 || decoding_lanes <= policy.max_lanes;
}

class SpeculationGate {
  public:
    static constexpr uint32_t kWindow = 8, kProbe = 2;
    static constexpr uint32_t kFirstPause = 16, kMaxPause = 1024;

    void reset() { *this = SpeculationGate{}; }
    bool allows() const { return paused_steps_ == 0; }
    void after_plain_step() {
        if (paused_steps_ > 0) --paused_steps_;
    }
    void after_round(uint32_t drafted, uint32_t accepted, const SpeculationPolicy& policy);

    // For status and tests.
    uint32_t paused_steps() const { return paused_steps_; }
    uint32_t next_pause() const { return next_pause_; }
    uint32_t pauses() const { return pauses_; }

  private:
    std::array<uint16_t, kWindow> drafted_{}, accepted_{};
    uint32_t rounds_ = 0;   // since the last pause (the latest kWindow kept)
    bool probing_ = false;  // after a pause: judged after kProbe rounds
    uint32_t paused_steps_ = 0, next_pause_ = kFirstPause, pauses_ = 0;
};

} // namespace ninfer::core
