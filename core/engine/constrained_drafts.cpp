// ninfer::core - a constrained lane's drafts checked against its grammar, and their masked acceptance.
#include "core/engine/constrained_drafts.h"

#include "core/util/error.h"

#include <string>

namespace ninfer::core {

CheckedDrafts check_drafts(TokenConstraint& constraint, std::span<const int32_t> drafts, uint32_t vocab) {
    const size_t words = token_mask_words(vocab);
    CheckedDrafts out;
    out.masks.assign(words, 0u);
    constraint.fill_mask(out.masks);
    size_t accepted = 0;
    try {
        while (out.kept < drafts.size() && !constraint.finished() &&
               token_mask_test(std::span(out.masks).subspan(out.kept * words, words), drafts[out.kept]) &&
               constraint.accept(drafts[out.kept])) {
            ++accepted;
            out.masks.resize(out.masks.size() + words, 0u);
            const std::span<uint32_t> next = std::span(out.masks).subspan((out.kept + 1) * words, words);
            constraint.fill_mask(next);
            if (token_mask_count(next, vocab) == 0) { // a dead end (or an end token): not a draft
                out.masks.resize(out.masks.size() - words);
                break;
            }
            ++out.kept;
        }
    } catch (...) {
        constraint.rollback(accepted);
        throw;
    }
    constraint.rollback(accepted);
    return out;
}

DraftAcceptance accept_masked_drafts(std::span<float> rows, size_t vocab, std::span<const uint32_t> masks,
                                     std::span<const int32_t> drafts, const SamplingParams& params,
                                     std::span<const int32_t> generated) {
    const size_t words = token_mask_words(uint32_t(vocab));
    if (!params.allowed_tokens.empty() || masks.size() != (drafts.size() + 1) * words)
        throw Error("speculative: " + std::to_string(masks.size()) + " mask words for " +
                    std::to_string(drafts.size()) + " drafts of vocabulary " + std::to_string(vocab) +
                    (params.allowed_tokens.empty() ? "" : " beside the sampler's own mask"));
    if (rows.size() != (drafts.size() + 1) * vocab) // accept_drafts says so
        return accept_drafts(rows, vocab, drafts, params, generated);
    for (size_t j = 0; j <= drafts.size(); ++j)
        apply_token_mask(rows.subspan(j * vocab, vocab), masks.subspan(j * words, words));
    return accept_drafts(rows, vocab, drafts, params, generated);
}

} // namespace ninfer::core
