// ninfer tests - a constrained lane's drafts checked on the host (core/engine/constrained_drafts.h):
// check_drafts cuts the run at the first refused draft, at a dead end or an end token, after a
// finishing one, across the reply's phases and over a real JSON-schema grammar, and leaves the
// constraint exactly as it was (masks before and after, what it accepts next); its masks are
// those of a constraint fed the drafts for real. accept_masked_drafts is greedy argmax over the
// masked rows, and its sampled tokens follow each masked row's plain distribution (chi-square).
#include "core/engine/constrained_drafts.h"
#include "core/engine/grammar_constraint.h"
#include "core/util/error.h"
#include "constrained_fixture.h"
#include "set_grammar.h"

#include <catch2/catch.hpp>

#include <map>
#include <tuple>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::SetGrammar;
using ninfer::test::kDigits;
using ninfer::test::kEnd;
using ninfer::test::kSeparator;
using ninfer::test::kThinkEnd;

namespace {

constexpr uint32_t kVocab = 240;

// "[" digit{5} "]" (finished and accepting after "]") in a reply that ends with kEnd.
ReplyConstraint bracket_reply(bool thinking) {
    std::vector<std::vector<int32_t>> sets = {{1}};
    for (int i = 0; i < 5; ++i) sets.push_back(kDigits);
    sets.push_back({2});
    ConstraintSpec c;
    c.grammar = std::make_unique<SetGrammar>(sets, sets.size());
    c.end_tokens = {kEnd};
    c.after_reasoning = thinking;
    c.think_end_token = kThinkEnd;
    c.separator_tokens = {kSeparator};
    return ReplyConstraint(std::move(c));
}

std::vector<uint32_t> mask_of(const TokenConstraint& c, uint32_t vocab = kVocab) {
    std::vector<uint32_t> m(token_mask_words(vocab));
    c.fill_mask(m);
    return m;
}

// check_drafts' promise, against a second constraint fed the kept drafts for real: row j is the
// mask after drafts 0..j-1, and the checked constraint is left as it was.
void check_walk(TokenConstraint& c, TokenConstraint& twin, const std::vector<int32_t>& drafts, size_t expect_kept,
                uint32_t vocab = kVocab) {
    const std::vector<uint32_t> before = mask_of(c, vocab);
    const bool accepting = c.accepting();
    const CheckedDrafts d = check_drafts(c, drafts, vocab);
    CHECK(d.kept == expect_kept);
    const size_t words = token_mask_words(vocab);
    REQUIRE(d.masks.size() == (d.kept + 1) * words);
    for (size_t j = 0; j <= d.kept; ++j) {
        INFO("row " << j);
        CHECK(std::vector<uint32_t>(d.masks.begin() + long(j * words), d.masks.begin() + long((j + 1) * words)) ==
              mask_of(twin, vocab));
        if (j > 0) CHECK(token_mask_count(std::span(d.masks).subspan(j * words, words), vocab) > 0);
        if (j < d.kept) REQUIRE(twin.accept(drafts[j]));
    }
    twin.rollback(d.kept);
    CHECK(mask_of(c, vocab) == before);
    CHECK(c.accepting() == accepting);
}

} // namespace

TEST_CASE("check_drafts: the grammar cuts the run; the constraint is left as it was", "[constrained_drafts]") {
    ReplyConstraint c = bracket_reply(false), twin = bracket_reply(false);
    REQUIRE(c.accept(1));
    REQUIRE(twin.accept(1));
    check_walk(c, twin, {12, 13, 3, 14}, 2);             // 3 is refused: it and 14 are cut
    check_walk(c, twin, {12, 13, 14, 15, 16, 2, 19}, 6); // after "]" the grammar is finished
    check_walk(c, twin, {kEnd, 12}, 0);                  // no end before the grammar accepts
    check_walk(c, twin, {}, 0);
    for (int32_t t : {10, 11, 12, 13, 14, 2}) REQUIRE((c.accept(t) && twin.accept(t)));
    check_walk(c, twin, {kEnd}, 0); // accepted, but nothing can follow an end: the row before samples it
    // After "]": finished; the only row is the end tokens'.
    const CheckedDrafts d = check_drafts(c, std::vector<int32_t>{kEnd}, kVocab);
    CHECK(token_mask_count(d.masks, kVocab) == 1);
    CHECK(token_mask_test(d.masks, kEnd));
}

