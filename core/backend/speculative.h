// ninfer::core - accepting drafts after a verify step (issue 28, docs/MODEL.md §8 "Verification"),
// the rule every backend's speculative round follows, so that the output equals plain decoding.
//
// Contract:
// - accept_drafts(rows, drafts, params, generated) looks at one lane's verify logits: rows holds
//   (drafts.size() + 1) rows of vocab floats, row j being the logits after window token j (token 0
//   is the last sampled token, tokens 1..K the drafts). It returns how many drafts are accepted
//   (m, 0..K) and the token that follows them (the correction, or the bonus when m == K).
// - Greedy params: the drafts equal to the argmax of the row before them are accepted; the next
//   token is the argmax of row m. The output is the plain greedy output token for token.
// - Sampling params (speculative sampling with one-hot drafts): draft j is accepted with
//   probability P_j(draft j), P_j being row j's distribution under sample_token's rules
//   (sampling_candidates), using the uniform sampling_uniform(accept_seed(seed), step + j); the
//   first rejected draft is replaced by a draw from P_j without it (renormalised) using
//   sampling_uniform(seed, step + j); when all are accepted the bonus is row K's plain draw
//   (sample_token with step + K). So every token follows the plain sampler's distribution.
// - params.step is the step of row 0's token; row j uses step + j. generated: the ids generated
//   before this round, token 0 included; row j's penalties also count drafts 0..j-1.
// - rows are modified (bias, penalties, temperature), as sample_token modifies its logits.
//   ninfer::Error("speculative: ...") when rows does not hold drafts.size() + 1 rows of vocab.
// - greedy_argmax_rows(rows, vocab): the greedy pick of every row (the argmax, ties to the lower
//   id, a NaN first value wins: sample_token's greedy rule). ninfer::Error when rows is not a
//   whole number of vocab rows.
// - greedy_fast_path(params, constrained, logprobs, n_top): whether a lane's round can be accepted
//   from the rows' greedy picks alone (accept_greedy_ids): greedy, no logit bias, no penalties, no
//   constraint, no logprobs (nothing reads the rows but the argmax).
// - accept_greedy_ids(ids, drafts) is accept_drafts' greedy rule for such a lane from ids[j], the
//   greedy pick of row j (drafts.size() + 1 of them): the longest prefix of drafts with
//   drafts[j] == ids[j] is accepted, next_token = ids[m]. Equal to accept_drafts on the rows the
//   ids came from. ninfer::Error("speculative: ...") when ids.size() != drafts.size() + 1.
// Thread safety: pure functions.
#pragma once

#include "core/backend/sampling.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core {

struct DraftAcceptance {
    uint32_t accepted = 0;  // m
    int32_t next_token = 0; // the token after the accepted drafts
};

DraftAcceptance accept_drafts(std::span<float> rows, size_t vocab, std::span<const int32_t> drafts,
                              const SamplingParams& params, std::span<const int32_t> generated);

std::vector<int32_t> greedy_argmax_rows(std::span<const float> rows, size_t vocab);
bool greedy_fast_path(const SamplingParams& params, bool constrained, bool logprobs, int n_top);
DraftAcceptance accept_greedy_ids(std::span<const int32_t> ids, std::span<const int32_t> drafts);

// The seed of the acceptance uniforms: a stream apart from the draws' (seed, step) stream.
inline uint64_t accept_seed(uint64_t seed) { return seed ^ 0xA5C3E1F00F1E3C5Aull; }

} // namespace ninfer::core
