// ninfer tests - Tokenizer: BPE merge order, added-token rules, NFC, byte handling, loading errors.
#include "core/frontend/tokenizer.h"
#include "core/frontend/tokenizer_pretokenize.h"
#include "core/util/error.h"
#include "tests/unit/frontend/tokenizer_fixture.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::TinyAddedToken;
using ninfer::test::kQwen3SplitRegex;
using ninfer::test::tiny_tokenizer_json;

namespace {

using Ids = std::vector<TokenId>;

// Ids 256.. are the merges in order; added tokens follow.
std::unique_ptr<Tokenizer> tiny(const std::vector<std::pair<std::string, std::string>>& merges,
                                const std::vector<TinyAddedToken>& added = {},
                                std::string_view config = {}) {
    return Tokenizer::from_json(tiny_tokenizer_json(merges, added, kQwen3SplitRegex), config);
}

Ids bytes_of(std::string_view s) {
    Ids ids;
    for (unsigned char c : s)
        ids.push_back(TokenId(c));
    return ids;
}

} // namespace

TEST_CASE("merges apply by rank, not by position", "[tokenizer]") {
    // rank 0: b+c, rank 1: a+b, rank 2: ab+c. "abc": b+c wins, and a+bc is no merge.
    auto t = tiny({{"b", "c"}, {"a", "b"}, {"ab", "c"}});
    CHECK(t->encode("abc") == Ids{'a', 256});
    // a+b first makes ab+c possible.
    auto u = tiny({{"a", "b"}, {"b", "c"}, {"ab", "c"}});
    CHECK(u->encode("abc") == Ids{258});
    CHECK(u->decode(u->encode("abc")) == "abc");
}

TEST_CASE("equal-rank pairs merge leftmost first", "[tokenizer]") {
    auto t = tiny({{"a", "a"}});
    CHECK(t->encode("aaa") == Ids{256, 'a'});
    CHECK(t->encode("aaaa") == Ids{256, 256});
}

TEST_CASE("merges never cross pre-token boundaries", "[tokenizer]") {
    // The Qwen3 regex splits "a b" into "a" and " b"; a+space must not merge across it.
    auto t = tiny({{"a", " "}, {" ", "b"}});
    CHECK(t->encode("a b") == Ids{'a', 257});
    // Digits are split one by one by \p{N}.
    auto d = tiny({{"1", "2"}});
    CHECK(d->encode("12") == Ids{'1', '2'});
}

TEST_CASE("added tokens: leftmost-longest match, special and plain", "[tokenizer]") {
    auto t = tiny({}, {{"<x>", true}, {"<x>y", false}, {"<|im_end|>", true}});
    TokenId x = t->token_id("<x>"), xy = t->token_id("<x>y"), end = t->token_id("<|im_end|>");
    CHECK(x == 256);
    CHECK(xy == 257);
    CHECK(t->encode("<x>y<x>") == Ids{xy, x});
    Ids ids = t->encode("a<|im_end|>b");
    CHECK(ids == Ids{'a', end, 'b'});
    CHECK(t->is_special(end));
    CHECK_FALSE(t->is_special(xy));
    CHECK(t->decode(ids) == "a<|im_end|>b");
    CHECK(t->decode(ids, true) == "ab");
}

TEST_CASE("split_special_tokens encodes special tokens' text as plain text", "[tokenizer]") {
    auto t = tiny({}, {{"<s>", true}, {"<t>", false}});
    EncodeOptions plain;
    plain.split_special_tokens = true;
    CHECK(t->encode("<s><t>", plain) == Ids{'<', 's', '>', t->token_id("<t>")});
}

TEST_CASE("added tokens: lstrip and rstrip swallow adjacent White_Space", "[tokenizer]") {
    TinyAddedToken mask{"<mask>"};
    mask.lstrip = mask.rstrip = true;
    auto t = tiny({}, {mask});
    TokenId m = t->token_id("<mask>");
    CHECK(t->encode("a \t<mask>\u3000 b") == Ids{'a', m, 'b'});
    TinyAddedToken left{"<l>"};
    left.lstrip = true;
    auto u = tiny({}, {left});
    CHECK(u->encode("a <l> b") == Ids{'a', u->token_id("<l>"), ' ', 'b'});
}

TEST_CASE("added tokens: single_word needs non-word neighbours", "[tokenizer]") {
    TinyAddedToken w{"[W]"};
    w.single_word = true;
    auto t = tiny({}, {w});
    TokenId id = t->token_id("[W]");
    CHECK(t->encode("x[W]") == bytes_of("x[W]"));
    CHECK(t->encode("[W]x") == bytes_of("[W]x"));
    CHECK(t->encode("[W] x") == Ids{id, ' ', 'x'});
}

TEST_CASE("normalized added tokens match after NFC", "[tokenizer]") {
    TinyAddedToken e{"\u00e9"}; // precomposed é
    e.normalized = true;
    auto t = tiny({}, {e});
    TokenId id = t->token_id("\u00e9");
    CHECK(t->encode("e\u0301") == Ids{id}); // decomposed input, composed by NFC first
    TinyAddedToken raw{"\u00e9"};
    auto u = tiny({}, {raw});
    // normalized=false: matched in the raw text only, so the decomposed form stays plain text.
    CHECK(u->encode("\u00e9") == Ids{u->token_id("\u00e9")});
    CHECK(u->encode("e\u0301") == Ids{0xC3, 0xA9});
}

