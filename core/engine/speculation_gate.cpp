// ninfer::core - the speculating lanes' acceptance rule (speculation_gate.h).
#include "core/engine/speculation_gate.h"

#include <algorithm>

namespace ninfer::core {

void SpeculationGate::after_round(uint32_t drafted, uint32_t accepted, const SpeculationPolicy& policy) {
    const uint32_t slot = rounds_ % kWindow;
    drafted_[slot] = uint16_t(std::min<uint32_t>(drafted, 0xffff));
    accepted_[slot] = uint16_t(std::min<uint32_t>(accepted, drafted_[slot]));
    ++rounds_;
    // A full window first; after a pause, a probe of kProbe rounds.
    if (policy.min_acceptance <= 0 || rounds_ < (probing_ ? kProbe : kWindow)) return;
    uint32_t d = 0, a = 0;
    for (uint32_t i = 0; i < std::min(rounds_, kWindow); ++i) { // the latest rounds only
        const uint32_t s = (rounds_ - 1 - i) % kWindow;
        d += drafted_[s], a += accepted_[s];
    }
    // A window without drafts (n-gram lookup found nothing) costs rounds like any other.
    if (d > 0 && float(a) >= policy.min_acceptance * float(d)) {
        next_pause_ = kFirstPause; // the drafts fit (again)
        probing_ = false;
        return;
    }
    paused_steps_ = next_pause_;
    next_pause_ = std::min(next_pause_ * 2, kMaxPause);
    ++pauses_;
    rounds_ = 0; // the probe after the pause is judged on its own rounds
    probing_ = true;
}

} // namespace ninfer::core
