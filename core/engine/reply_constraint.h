// ninfer::core - a request's constraint as the scheduler applies it: a grammar's TokenConstraint
// placed in the reply (after the reasoning when the reply opens in thinking mode) with the reply's
// end tokens allowed exactly when the grammar accepts.
//
// Contract:
// - ConstraintSpec is what a GenerationRequest carries: the grammar's fresh state (owned; a
//   grammar matcher or any TokenConstraint), whether the reply opens inside the reasoning, the
//   token that closes the reasoning (`</think>`), the tokens the chat template writes between the
//   reasoning and the answer ("\n\n"), and the reply's end tokens (end of turn, EOS).
// - ReplyConstraint(spec) is itself a TokenConstraint, in phases:
//   * Reasoning (after_reasoning): every token but the end tokens (the reasoning is free; the
//     reply may not end before the grammar has accepted). think_end_token moves to Answer.
//   * Answer: the grammar's mask; right after the reasoning also the separator tokens, once (a
//     separator the grammar does not take itself is not fed to it).
//   * Ended: after an end token. Nothing is allowed; finished() is true.
//   End tokens are set iff the grammar accepts, whatever the grammar's own mask says of them.
//   finished() is also true when the grammar is finished (nothing but an end may follow): the
//   scheduler then ends the reply with FinishReason::Stop.
// - rollback(n) undoes the last n accepted tokens across phases (the grammar's own included).
// - A spec without after_reasoning constrains from the first token. Engine thread only.
#pragma once

#include "core/backend/token_constraint.h"

#include <memory>
#include <vector>

namespace ninfer::core {

struct ConstraintSpec {
    std::unique_ptr<TokenConstraint> grammar;
    bool after_reasoning = false;
    int32_t think_end_token = -1;
    std::vector<int32_t> separator_tokens;
    std::vector<int32_t> end_tokens;
};

class ReplyConstraint final : public TokenConstraint {
  public:
    explicit ReplyConstraint(ConstraintSpec spec);
    void fill_mask(std::span<uint32_t> words) const override;
    bool accept(int32_t token) override;
    void rollback(size_t n) override;
    bool accepting() const override;
    bool finished() const override;
    bool in_reasoning() const { return phase() == Phase::Reasoning; }

  private:
    enum class Phase : uint8_t { Reasoning, Separator, Answer, Ended };
    // What each accepted token was, so rollback can restore the phase and the grammar's state.
    enum class Step : uint8_t { Reasoning, ThinkEnd, Separator, Grammar, End };
    Phase phase() const;
    bool is_end(int32_t token) const;
    bool is_separator(int32_t token) const;

    ConstraintSpec spec_;
    std::vector<Step> steps_;
};

} // namespace ninfer::core
