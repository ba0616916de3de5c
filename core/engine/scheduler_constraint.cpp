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

bool Scheduler::constrained_sample_in_flight() const {
    return std::any_of(lanes_.begin(), lanes_.end(), [](const Lane& l) {
        return l.request && l.decoding && l.constraint && l.samples_outstanding > 0;
    });
}

} // namespace ninfer::core
