// ninfer::core - a constrained lane's speculative drafts, checked on the host (issue 32 item 5):
// the grammar cuts the draft run where it refuses a token, and every verify row is sampled under
// the mask the constraint has after the drafts before it, so a round reports exactly what plain
// constrained decoding would (greedy: the same tokens; sampling: the same distribution).
//
// Contract:
// - check_drafts(constraint, drafts, vocab) walks the constraint through the drafts and back: on
//   return it is in the state it had (the drafts it accepted are rolled back; the scheduler feeds
//   it only the tokens a round reports, one by one). kept: the longest prefix of the drafts such
//   that the constraint accepts each of them and still allows some id below vocab after it; the
//   run also stops after a draft that finishes the constraint (nothing after it can be reported).
//   So an end token is never kept as a draft (nothing is allowed after it): the row before it
//   samples it as plain decoding would. masks holds kept + 1 bitsets of token_mask_words(vocab)
//   words: row j is what the constraint allows after drafts 0..j-1 (row 0: its mask now). Row 0
//   may allow nothing (the caller ends the request ConstraintFailed, as a plain step would); rows
//   1..kept allow at least one id. Cost: kept + 1 fill_mask calls, kept + 1 accept, one rollback.
// - accept_masked_drafts(rows, vocab, masks, drafts, params, generated) is accept_drafts (core/
//   backend/speculative.h) with row j under masks row j: every id the row's mask does not allow
//   gets -inf first, which is what the sampler does with SamplingParams::allowed_tokens before
//   bias, penalties and temperature. So the acceptance rule and its proof are accept_drafts',
//   applied to the distributions plain constrained decoding samples from. params.allowed_tokens
//   must be empty (the rows carry the masks). Errors: accept_drafts', and ninfer::Error
//   ("speculative: ...") when masks does not hold drafts.size() + 1 rows of vocab's words.
// Thread safety: engine thread (the constraint is the lane's).
#pragma once

#include "core/backend/speculative.h"
#include "core/backend/token_constraint.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core {

struct CheckedDrafts {
    size_t kept = 0;
    std::vector<uint32_t> masks; // (kept + 1) rows of token_mask_words(vocab) words
};

CheckedDrafts check_drafts(TokenConstraint& constraint, std::span<const int32_t> drafts, uint32_t vocab);

DraftAcceptance accept_masked_drafts(std::span<float> rows, size_t vocab, std::span<const uint32_t> masks,
                                     std::span<const int32_t> drafts, const SamplingParams& params,
                                     std::span<const int32_t> generated);

} // namespace ninfer::core
