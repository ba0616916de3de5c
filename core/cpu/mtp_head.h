// ninfer::core - the CPU backend's MTP head driver (docs/MODEL.md §8): it feeds the head the main
// model's final hidden states as their next tokens become known, and drafts tokens for speculative
// decoding.
//
// Contract:
// - The head's position t takes (h_t, x_{t+1}): the main model's final-normed hidden state at t and
//   the token after it, and writes the MTP layer's K/V at position t (ModelRunner::mtp_forward).
//   A lane keeps the hidden rows of positions [mtp_length, tokens.size()) until their next token is
//   known (LaneState::mtp_hidden); keep_hidden appends a step's rows, catch_up consumes every row
//   whose next token is known, so a whole prompt passes causally through the head while it is
//   prefilled and the pending rows stay few (one after a prefill or decode, the kept ones after a
//   verify).
// - draft(lanes, requests, logits) is Backend::draft_mtp (backend.h) over the CPU lanes: one batched
//   catch-up that gives each lane's first draft, then one batched head step per further draft, the
//   head's own output d fed back as the next hidden state. Greedy (argmax, the lower id on ties).
//   The lane's last position n-1, fed with next_token, stays pending (the next pass feeds it again
//   with the token actually appended), so drafting changes no lane state and can be repeated.
//   Draft positions n-1..n+k-2 write scratch K/V rows that the next catch-up overwrites before any
//   position attends to them; mtp_length never counts them.
// - Multimodal lanes (backend.h prefill_with): position t runs at the main model's RoPE position
//   of token t (LaneState::mtp_rope), and when x_{t+1} is a placeholder of the chunk being
//   prefilled its input is the tower's row (LaneState::mtp_chunk), as docs/MODEL.md §8 says. Draft
//   positions past the lane take text positions (length + rope offset on).
// - Pages: draft reserves the lane's pages up to position n + k - 2 (KvStore::reserve, which throws
//   "backend: KV pool full" before anything ran).
// Thread safety: engine thread only; it reuses the runner's buffers (hidden() is overwritten).
#pragma once

#include "core/cpu/forward.h"
#include "core/cpu/lane_state.h"
#include "core/backend/backend.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core::cpu {

class MtpHead {
  public:
    MtpHead(const ModelWeights& weights, const MemoryPlan& plan, ModelRunner& runner, KvStore& kv);

    // Appends the hidden rows the runner left for these segments to their lanes' pending rows.
    void keep_hidden(std::span<const RowSegment> segments);
    // Feeds every pending position of these lanes whose next token is known: the lane's tokens,
    // then next_tokens[i] when it is >= 0.
    void catch_up(std::span<LaneState* const> lanes, std::span<const int32_t> next_tokens);
    std::vector<std::vector<int32_t>> draft(std::span<LaneState* const> lanes,
                                            std::span<const DraftRequest> requests,
                                            std::vector<std::vector<float>>* logits);

  private:
    // One head pass over what catch_up feeds; returns, per lane, the step row of its last position
    // fed (or SIZE_MAX when none was).
    // keep_last: the position fed with next_tokens[i] stays pending (a draft's).
    std::vector<size_t> feed(std::span<LaneState* const> lanes, std::span<const int32_t> next_tokens,
                             bool keep_last);

    const ModelConfig& c_;
    const MemoryPlan& plan_;
    ModelRunner& runner_;
    KvStore& kv_;
    std::vector<RowSegment> segs_;
    std::vector<int32_t> tokens_, embedding_rows_;
    std::vector<MropePosition> rope_;
    std::vector<float> hidden_, logits_, fed_back_;
};

} // namespace ninfer::core::cpu