TEST_CASE("check_drafts: through the reasoning, </think> and the separator into the grammar", "[constrained_drafts]") {
    ReplyConstraint c = bracket_reply(true), twin = bracket_reply(true);
    check_walk(c, twin, {5, 7, kThinkEnd, kSeparator, 1, 10, 3}, 6);
    CHECK(c.in_reasoning());
    check_walk(c, twin, {5, kEnd, 7}, 1); // the reasoning never ends the reply
    // A dead end: a grammar that allows nothing after its first token.
    ConstraintSpec spec;
    spec.grammar = std::make_unique<SetGrammar>(std::vector<std::vector<int32_t>>{{5}, {}}, 9);
    spec.end_tokens = {kEnd};
    ReplyConstraint dead(std::move(spec));
    const CheckedDrafts d = check_drafts(dead, std::vector<int32_t>{5}, kVocab);
    CHECK(d.kept == 0);
    CHECK(token_mask_count(d.masks, kVocab) == 1);
}

TEST_CASE("check_drafts: a JSON schema's matcher over a vocabulary of bytes and pieces", "[constrained_drafts]") {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, char(b));
    for (const char* p : {"{\"", "ok", "\":", "true", "false", "}", "<end>"}) pieces.emplace_back(p);
    const uint32_t vocab = uint32_t(pieces.size());
    const int32_t open = 256, ok = 257, colon = 258, yes = 259, no = 260, close = 261, end = 262;
    auto index = grammar::TokenIndex::from_pieces(std::move(pieces), {end});
    auto g = grammar::Grammar::from_json_schema(
        R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false})");
    auto reply = [&] {
        ReplyShape shape;
        shape.end_tokens = {end};
        return ReplyConstraint(grammar_constraint_spec(g, index, shape));
    };
    ReplyConstraint c = reply(), twin = reply();
    check_walk(c, twin, {open, ok, colon, yes, close, end}, 5, vocab); // finished at "}"
    check_walk(c, twin, {open, 'o', 'k', colon, '1'}, 4, vocab);         // not a boolean
    check_walk(c, twin, {'{', '"', 'n', colon}, 2, vocab);               // no property "n..."
    for (int32_t t : {open, ok, colon}) REQUIRE((c.accept(t) && twin.accept(t)));
    check_walk(c, twin, {no, close}, 2, vocab);
    check_walk(c, twin, {'f', 'a', 'l', 's', 'e', close, end}, 6, vocab);
}

