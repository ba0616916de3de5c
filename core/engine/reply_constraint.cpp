// ninfer::core - the reply gate around a grammar: free reasoning, separator, grammar, end tokens.
#include "core/engine/reply_constraint.h"

#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core {

ReplyConstraint::ReplyConstraint(ConstraintSpec spec) : spec_(std::move(spec)) {
    if (!spec_.grammar) throw Error("constraint: a reply constraint needs a grammar");
    if (spec_.after_reasoning && spec_.think_end_token < 0)
        throw Error("constraint: a grammar after the reasoning needs the token that closes it");
}

ReplyConstraint::Phase ReplyConstraint::phase() const {
    if (steps_.empty()) return spec_.after_reasoning ? Phase::Reasoning : Phase::Answer;
    switch (steps_.back()) {
    case Step::Reasoning: return Phase::Reasoning;
    case Step::ThinkEnd: return Phase::Separator;
    case Step::Separator:
    case Step::Grammar: return Phase::Answer;
    case Step::End: return Phase::Ended;
    }
    return Phase::Ended;
}

bool ReplyConstraint::is_end(int32_t token) const {
    return std::find(spec_.end_tokens.begin(), spec_.end_tokens.end(), token) != spec_.end_tokens.end();
}

bool ReplyConstraint::is_separator(int32_t token) const {
    return std::find(spec_.separator_tokens.begin(), spec_.separator_tokens.end(), token) !=
           spec_.separator_tokens.end();
}

void ReplyConstraint::fill_mask(std::span<uint32_t> words) const {
    const Phase p = phase();
    if (p == Phase::Ended) {
        std::fill(words.begin(), words.end(), 0u);
        return;
    }
    if (p == Phase::Reasoning) {
        std::fill(words.begin(), words.end(), ~0u);
        for (int32_t t : spec_.end_tokens) token_mask_set(words, t, false);
        return;
    }
    spec_.grammar->fill_mask(words);
    if (p == Phase::Separator)
        for (int32_t t : spec_.separator_tokens) token_mask_set(words, t, true);
    const bool can_end = spec_.grammar->accepting();
    for (int32_t t : spec_.end_tokens) token_mask_set(words, t, can_end);
}

bool ReplyConstraint::accept(int32_t token) {
    const Phase p = phase();
    if (p == Phase::Ended) return false;
    if (p == Phase::Reasoning) {
        if (is_end(token)) return false;
        steps_.push_back(token == spec_.think_end_token ? Step::ThinkEnd : Step::Reasoning);
        return true;
    }
    if (is_end(token)) {
        if (!spec_.grammar->accepting()) return false;
        steps_.push_back(Step::End);
        return true;
    }
    if (spec_.grammar->accept(token)) {
        steps_.push_back(Step::Grammar);
        return true;
    }
    if (p == Phase::Separator && is_separator(token)) {
        steps_.push_back(Step::Separator);
        return true;
    }
    return false;
}

void ReplyConstraint::rollback(size_t n) {
    if (n > steps_.size())
        throw Error("constraint: rollback of " + std::to_string(n) + " tokens, " + std::to_string(steps_.size()) +
                    " accepted");
    size_t grammar_tokens = 0;
    for (size_t i = 0; i < n; ++i) {
        grammar_tokens += steps_.back() == Step::Grammar;
        steps_.pop_back();
    }
    if (grammar_tokens > 0) spec_.grammar->rollback(grammar_tokens);
}

bool ReplyConstraint::accepting() const {
    const Phase p = phase();
    return p == Phase::Ended || (p != Phase::Reasoning && spec_.grammar->accepting());
}

bool ReplyConstraint::finished() const {
    const Phase p = phase();
    return p == Phase::Ended || (p != Phase::Reasoning && spec_.grammar->finished());
}

} // namespace ninfer::core
