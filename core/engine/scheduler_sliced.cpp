// ninfer::core - the scheduler's layer-sliced prefill: a chunk a few layers per round, with the
// decoders' step between its slices (issue 27; scheduler.h's contract).
#include "core/engine/scheduler.h"

#include <algorithm>

namespace ninfer::core {

bool Scheduler::any_decoding() const {
    return std::any_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.request && l.decoding; });
}

// Slices only pay while some lane waits for its next token. Media chunks (prefill_with) and
// speculative rounds (verify, draft_mtp) are outside Backend::prefill_begin's contract.
bool Scheduler::slice_chunk(const Lane& lane) const {
    if (options_.prefill_slice_layers == 0 || !lane.request->media.empty()) return false;
    bool decoding = false;
    for (const Lane& l : lanes_) {
        if (!l.request || !l.decoding) continue;
        if (l.speculative.on()) return false;
        decoding = true;
    }
    return decoding;
}

void Scheduler::begin_sliced_chunk(int lane_index, std::span<const int32_t> chunk, bool last) {
    const auto t0 = Clock::now();
    backend_.prefill_begin(lane_index, chunk, last ? LogitsOut::Last : LogitsOut::None, nullptr);
    slicing_ = SlicedChunk{lane_index, uint32_t(chunk.size()), last, us_between(t0, Clock::now())};
    advance_sliced_chunk(); // this round's slice
}

// One slice; once no lane decodes any more, the rest of the chunk at once.
void Scheduler::advance_sliced_chunk() {
    SlicedChunk& c = *slicing_;
    const auto t0 = Clock::now();
    const bool done = backend_.prefill_advance(any_decoding() ? int(options_.prefill_slice_layers) : 0);
    const auto t1 = Clock::now();
    c.host_us += us_between(t0, t1);
    ++stats_.n_prefill_slices_total;
    if (!done) return;
    const SlicedChunk finished = c;
    slicing_.reset();
    chunk_prefilled(finished.lane, finished.n, finished.last, t1 - std::chrono::microseconds(finished.host_us));
}

} // namespace ninfer::core
