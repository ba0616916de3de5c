// ninfer::core - the scheduler's constrained lanes: the allowed-token bitset of each sample.
#include "core/engine/scheduler.h"

#include <algorithm>

namespace ninfer::core {

bool Scheduler::constrain_sample(int lane_index, SamplingParams& sampling) {
    Lane& lane = lanes_[size_t(lane_index)];
    const uint32_t vocab = backend_.vocab_size();
    lane.mask.assign(token_mask_words(vocab), 0u);
    lane.constraint->fill_mask(lane.mask);
    if (token_mask_count(lane.mask, vocab) == 0) {
        finish(lane_index, FinishReason::ConstraintFailed);
        return false;
    }
    sampling.allowed_tokens = lane.mask;
    return true;
}

void Scheduler::sample_constrained_later(std::vector<DecodeStep>& steps, const std::vector<StepRow>& rows) {
    for (size_t k = 0; k < steps.size(); ++k) {
        Lane& l = lanes_[size_t(rows[k].lane)];
        // Rows of closing lanes, of requests that finished when the step before was reported, and
        // of free lanes keep their sampling: their results are discarded.
        if (rows[k].closing || !l.request || l.admit_order != rows[k].admission || !l.constraint) continue;
        steps[k].generated = l.generated; // now with the token this step appends
        constrain_sample(rows[k].lane, steps[k].sampling); // or the request ends ConstraintFailed
    }
    auto t0 = Clock::now();
    backend_.decode_sample(steps);
    stats_.t_decode_us_total += us_between(t0, Clock::now());
}

bool Scheduler::constrained_sample_in_flight() const {
    return std::any_of(lanes_.begin(), lanes_.end(), [](const Lane& l) {
        return l.request && l.decoding && l.constraint && l.samples_outstanding > 0;
    });
}

} // namespace ninfer::core
