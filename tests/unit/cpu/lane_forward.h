// ninfer tests - one fresh lane through the CPU ModelRunner: the final-normed hidden rows h_t of a
// token sequence (docs/MODEL.md §8: the MTP head's input), for the head's references
// (tests/unit/cpu/mtp_draft.cpp, tests/oracle/dump_hidden.cpp), and the MoE routes it takes
// (tests/unit/cpu/route_margins.h).
//
// Contract: run_fresh_lane(weights, plan, ids, route_hook, options) runs ids as one forward of a
// fresh lane (one thread; GDN chunked as in a prefill unless options say otherwise; the route hook
// as ModelRunner::set_route_hook's) and returns the final-normed hidden rows (ids.size() x
// hidden_size floats, row t = h_t) and the last row's logits; with drafts > 0 (weights with the MTP
// head, a plan with mtp) also the head's greedy drafts after next_token as draft_mtp makes them
// (their logits rows). final_hidden_rows gives the rows.
// The plan must hold ids.size() + drafts tokens (KV pages, max_context); ids must be valid token ids.
#pragma once

#include "core/cpu/forward.h"
#include "core/cpu/lane_state.h"
#include "core/cpu/thread_pool.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::test {

struct LaneRun {
    std::vector<float> hidden;       // final-normed rows [ids][H]
    std::vector<float> last_logits;  // the last row's logits
    std::vector<float> draft_logits; // [drafts][V]: the MTP head's greedy chain after next_token
};

inline LaneRun run_fresh_lane(const core::ModelWeights& w, const core::MemoryPlan& plan,
                              std::span<const int32_t> ids,
                              core::cpu::ModelRunner::RouteHook route_hook = {},
                              core::cpu::ForwardOptions options = {}, int32_t next_token = 0,
                              int drafts = 0) {
    const size_t n = ids.size(), H = w.config.hidden_size, V = w.config.vocab_size;
    core::ThreadPool pool(1);
    core::cpu::KvStore kv(w.config, plan);
    core::cpu::ModelRunner runner(w, plan, kv, pool, options);
    runner.set_route_hook(std::move(route_hook));
    core::cpu::LaneState lane;
    lane.conv.assign(runner.conv_floats(), 0.0f);
    lane.recurrent.assign(runner.recurrent_floats(), 0.0f);
    kv.reserve(lane.pages, uint32_t(n + size_t(drafts)));
    const core::cpu::RowSegment seg{&lane, 0, uint32_t(n), 0};
    runner.forward(std::span(&seg, 1), ids);
    LaneRun run;
    run.hidden.assign(runner.hidden(0), runner.hidden(0) + n * H);
    run.last_logits.resize(V);
    size_t row = n - 1;
    runner.logits(std::span(&row, 1), run.last_logits.data());
    // The head (docs/MODEL.md §8) over (h_t, x_{t+1}) at every position, then each draft fed back
    // with its own output row at the next position.
    std::vector<int32_t> next(ids.begin() + 1, ids.end());
    next.push_back(next_token);
    std::vector<float> d = run.hidden;
    core::cpu::RowSegment at = seg;
    run.draft_logits.resize(size_t(drafts) * V);
    for (int j = 0; j < drafts; ++j) {
        runner.mtp_forward(std::span(&at, 1), next, d.data());
        float* out = run.draft_logits.data() + size_t(j) * V;
        runner.logits(std::span(&row, 1), out);
        d.assign(runner.hidden(row), runner.hidden(row) + H);
        next = {int32_t(std::max_element(out, out + V) - out)};
        at = core::cpu::RowSegment{&lane, uint32_t(n + size_t(j)), 1, 0};
        row = 0;
    }
    return run;
}

inline std::vector<float> final_hidden_rows(const core::ModelWeights& w,
                                            const core::MemoryPlan& plan,
                                            std::span<const int32_t> ids) {
    return run_fresh_lane(w, plan, ids).hidden;
}

} // namespace ninfer::test