TEST_CASE("NFC is applied before BPE and decode gives the NFC text", "[tokenizer]") {
    auto t = tiny({});
    CHECK(t->encode("e\u0301") == t->encode("\u00e9"));
    CHECK(t->decode(t->encode("e\u0301")) == "\u00e9");
    CHECK(t->decode(t->encode("q\u0301")) == "q\u0301"); // no precomposed form: unchanged
}

TEST_CASE("ill-formed UTF-8 input becomes U+FFFD; NUL is ordinary text", "[tokenizer]") {
    auto t = tiny({});
    CHECK(t->encode("a\xff" "b") == t->encode("a\uFFFD" "b"));
    CHECK(t->encode(std::string_view("\xE0\x80", 2)) == t->encode("\uFFFD\uFFFD"));
    std::string nul("a\0b", 3);
    CHECK(t->encode(nul) == Ids{'a', 0, 'b'});
    CHECK(t->decode(t->encode(nul)) == nul);
    CHECK(t->encode("").empty());
}

TEST_CASE("decode skips ids the tokenizer does not know", "[tokenizer]") {
    auto t = tiny({{"a", "b"}});
    TokenId past_end = TokenId(t->n_ids()) + 100;
    CHECK(t->decode(Ids{'a', past_end, -1, 'b'}) == "ab");
    CHECK_FALSE(t->is_known(past_end));
    CHECK(t->token_bytes(past_end).empty());
    CHECK(t->decode(Ids{0xE4}) == "\uFFFD"); // a lone lead byte
}

TEST_CASE("tokens are found by text; tokenizer_config adds ids missing from tokenizer.json", "[tokenizer]") {
    std::string config = R"({"added_tokens_decoder":{
        "300":{"content":"<tts_pad>","lstrip":false,"normalized":false,"rstrip":false,"single_word":false,"special":true},
        "256":{"content":"<s>","special":true}}})";
    auto t = tiny({}, {{"<s>", true}}, config);
    CHECK(t->token_id("<tts_pad>") == 300);
    CHECK(t->n_ids() == 301);
    CHECK(t->encode("x<tts_pad>") == Ids{'x', 300});
    CHECK_FALSE(t->is_known(299));
    CHECK(t->find_token("<nope>") == std::nullopt);
    CHECK_THROWS_AS(t->token_id("<nope>"), Error);
    CHECK(t->token_id(test::byte_level(" ")) == ' ');
}

TEST_CASE("\\s means Unicode White_Space, as in Oniguruma", "[tokenizer]") {
    Pcre2Regex space(translate_hf_regex("\\s+"));
    size_t b = 0, e = 0;
    REQUIRE(space.find("a\u0085\u00a0b", 0, b, e));
    CHECK((b == 1 && e == 5));
    CHECK_FALSE(space.find("a\u180e\ufeffb", 0, b, e)); // not White_Space
    Pcre2Regex non_space(translate_hf_regex("[^\\s]+|\\S"));
    REQUIRE(non_space.find("\u0085x", 0, b, e));
    CHECK((b == 2 && e == 3));
}

TEST_CASE("the pre-tokenizer regex comes from the file", "[tokenizer]") {
    std::string regex = "\\p{N}{1,3}|[^\\p{N}]+";
    auto t = Tokenizer::from_json(test::tiny_tokenizer_json({{"1", "2"}, {"12", "3"}}, {}, regex));
    CHECK(t->split_patterns() == std::vector<std::string>{regex});
    CHECK(t->encode("1234") == Ids{257, '4'});
}

TEST_CASE("unsupported or malformed tokenizer.json is a clear error", "[tokenizer]") {
    std::string json = test::tiny_tokenizer_json({}, {}, kQwen3SplitRegex);
    std::string wordpiece = json;
    wordpiece.replace(wordpiece.find("\"BPE\""), 5, "\"WordPiece\"");
    CHECK_THROWS_WITH(Tokenizer::from_json(wordpiece), Catch::Contains("unsupported model type"));
    CHECK_THROWS_AS(Tokenizer::from_json("{"), Error);
    CHECK_THROWS_WITH(Tokenizer::from_json(test::tiny_tokenizer_json({}, {}, "(")),
                      Catch::Contains("regex"));
    CHECK_THROWS_AS(Tokenizer::from_file("/nonexistent/tokenizer.json"), Error);
}

TEST_CASE("concurrent encodes share the word cache safely", "[tokenizer]") {
    auto t = tiny({{"a", "b"}, {"ab", "c"}, {" ", "a"}, {"d", "d"}});
    std::vector<std::string> texts = {"abc abcd dd abab", "x abc\n\tdddd abcabc", "<y> ab ab ab",
                                      "caba bacab ddd abcdabcd"};
    std::vector<Ids> expected;
    for (const auto& text : texts)
        expected.push_back(t->encode(text));
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0};
    for (int w = 0; w < 4; ++w)
        threads.emplace_back([&, w] {
            for (int round = 0; round < 300; ++round) {
                size_t i = size_t(w + round) % texts.size();
                std::string text = texts[i] + " " + std::to_string(round); // new words each round
                Ids ids = t->encode(text);
                ids.resize(expected[i].size());
                if (ids != expected[i]) ++mismatches;
            }
        });
    for (auto& th : threads)
        th.join();
    CHECK(mismatches == 0);
}
