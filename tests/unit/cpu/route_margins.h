// ninfer tests - how near the MoE router's choices for a prompt are to a tie, on the CPU: a backend
// whose arithmetic differs from the CPU's (the GPU's summation order, bf16 or int8 activations,
// weights rounded on the way) picks another expert set where the k-th and (k+1)-th router logits
// are closer than its error, and the row then departs from the CPU's by a whole expert's share.
//
// Contract:
// - run_prompt(weights, plan, ids, alter) runs ids as one forward of a fresh lane through the CPU
//   ModelRunner (one thread; GDN chunked as in a prefill; the plan must hold ids.size() tokens) and
//   returns every MoE layer's router logits as computed (RouteRecord, one per layer, rows =
//   tokens), the final-normed hidden rows and the last row's logits. alter (optional) may change a
//   layer's router logits before the routing uses them (what another expert choice gives); options
//   as the ModelRunner's (gdn_chunked = false: the recurrence, another f32 order of the same sums).
// - route_margins(trace, top_k): per (record, row) the k-th and (k+1)-th largest logits (the CPU's
//   order: ties to the lower id), their experts and the gap; smallest_margin picks the smallest gap
//   (rows at or after `from` only). swap_route(m, E) is an alter that swaps m's two experts' logits
//   in m's record and row (so the routing takes the left-out expert instead of the k-th).
// - with_bf16_vectors(w): w with the vectors the CUDA backend's serving kernels keep in bf16 (q/k
//   norms, the GDN gated norm and conv taps; core/cuda/device_weights.h) rounded to bf16 (RNE), in
//   the main layers and the MTP head's layer.
#pragma once

#include "core/formats/codec.h"
#include "tests/unit/cpu/lane_forward.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace ninfer::test {

// One MoE layer's router logits over one forward: layer l of the main model; [rows][num_experts].
struct RouteRecord {
    uint32_t layer = 0;
    size_t rows = 0;
    std::vector<float> logits;
};

struct PromptRun {
    std::vector<RouteRecord> routes; // every MoE layer's logits as computed (before `alter`)
    std::vector<float> hidden;       // final-normed hidden rows [tokens][H]
    std::vector<float> last_logits;  // the last row's logits
    std::vector<float> draft_logits; // [drafts][V]
};

inline PromptRun run_prompt(const core::ModelWeights& w, const core::MemoryPlan& plan,
                            std::span<const int32_t> ids,
                            const core::cpu::ModelRunner::RouteHook& alter = {},
                            core::cpu::ForwardOptions options = {}, int32_t next_token = 0,
                            int drafts = 0) {
    PromptRun run;
    LaneRun lane = run_fresh_lane(
        w, plan, ids,
        [&](uint32_t layer, size_t rows, float* logits) {
            run.routes.push_back(
                {layer, rows, std::vector<float>(logits, logits + rows * w.config.num_experts)});
            if (alter)
                alter(layer, rows, logits);
        },
        options, next_token, drafts);
    run.hidden = std::move(lane.hidden);
    run.last_logits = std::move(lane.last_logits);
    run.draft_logits = std::move(lane.draft_logits);
    return run;
}

struct RouteMargin {
    size_t record = 0; // index in the trace (the hook's call)
    size_t rows = 0;   // the record's rows
    uint32_t layer = 0;
    size_t row = 0;
    uint32_t expert_k = 0, expert_next = 0; // the k-th chosen expert and the first one left out
    float logit_k = 0, logit_next = 0;
    double gap = 0; // logit_k - logit_next (>= 0)
};

inline std::vector<RouteMargin> route_margins(const std::vector<RouteRecord>& trace,
                                              uint32_t top_k) {
    std::vector<RouteMargin> out;
    for (size_t i = 0; i < trace.size(); ++i) {
        const RouteRecord& rec = trace[i];
        const size_t E = rec.logits.size() / rec.rows;
        std::vector<uint32_t> order(E);
        for (size_t r = 0; r < rec.rows; ++r) {
            const float* p = rec.logits.data() + r * E;
            std::iota(order.begin(), order.end(), 0u);
            std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
                return p[a] > p[b] || (p[a] == p[b] && a < b);
            });
            const uint32_t a = order[top_k - 1], b = order[top_k];
            out.push_back({i, rec.rows, rec.layer, r, a, b, p[a], p[b], double(p[a]) - double(p[b])});
        }
    }
    return out;
}

inline RouteMargin smallest_margin(const std::vector<RouteMargin>& margins, size_t from = 0) {
    RouteMargin best;
    best.gap = 1e30;
    for (const RouteMargin& m : margins)
        if (m.row >= from && m.gap < best.gap)
            best = m;
    return best;
}

inline core::cpu::ModelRunner::RouteHook swap_route(const RouteMargin& m, uint32_t n_experts) {
    return [m, n_experts, call = size_t(0)](uint32_t, size_t, float* logits) mutable {
        if (call++ == m.record)
            std::swap(logits[m.row * n_experts + m.expert_k],
                      logits[m.row * n_experts + m.expert_next]);
    };
}

inline core::ModelWeights with_bf16_vectors(core::ModelWeights w) {
    auto round = [](std::vector<float>& v) {
        for (float& x : v)
            x = core::bf16_to_f32(core::f32_to_bf16(x));
    };
    auto layer = [&](core::LayerWeights& L) {
        round(L.attention.query_norm);
        round(L.attention.key_norm);
        round(L.gdn.norm);
        round(L.gdn.convolution);
    };
    for (core::LayerWeights& L : w.layers)
        layer(L);
    if (w.mtp)
        layer(w.mtp->layer);
    return w;
}

} // namespace ninfer::test
