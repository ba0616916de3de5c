// ninfer::core - device time per phase on one stream (phase_timer.h).
#include "core/cuda/phase_timer.h"

#include "core/cuda/device_weights.h"

#include <algorithm>
#include <cstdio>

namespace ninfer::core::cuda {

PhaseTimer::PhaseTimer(std::vector<std::string> names, bool enabled)
    : names_(std::move(names)), ms_(names_.size(), 0.0), enabled_(enabled) {}

PhaseTimer::~PhaseTimer() {
    for (cudaEvent_t e : events_)
        if (e) cudaEventDestroy(e);
}

void PhaseTimer::record(cudaStream_t stream, int phase) {
    if (!enabled_) return;
    for (cudaEvent_t& e : events_)
        if (!e) cuda_check(cudaEventCreate(&e), "phase timer");
    const int now = 1 - last_;
    cuda_check(cudaEventRecord(events_[now], stream), "phase timer");
    if (phase >= 0 && size_t(phase) < ms_.size()) {
        cuda_check(cudaEventSynchronize(events_[now]), "phase timer");
        float ms = 0;
        cuda_check(cudaEventElapsedTime(&ms, events_[last_], events_[now]), "phase timer");
        ms_[size_t(phase)] += ms;
    }
    last_ = now;
}

void PhaseTimer::report(const std::string& title) {
    if (!enabled_) return;
    std::fprintf(stderr, "%s:", title.c_str());
    for (size_t p = 1; p < names_.size(); ++p) std::fprintf(stderr, " %s %.2f ms", names_[p].c_str(), ms_[p]);
    std::fprintf(stderr, "\n");
    std::fill(ms_.begin(), ms_.end(), 0.0);
}

} // namespace ninfer::core::cuda
