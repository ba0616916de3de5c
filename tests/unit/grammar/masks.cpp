// Token masks: every bit equals what accept() does on a copy of the matcher (brute force), on
// random vocabularies and random reachable states; end tokens exactly when accepting; rollback.
#include "grammar_support.h"

#include "core/util/error.h"

#include <catch2/catch.hpp>

#include <random>

using ninfer::core::grammar::Grammar;
using ninfer::core::grammar::Matcher;
using ninfer::core::grammar::TokenIndex;

namespace {

// A vocabulary of random pieces drawn from the grammar's alphabet plus noise, with the single
// bytes (so every string can be spelled), one special-like empty token and an end token.
std::shared_ptr<const TokenIndex> random_vocabulary(std::mt19937& rng, const std::string& alphabet, size_t n) {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, char(b));
    std::uniform_int_distribution<size_t> len(1, 8), pick(0, alphabet.size() - 1);
    for (size_t i = 0; i < n; ++i) {
        std::string p;
        for (size_t k = len(rng); k > 0; --k) p += alphabet[pick(rng)];
        pieces.push_back(p);
    }
    pieces.emplace_back("");      // never matches
    pieces.emplace_back("<end>"); // the end token
    const auto end = int32_t(pieces.size() - 1);
    return TokenIndex::from_pieces(std::move(pieces), {end});
}

void check_masks_by_brute_force(const std::shared_ptr<const Grammar>& g, const std::string& alphabet, uint32_t seed) {
    std::mt19937 rng(seed);
    auto index = random_vocabulary(rng, alphabet, 3000);
    std::vector<uint32_t> words(index->n_words());
    for (int walk = 0; walk < 6; ++walk) {
        Matcher m(g, index);
        for (int step = 0; step < 40 && !m.finished(); ++step) {
            m.fill_mask(words);
            std::vector<int32_t> allowed;
            for (size_t t = 0; t < index->n_tokens(); ++t) {
                const bool bit = (words[t >> 5] >> (t & 31)) & 1;
                Matcher copy(m);
                const bool ok = copy.accept(int32_t(t));
                if (bit != ok) FAIL("token " << t << " '" << index->bytes(int32_t(t)) << "' mask " << bit << " accept " << ok);
                if (ok) allowed.push_back(int32_t(t));
            }
            CHECK(bool((words[index->end_ids()[0] >> 5] >> (index->end_ids()[0] & 31)) & 1) == m.accepting());
            REQUIRE_FALSE(allowed.empty());
            const int32_t next = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
            if (index->is_end(next)) break;
            REQUIRE(m.accept(next));
        }
    }
}

} // namespace

TEST_CASE("mask bits equal accept() on copies: JSON schema grammar", "[masks]") {
    auto g = Grammar::from_json_schema(R"({"type":"object","properties":{
        "name":{"type":"string","maxLength":6},"n":{"type":"integer","minimum":-5,"maximum":300},
        "tags":{"type":"array","items":{"enum":["a","bc"]}},"ok":{"type":"boolean"}},"required":["name","n"]})");
    check_masks_by_brute_force(g, "{}[]\":,-0123456789abcdefnrtulsname\\", 1);
    check_masks_by_brute_force(g, "{\"name\":\"n\",:1}", 2);
}

TEST_CASE("mask bits equal accept() on copies: recursive and ambiguous GBNF", "[masks]") {
    auto g = Grammar::from_gbnf("root ::= item+ \".\"\nitem ::= \"(\" item* \")\" | [a-c]+ | \"ab\" \"c\"?\n");
    check_masks_by_brute_force(g, "()abc.", 3);
}

TEST_CASE("accept refuses what the mask refuses and keeps the state; rollback restores", "[masks]") {
    auto g = Grammar::from_gbnf("root ::= \"ab\" (\"c\" | \"d\")\n");
    auto index = ninfer::test::byte_index();
    Matcher m(g, index);
    CHECK_FALSE(m.accept('b'));
    CHECK(m.accept('a'));
    CHECK(m.accept('b'));
    CHECK_FALSE(m.accepting());
    CHECK(m.accept('d'));
    CHECK(m.accepting());
    CHECK(m.finished());
    CHECK_FALSE(m.accept('d'));
    m.rollback(1);
    CHECK_FALSE(m.accepting());
    CHECK(m.accept('c'));
    CHECK(m.accept(256));
    CHECK_FALSE(m.accept(256));
    std::vector<uint32_t> words(index->n_words());
    m.fill_mask(words);
    CHECK(std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; }));
    m.rollback(4);
    CHECK(m.n_accepted() == 0);
    CHECK_THROWS_AS(m.rollback(1), ninfer::Error);
    m.fill_mask(words);
    CHECK(words[0] == 0);
    CHECK(words['a' >> 5] == (1u << ('a' & 31)));
}
