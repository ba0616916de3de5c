// ninfer tests (GPU) - shared by the CUDA speculation tests: a fixture's plan with verify windows
// and the comparison rule for logit rows computed by two paths.
//
// Contract: spec_plan(model, K) is load()'s plan (8 lanes of 512 tokens, the model's KV dtype) with
// max_draft_tokens K. same_or_near_tie(got, ref) is the issue 28 rule for a row of one path against
// the same row of another: bit-equal, or (counted as differing) cosine >= 0.9999 and the same
// argmax unless the reference's top-2 gap is under 0.01 (a near tie may flip).
#pragma once

#include "tests/gpu/fixture_models.h"

#include <cmath>
#include <vector>

namespace ninfer::test {

inline MemoryPlan spec_plan(const Model& m, uint32_t max_draft_tokens) {
    MemoryRequest mr;
    mr.max_context = m.plan.max_context;
    mr.max_concurrency = m.plan.n_lanes;
    mr.weight_bytes = m.weights.stored_bytes();
    mr.available_bytes = 1ull << 34;
    mr.prefill_chunk = m.plan.prefill_chunk;
    mr.kv_dtype = m.plan.kv_dtype;
    mr.max_draft_tokens = max_draft_tokens;
    return MemoryPlan::make(m.weights.config, mr);
}

// The gap between the largest and second-largest logit of a row.
inline float top2_gap(const std::vector<float>& row) {
    float first = -INFINITY, second = -INFINITY;
    for (float x : row) {
        if (x > first) second = first, first = x;
        else if (x > second) second = x;
    }
    return first - second;
}

struct RowTally {
    size_t rows = 0, differing = 0;
};

inline void same_or_near_tie(const std::vector<float>& got, const std::vector<float>& ref, RowTally& tally) {
    REQUIRE(got.size() == ref.size());
    ++tally.rows;
    if (got == ref) return;
    ++tally.differing;
    CHECK(cosine(got, ref) >= 0.9999);
    if (top2_gap(ref) >= 0.01f) CHECK(argmax(got) == argmax(ref));
}

} // namespace ninfer::test
