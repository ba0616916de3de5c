// ninfer::core - the speculative round's cost on the CUDA backend (issue 28, `ninferctl bench
// --speculative ngram:K | mtp:K`): rounds of draft -> verify -> accept with the acceptance forced,
// because synthetic weights accept nothing on their own.
//
// Contract:
// - bench_speculative_rounds(backend, setup, rep) runs, on lanes 0..setup.batch-1 each restored
//   from setup.image, for each forced acceptance (all drafts, then a fixed 75% pattern: round s
//   accepts floor(0.75 K (s + 1)) - floor(0.75 K s) drafts), one warm-up round (graph capture)
//   and setup.rounds timed rounds, and appends one SpecBenchRow per acceptance to rep. A round is
//   what the scheduler's round costs: the drafts (mtp: Backend::draft_mtp, the head's own drafts,
//   whose acceptance the pattern then overrides; ngram: none on the device, prompt lookup is
//   host work of microseconds, so the drafts are fixed ids), verify_greedy (the scheduler's
//   greedy path: the rows' greedy ids come back, the rows stay on the device), the greedy
//   acceptance over those ids (accept_greedy_ids, its result replaced by the pattern) and
//   accept_verified. Host clock around each round; the median. Each acceptance is timed twice:
//   round "split" as above, then round "fused": Backend::verify_accept_greedy with the kept count
//   forced (one host synchronisation on the GPU) launched eagerly, its MTP drafts the next
//   round's (the first round drafts with draft_mtp, as the scheduler's first round after a
//   prefill does), then round "graph": the same with the round's device work as one CUDA graph
//   per shape (set_cuda_round_graphs; the backend is left with them on; the row says how many
//   graphs the backend holds and what one captured in its warm-up costs in free device memory).
// - The backend's plan must verify setup.k drafts (max_draft_tokens) and hold setup.rounds + 1
//   rounds of k + 1 tokens past the image in every lane's context; mtp needs has_mtp().
// - SpecBenchRow.cost_x = round_ms / step_ms, the plain decode step of the same batch and depth
//   (setup.step_ms); floor_ms, when the caller measured a plain step of batch x (k + 1) lanes at
//   that depth, is that step (the round's floor without drafting; 0 when not measured).
// Thread safety: as the backend (engine thread only).
#pragma once

#include "core/backend/backend.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::core {

struct SpecBenchRow {
    std::string drafter;      // "ngram" or "mtp"
    int k = 0, batch = 0;
    uint32_t depth = 0;
    std::string accept;       // "all" or "75%"
    std::string round = "split"; // "split" (draft_mtp, verify_greedy, accept_verified), "fused" (verify_accept_greedy
                                 // launched eagerly) or "graph" (verify_accept_greedy as one graph per shape)
    int rounds = 0;
    double tokens_per_round = 0; // mean tokens a lane keeps per round (accepted drafts + the bonus)
    double round_ms = 0, min_round_ms = 0, max_round_ms = 0; // median, fastest, slowest round
    double step_ms = 0, cost_x = 0, floor_ms = 0;
    double tokens_per_s = 0; // batch x tokens_per_round / round_ms
    // Round "graph": the backend's round graphs after the warm-up, and the device memory each one
    // captured in the warm-up took (0 when it captured none: the shape's graph was there).
    size_t round_graphs = 0;
    double graph_mib = 0;
};

struct SpecBenchSetup {
    int k = 1;
    bool mtp = false;
    int batch = 1;
    uint32_t depth = 0;
    int rounds = 32;
    uint32_t token_ids = 1; // ids drawn below this
    const LaneImage* image = nullptr;
    double step_ms = 0;
};

void bench_speculative_rounds(Backend& backend, const SpecBenchSetup& setup, std::vector<SpecBenchRow>& rows);

// One human line per row.
std::string spec_bench_row_text(const SpecBenchRow& row);

} // namespace ninfer::core
