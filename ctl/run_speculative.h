// ninfer::ctl - `ninferctl run --speculative` (and --json-schema / --grammar): the one generation
// through the engine's scheduler, which runs the draft -> verify -> accept rounds and applies a
// request's constraint (core/engine/scheduler.h), on one lane.
//
// Contract:
// - run_speculative(backend, plan, prompt, request, on_token) prefills the prompt and generates
//   with request.speculative (max_tokens clamped to what fits the plan's context), calling
//   on_token(id) for every reported token in order, and returns the scheduler's summary plus its
//   acceptance figures. The output equals the plain loop's for greedy sampling (speculation is
//   exact). The backend's plan must verify request.speculative->k drafts (MemoryRequest
//   max_draft_tokens) and, for mtp, hold the MTP head. ninfer::Error if the request is rejected.
// - speculative_stats_line(config, stats) is --stats' line: drafted, accepted, tokens per round.
#pragma once

#include "core/backend/backend.h"
#include "core/engine/engine_stats.h"
#include "core/engine/generation.h"
#include "core/model/memory_plan.h"

#include <functional>
#include <string>
#include <vector>

namespace ninfer::ctl {

struct SpeculativeRun {
    core::GenerationSummary summary;
    uint64_t rounds = 0, drafted = 0, accepted = 0;
};

SpeculativeRun run_speculative(core::Backend& backend, const core::MemoryPlan& plan, std::vector<int32_t> prompt,
                               core::GenerationRequest request, const std::function<void(int32_t)>& on_token);
std::string speculative_stats_line(const core::SpeculativeConfig& config, const SpeculativeRun& run);

} // namespace ninfer::ctl
