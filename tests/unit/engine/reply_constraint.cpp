// ninfer tests - the reply gate (core/engine/reply_constraint.h): free reasoning without end
// tokens, the grammar after the reasoning's closing token (a separator allowed once), end tokens
// exactly when the grammar accepts, finished grammars, and rollback across the phases.
#include "core/engine/reply_constraint.h"
#include "set_grammar.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::SetGrammar;

namespace {

constexpr uint32_t kVocab = 100;
constexpr int32_t kThinkEnd = 90, kSeparator = 91, kEnd = 99;

std::vector<int32_t> allowed(const TokenConstraint& c) {
    std::vector<uint32_t> words(token_mask_words(kVocab), 0xdeadbeefu); // fill_mask writes every word
    c.fill_mask(words);
    std::vector<int32_t> ids;
    for (int32_t t = 0; t < int32_t(kVocab); ++t)
        if (token_mask_test(words, t)) ids.push_back(t);
    return ids;
}

ConstraintSpec spec(bool thinking, bool repeat_last = false) {
    ConstraintSpec s;
    s.grammar = std::make_unique<SetGrammar>(std::vector<std::vector<int32_t>>{{1, 2}, {3}, {4, 5}}, 2, repeat_last);
    s.after_reasoning = thinking;
    s.think_end_token = kThinkEnd;
    s.separator_tokens = {kSeparator};
    s.end_tokens = {kEnd};
    return s;
}

} // namespace

TEST_CASE("reply constraint: the grammar from the first token without thinking", "[reply_constraint]") {
    ReplyConstraint c(spec(false));
    CHECK(allowed(c) == std::vector<int32_t>{1, 2}); // no separator, no end
    CHECK_FALSE(c.accept(kSeparator));
    CHECK_FALSE(c.accept(kEnd));
    CHECK(c.accept(2));
    CHECK_FALSE(c.accepting());
    CHECK(c.accept(3));
    CHECK(c.accepting());
    CHECK(allowed(c) == std::vector<int32_t>{4, 5, kEnd}); // the end token now that it accepts
    CHECK_FALSE(c.finished());
    CHECK(c.accept(4));
    CHECK(c.finished()); // nothing but an end may follow
    CHECK(allowed(c) == std::vector<int32_t>{kEnd});
    CHECK(c.accept(kEnd));
    CHECK(c.finished());
    CHECK(allowed(c).empty());
    CHECK_FALSE(c.accept(1));
}

TEST_CASE("reply constraint: free reasoning, then the grammar after </think>", "[reply_constraint]") {
    ReplyConstraint c(spec(true));
    CHECK(c.in_reasoning());
    std::vector<int32_t> reasoning = allowed(c);
    CHECK(reasoning.size() == kVocab - 1); // everything but the end token
    CHECK(std::find(reasoning.begin(), reasoning.end(), kEnd) == reasoning.end());
    CHECK_FALSE(c.accept(kEnd)); // the reply may not end inside the reasoning
    CHECK(c.accept(57));
    CHECK(c.accept(3)); // grammar tokens are plain text while reasoning
    CHECK_FALSE(c.accepting());
    CHECK(c.accept(kThinkEnd));
    CHECK_FALSE(c.in_reasoning());
    CHECK(allowed(c) == std::vector<int32_t>{1, 2, kSeparator});
    CHECK(c.accept(kSeparator));
    CHECK(allowed(c) == std::vector<int32_t>{1, 2}); // the separator once
    CHECK_FALSE(c.accept(kSeparator));
    CHECK(c.accept(1));
    CHECK(c.accept(3));
    CHECK(c.accept(kEnd));
    CHECK(c.finished());
}

TEST_CASE("reply constraint: rollback restores phases and the grammar's state", "[reply_constraint]") {
    ConstraintSpec s = spec(true, true);
    auto* grammar = static_cast<SetGrammar*>(s.grammar.get());
    ReplyConstraint c(std::move(s));
    for (int32_t t : {10, kThinkEnd, kSeparator, 2, 3, 5, 4}) REQUIRE(c.accept(t));
    CHECK(grammar->accepted() == std::vector<int32_t>{2, 3, 5, 4});
    c.rollback(3);
    CHECK(grammar->accepted() == std::vector<int32_t>{2});
    CHECK(allowed(c) == std::vector<int32_t>{3});
    c.rollback(2); // the grammar's token and the separator
    CHECK(grammar->accepted().empty());
    CHECK(allowed(c) == std::vector<int32_t>{1, 2, kSeparator});
    c.rollback(1); // the closing token: reasoning again
    CHECK(c.in_reasoning());
    CHECK_THROWS(c.rollback(5));
    REQUIRE(c.accept(kThinkEnd));
    REQUIRE(c.accept(1)); // without a separator
    CHECK(allowed(c) == std::vector<int32_t>{3});
}

TEST_CASE("reply constraint: refuses a spec without a grammar", "[reply_constraint]") {
    ConstraintSpec s;
    CHECK_THROWS(ReplyConstraint(std::move(s)));
}
