// ninfer tests - one fresh lane through the CPU ModelRunner: the final-normed hidden rows h_t of a
// token sequence (docs/MODEL.md §8: the MTP head's input), for the head's references
// (tests/unit/cpu/mtp_draft.cpp, tests/oracle/dump_hidden.cpp), and the MoE routes it takes
// (tests/unit/cpu/route_margins.h).
//
// Contract: run_fresh_lane(weights, plan, ids, route_hook, options) runs ids as one forward of a
// fresh lane (one thread; GDN chunked as in a prefill unless options say otherwise; the route hook
// as ModelRunner::set_route_hook's) and returns the final-normed hidden rows (ids.size() x
// hidden_size floats, row t = h_t) and the last row's logits; final_hidden_rows gives the rows.
// The plan must hold ids.size() tokens (KV pages, max_context); ids must be valid token ids.
#pragma once

#include "core/cpu/forward.h"
#include "core/cpu/lane_state.h"
#include "core/cpu/thread_pool.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::test {

struct LaneRun {
    std::vector<float> hidden;      // final-normed rows [ids][H]
    std::vector<float> last_logits; // the last row's logits
};

inline LaneRun run_fresh_lane(const core::ModelWeights &w, const core::MemoryPlan &plan,
                              std::span<const int32_t> ids,
                              core::cpu::ModelRunner::RouteHook route_hook = {},
                              core::cpu::ForwardOptions options = {}) {
    core::ThreadPool pool(1);
    core::cpu::KvStore kv(w.config, plan);
    core::cpu::ModelRunner runner(w, plan, kv, pool, options);
    runner.set_route_hook(std::move(route_hook));
    core::cpu::LaneState lane;
    lane.conv.assign(runner.conv_floats(), 0.0f);
    lane.recurrent.assign(runner.recurrent_floats(), 0.0f);
    kv.reserve(lane.pages, uint32_t(ids.size()));
    const core::cpu::RowSegment seg{&lane, 0, uint32_t(ids.size()), 0};
    runner.forward(std::span(&seg, 1), ids);
    LaneRun run;
    run.hidden.assign(runner.hidden(0), runner.hidden(0) + ids.size() * w.config.hidden_size);
    run.last_logits.resize(w.config.vocab_size);
    const size_t last = ids.size() - 1;
    runner.logits(std::span(&last, 1), run.last_logits.data());
    return run;
}

inline std::vector<float> final_hidden_rows(const core::ModelWeights &w,
                                            const core::MemoryPlan &plan,
                                            std::span<const int32_t> ids) {
    return run_fresh_lane(w, plan, ids).hidden;
}

} // namespace ninfer::test
