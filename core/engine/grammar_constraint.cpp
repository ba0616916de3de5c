// ninfer::core - the grammar engine's Matcher behind the TokenConstraint seam.
#include "core/engine/grammar_constraint.h"

#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar,
                                     std::shared_ptr<const grammar::TokenIndex> index)
    : index_(index), matcher_(std::move(grammar), std::move(index)) {}

void GrammarConstraint::fill_mask(std::span<uint32_t> words) const {
    if (words.size() >= index_->n_words()) {
        matcher_.fill_mask(words); // zeroes the words past the index's
        return;
    }
    scratch_.resize(index_->n_words()); // a model vocabulary smaller than the tokenizer's
    matcher_.fill_mask(scratch_);
    std::copy_n(scratch_.begin(), words.size(), words.begin()); // ids past the words: not in the model
}

ReplyShape reply_shape(const Tokenizer& tokenizer, bool after_reasoning, std::vector<int32_t> end_tokens) {
    ReplyShape reply;
    reply.after_reasoning = after_reasoning;
    reply.end_tokens = std::move(end_tokens);
    if (!after_reasoning) return reply;
    const auto think_end = tokenizer.find_token("</think>");
    if (!think_end)
        throw Error("constraint: the tokenizer has no </think> token to start the grammar after the reasoning; turn "
                    "thinking off for a constrained reply");
    reply.think_end_token = int32_t(*think_end);
    const auto separator = tokenizer.encode("\n\n");
    if (separator.size() == 1) reply.separator_tokens = {int32_t(separator[0])};
    return reply;
}

ConstraintSpec grammar_constraint_spec(std::shared_ptr<const grammar::Grammar> grammar,
                                       std::shared_ptr<const grammar::TokenIndex> index, ReplyShape reply) {
    ConstraintSpec spec;
    if (reply.end_tokens.empty()) reply.end_tokens = index->end_ids();
    spec.grammar = std::make_unique<GrammarConstraint>(std::move(grammar), std::move(index));
    spec.after_reasoning = reply.after_reasoning;
    spec.think_end_token = reply.think_end_token;
    spec.separator_tokens = std::move(reply.separator_tokens);
    spec.end_tokens = std::move(reply.end_tokens);
    return spec;
}

} // namespace ninfer::core