TEST_CASE("accept_masked_drafts: greedy takes the masked argmax; sampled tokens follow each masked row",
          "[constrained_drafts]") {
    const size_t V = 8;
    const std::vector<float> rows{3.0f, 1.5f, 1.0f, 0.5f, 2.5f, 0.0f, -1.0f, 0.7f,  // row 0
                                  0.2f, -0.5f, 1.2f, 0.9f, 2.1f, 0.4f, 0.6f, 0.3f,  // row 1
                                  0.0f, 0.3f, -0.2f, 0.8f, 1.1f, 0.5f, 1.4f, 1.9f}; // row 2, the bonus
    // Row 0 allows {1, 2, 3, 5}, row 1 {1, 2, 6}, row 2 {0, 4, 5}: each row's argmax is refused.
    const std::vector<std::vector<int32_t>> allowed = {{1, 2, 3, 5}, {1, 2, 6}, {0, 4, 5}};
    std::vector<uint32_t> masks(3, 0u);
    for (size_t j = 0; j < 3; ++j)
        for (int32_t t : allowed[j]) token_mask_set(std::span(masks).subspan(j, 1), t, true);
    auto row_params = [&](SamplingParams p, size_t j) {
        p.allowed_tokens = std::span(masks).subspan(j, 1);
        return p;
    };
    const std::vector<int32_t> generated{3};
    // Greedy: the masked argmaxes are 1, 2 and 4 (the raw ones 0, 4 and 7).
    for (const auto& [drafts, accepted, next] : std::vector<std::tuple<std::vector<int32_t>, uint32_t, int32_t>>{
             {{1, 2}, 2, 4}, {{1, 1}, 1, 2}, {{0, 2}, 0, 1}, {{}, 0, 1}}) {
        std::vector<float> work(rows.begin(), rows.begin() + long((drafts.size() + 1) * V));
        const DraftAcceptance a =
            accept_masked_drafts(work, V, std::span(masks).first(drafts.size() + 1), drafts, {}, generated);
        CHECK(a.accepted == accepted);
        CHECK(a.next_token == next);
    }
    std::vector<float> work = rows;
    CHECK_THROWS_WITH(accept_masked_drafts(work, V, std::span(masks).first(2), std::vector<int32_t>{1, 2}, {}, generated),
                      Catch::Contains("speculative: 2 mask words for 2 drafts"));
    // Sampling: the first token against row 0's masked distribution, the second (given the first
    // draft was taken) against row 1's, by Pearson chi-square at p = 0.001 over 20,000 seeds.
    SamplingParams p;
    p.temperature = 1.1f, p.presence_penalty = 0.4f, p.step = 5;
    const std::vector<int32_t> drafts{2, 6};
    const int n = 20000;
    std::map<int32_t, int> first, second;
    int second_n = 0;
    for (int s = 0; s < n; ++s) {
        p.seed = uint64_t(s) * 104729 + 7;
        std::vector<float> work = rows;
        const DraftAcceptance a = accept_masked_drafts(work, V, masks, drafts, p, generated);
        ++first[a.accepted >= 1 ? drafts[0] : a.next_token];
        if (a.accepted >= 1) ++second[a.accepted >= 2 ? drafts[1] : a.next_token], ++second_n;
    }
    auto chi_square = [](const std::map<int32_t, int>& seen, const SamplingCandidates& c, int draws) {
        double chi = 0;
        int inside = 0;
        for (size_t i = 0; i < c.ids.size(); ++i) {
            if (c.prob[i] == 0) continue; // a masked id (-inf): counted out by `inside`
            const double expected = draws * c.prob[i] / c.total;
            const int o = seen.count(c.ids[i]) ? seen.at(c.ids[i]) : 0;
            inside += o;
            chi += (o - expected) * (o - expected) / expected;
        }
        CHECK(inside == draws); // nothing outside the masked row's candidates
        return chi;
    };
    const double critical[] = {0, 10.83, 13.82, 16.27}; // chi-square quantiles at p = 0.001, 1..3 df
    std::vector<float> r0(rows.begin(), rows.begin() + V), r1(rows.begin() + V, rows.begin() + 2 * V);
    const SamplingCandidates p0 = sampling_candidates(r0, row_params(p, 0), generated);
    std::vector<int32_t> then = generated;
    then.push_back(drafts[0]);
    const SamplingCandidates p1 = sampling_candidates(r1, row_params(p, 1), then);
    auto kept = [](const SamplingCandidates& c) { return std::count_if(c.prob.begin(), c.prob.end(), [](double x) { return x > 0; }); };
    REQUIRE(kept(p0) == 4);
    REQUIRE(kept(p1) == 3);
    const double chi0 = chi_square(first, p0, n);
    CHECK(chi0 < critical[3]);
    REQUIRE(second_n > 2000);
    const double chi1 = chi_square(second, p1, second_n);
    CHECK(chi1 < critical[2]);
    WARN("masked speculative sampling: chi-square " << chi0 << " (first, 3 df), " << chi1 << " (second, 2 df, "
                                                    << second_n << " draws)");
}
