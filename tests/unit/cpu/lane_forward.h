// ninfer tests - one fresh lane through the CPU ModelRunner: the final-normed hidden rows h_t of a
// token sequence (docs/MODEL.md §8: the MTP head's input), for the head's references
// (tests/unit/cpu/mtp_draft.cpp, tests/oracle/dump_hidden.cpp).
//
// Contract: final_hidden_rows(weights, plan, ids) runs ids as one forward of a fresh lane (one
// thread; GDN chunked as in a prefill) and returns ids.size() x hidden_size floats, row t = h_t.
// The plan must hold ids.size() tokens (KV pages, max_context); ids must be valid token ids.
#pragma once

#include "core/cpu/forward.h"
#include "core/cpu/lane_state.h"
#include "core/cpu/thread_pool.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::test {

inline std::vector<float> final_hidden_rows(const core::ModelWeights& w, const core::MemoryPlan& plan,
                                            std::span<const int32_t> ids) {
    core::ThreadPool pool(1);
    core::cpu::KvStore kv(w.config, plan);
    core::cpu::ModelRunner runner(w, plan, kv, pool);
    core::cpu::LaneState lane;
    lane.conv.assign(runner.conv_floats(), 0.0f);
    lane.recurrent.assign(runner.recurrent_floats(), 0.0f);
    kv.reserve(lane.pages, uint32_t(ids.size()));
    const core::cpu::RowSegment seg{&lane, 0, uint32_t(ids.size()), 0};
    runner.forward(std::span(&seg, 1), ids);
    return std::vector<float>(runner.hidden(0), runner.hidden(0) + ids.size() * w.config.hidden_size);
}

} // namespace ninfer::test
