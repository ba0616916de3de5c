// ninfer::core - the CUDA MTP head in a greedy round: catch-up over the window, drafts placed by the device's keep.
#include "core/cuda/mtp_head.h"

#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core::cuda {

int MtpHead::round_slots() const {
    // Catch-up rows: fewer than kRingRows per lane (clamp_pending); then each draft step's blocks.
    const int step_blocks = (plan_.n_lanes + kMaxStepTokens - 1) / kMaxStepTokens;
    return plan_.n_lanes * (kRingRows / kMaxStepTokens) + drafts_w_ * step_blocks;
}

std::vector<int> MtpHead::stage_round(std::span<const RoundLane> lanes,
                                      const std::function<void(int, size_t)>& reserve) {
    round_blocks_.clear();
    std::vector<int> k(lanes.size(), 0);
    for (const RoundLane& q : lanes) { // every lane checked before any state moves
        if (q.k < 1 || uint32_t(q.k) > plan_.max_draft_tokens)
            throw Error("backend: " + std::to_string(q.k) + " drafts asked, the plan allows 1.." +
                        std::to_string(plan_.max_draft_tokens));
        if (q.count < 1 || q.tokens.size() != size_t(q.start) + q.count)
            throw Error("backend: a greedy round's lane " + std::to_string(q.lane) + " does not end with its window");
        const uint32_t from = std::min<size_t>(mtp_length_.at(size_t(q.lane)) + 1, q.tokens.size());
        if (std::find(q.tokens.begin() + from, q.tokens.end(), -1) != q.tokens.end())
            throw Error("backend: a greedy round on lane " + std::to_string(q.lane) +
                        " while one of its decode steps is not ended");
    }
    // The drafts of the longest keep (the whole window) must fit max-context and the lane's pages:
    // the host learns the keep only after the round.
    for (size_t i = 0; i < lanes.size(); ++i) {
        const RoundLane& q = lanes[i];
        const uint32_t longest = q.start + q.count;
        const size_t room = plan_.max_context > longest + 1 ? plan_.max_context - longest - 1 : 0;
        k[i] = mtp_length_.at(size_t(q.lane)) <= q.start ? int(std::min<size_t>(size_t(q.k), room)) : 0;
        if (k[i] > 1)
            reserve(q.lane, size_t(longest) + size_t(k[i]) - 1);
    }
    std::vector<Row> rows, firsts;
    int k_max = 0;
    for (size_t i = 0; i < lanes.size(); ++i) {
        if (k[i] == 0)
            continue;
        const RoundLane& q = lanes[i];
        const uint32_t end = q.start + q.count;
        clamp_pending(q.lane, end);
        // Every position but the window's last, with its next token: the kept ones and, past them,
        // scratch rows (their K/V are written again before any row attends to them).
        for (uint32_t t = mtp_length_.at(size_t(q.lane)); t + 1 < end; ++t)
            rows.push_back(pending_row(q.lane, t, q.tokens[t + 1]));
        firsts.push_back({q.lane, end - 1, 0, int(i), std::nullopt, -1}); // token and position: the device's
        k_max = std::max(k_max, k[i]);
    }
    if (k_max == 0)
        return k;
    // Each block's inputs in its own pinned slot: a round's graph copies them when it runs.
    auto add = [&](const std::vector<Row>& block_rows, size_t b0, size_t b1, int column, bool keep, bool device) {
        if (round_blocks_.size() >= size_t(round_slots()))
            throw Error(Errc::Internal, "cuda: a greedy round of more than " + std::to_string(round_slots()) +
                                            " MTP blocks");
        int32_t* slot = round_in_host_ + round_blocks_.size() * 3 * kMaxStepTokens;
        round_blocks_.push_back({stage_block(block_rows, b0, b1, slot), column, keep, device});
    };
    for (size_t b0 = 0; b0 < rows.size(); b0 += kMaxStepTokens)
        add(rows, b0, std::min(rows.size(), b0 + kMaxStepTokens), 0, false, false);
    for (int j = 0; j < k_max; ++j) { // draft j + 1 at position start + n_keep - 1 + j
        std::vector<Row> step;
        for (const Row& f : firsts)
            if (k[size_t(f.request)] > j)
                step.push_back(f);
        for (size_t b0 = 0; b0 < step.size(); b0 += kMaxStepTokens)
            add(step, b0, std::min(step.size(), b0 + kMaxStepTokens), j, j + 1 < k_max, true);
    }
    return k;
}

bool MtpHead::round_key(std::vector<int>& key) const {
    for (const RoundBlock& r : round_blocks_) {
        if (r.block.multimodal) // its positions and rows go up from pageable memory
            return false;
        key.insert(key.end(), {r.block.n, r.block.first_draft, r.column, int(r.keep), int(r.device)});
    }
    return true;
}

void MtpHead::enqueue_round(const RoundInputs& device) {
    for (const RoundBlock& r : round_blocks_)
        enqueue_block(r.block, r.column, false, r.keep, {}, r.device ? &device : nullptr);
}

void MtpHead::read_round_drafts() const {
    cuda_check(cudaMemcpyAsync(drafts_host_, drafts_, size_t(plan_.n_lanes) * size_t(drafts_w_) * 4,
                               cudaMemcpyDeviceToHost, run_.stream()), "MTP drafts");
}

std::vector<int32_t> MtpHead::round_drafts(int lane, int k) const {
    const int32_t* row = drafts_host_ + size_t(lane) * size_t(drafts_w_);
    return {row, row + std::clamp(k, 0, drafts_w_)};
}

} // namespace ninfer::core::cuda
