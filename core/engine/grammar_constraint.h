// ninfer::core - a compiled grammar as a request's constraint: the grammar engine's Matcher
// (core/grammar/matcher.h) behind the scheduler's TokenConstraint seam, and the ConstraintSpec
// that places it in a reply (core/engine/reply_constraint.h).
//
// Contract:
// - GrammarConstraint(grammar, index) starts a fresh Matcher; fill_mask writes every word it is
//   given (ids past the tokenizer's vocabulary cleared, whatever the model's vocabulary size);
//   accept / rollback / accepting / finished are the matcher's.
// - reply_shape(tokenizer, after_reasoning, end_tokens): where a chat-template reply puts the
//   grammar: after `</think>` (then "\n\n" may follow once, when it is one token) in thinking
//   mode, else from the first token. Throws ninfer::Error("constraint: ...") in thinking mode
//   when the tokenizer has no `</think>` token.
// - grammar_constraint_spec(grammar, index, reply) builds the spec a GenerationRequest carries:
//   the grammar after the reasoning when reply.after_reasoning, end tokens reply.end_tokens (the
//   index's end ids when empty). Cheap (no compilation): grammars are compiled and cached by the
//   caller (GrammarCache) off the engine and loop threads.
// Thread safety: one constraint per request, engine thread; the grammar and index are shared.
#pragma once

#include "core/backend/token_constraint.h"
#include "core/engine/reply_constraint.h"
#include "core/frontend/tokenizer.h"
#include "core/grammar/grammar.h"
#include "core/grammar/matcher.h"
#include "core/grammar/token_index.h"

#include <memory>
#include <vector>

namespace ninfer::core {

class GrammarConstraint final : public TokenConstraint {
  public:
    GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar, std::shared_ptr<const grammar::TokenIndex> index);
    void fill_mask(std::span<uint32_t> words) const override;
    bool accept(int32_t token) override { return matcher_.accept(token); }
    void rollback(size_t n) override { matcher_.rollback(n); }
    bool accepting() const override { return matcher_.accepting(); }
    bool finished() const override { return matcher_.finished(); }

  private:
    std::shared_ptr<const grammar::TokenIndex> index_;
    grammar::Matcher matcher_;
    mutable std::vector<uint32_t> scratch_; // when the caller's words are fewer than the index's
};

// Where the grammar sits in the reply (ConstraintSpec's other members).
struct ReplyShape {
    bool after_reasoning = false;
    int32_t think_end_token = -1;
    std::vector<int32_t> separator_tokens;
    std::vector<int32_t> end_tokens;
};

ReplyShape reply_shape(const Tokenizer& tokenizer, bool after_reasoning, std::vector<int32_t> end_tokens);

ConstraintSpec grammar_constraint_spec(std::shared_ptr<const grammar::Grammar> grammar,
                                       std::shared_ptr<const grammar::TokenIndex> index, ReplyShape reply);

} // namespace ninfer::core
