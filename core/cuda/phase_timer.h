// ninfer::core - device time per phase of a sequence of work on one stream (a development aid:
// the GPU vision tower's NINFER_VISION_PROFILE).
//
// Contract: PhaseTimer(names, enabled) with the phases' names (index 0 unused: the start). When
// enabled, start(stream) records the start; end(stream, p) records an event, waits for it, and
// adds the time since the previous start/end to phase p; report(title) prints one line of every
// phase's sum to stderr and clears them. When disabled every call returns at once (no event is
// created). The waits serialise the stream with the host: for profiling only, never in serving.
// Throws ninfer::Error("cuda: ...") when an event call fails.
// Thread safety: one caller (the stream's owner).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace ninfer::core::cuda {

class PhaseTimer {
  public:
    PhaseTimer(std::vector<std::string> names, bool enabled);
    ~PhaseTimer();
    PhaseTimer(const PhaseTimer&) = delete;
    PhaseTimer& operator=(const PhaseTimer&) = delete;

    bool enabled() const { return enabled_; }
    void start(cudaStream_t stream) { record(stream, -1); }
    void end(cudaStream_t stream, int phase) { record(stream, phase); }
    void report(const std::string& title);

  private:
    void record(cudaStream_t stream, int phase);

    std::vector<std::string> names_;
    std::vector<double> ms_;
    bool enabled_;
    cudaEvent_t events_[2] = {};
    int last_ = 0;
};

} // namespace ninfer::core::cuda
