// ninfer::core - Backend's default greedy round: verify_greedy, accept_greedy_ids, accept_verified, draft_mtp.
#include "core/backend/backend.h"

#include <string>

namespace ninfer::core {

// The calls backend.h names, in order: a backend without a round of its own (the CPU backend)
// gives the same result, so the scheduler takes one path on every backend.
void Backend::verify_accept_greedy(std::span<const GreedyRoundStep> steps, GreedyRoundResult& result) {
    std::vector<VerifyStep> windows;
    for (const GreedyRoundStep& st : steps) {
        if (st.forced_keep > st.tokens.size())
            throw Error("backend: keep " + std::to_string(st.forced_keep) + " of a " +
                        std::to_string(st.tokens.size()) + "-token verify window");
        windows.push_back({st.lane, st.tokens});
    }
    std::vector<float> no_rows;
    verify_greedy(windows, std::vector<uint8_t>(steps.size(), 0), no_rows, result.ids);
    result.n_keep.clear();
    result.drafts.assign(steps.size(), {});
    std::vector<DraftRequest> heads;
    std::vector<size_t> head_of;
    size_t at = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
        const size_t n = steps[i].tokens.size();
        const std::span<const int32_t> ids = std::span(result.ids).subspan(at, n);
        at += n;
        const uint32_t keep = steps[i].forced_keep ? steps[i].forced_keep
                                                   : accept_greedy_ids(ids, steps[i].tokens.subspan(1)).accepted + 1;
        result.n_keep.push_back(keep);
        accept_verified(steps[i].lane, keep);
        if (steps[i].next_k > 0) {
            heads.push_back({steps[i].lane, ids[keep - 1], steps[i].next_k});
            head_of.push_back(i);
        }
    }
    if (heads.empty())
        return;
    std::vector<std::vector<int32_t>> drafts = draft_mtp(heads, nullptr);
    for (size_t q = 0; q < head_of.size(); ++q)
        result.drafts[head_of[q]] = std::move(drafts.at(q));
}

} // namespace ninfer::core
