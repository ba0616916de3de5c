// ninfer tests - Detokenizer: streamed deltas are valid UTF-8 and add up to decode(ids).
#include "core/frontend/detokenizer.h"
#include "core/frontend/unicode_utf8.h"
#include "tests/unit/frontend/tokenizer_fixture.h"

#include <catch2/catch.hpp>

#include <random>

using namespace ninfer::core;
using ninfer::test::tiny_tokenizer_json;

namespace {

// Bytes 0..255 plus merged tokens that hold whole and partial UTF-8 sequences.
std::unique_ptr<Tokenizer> stream_tokenizer() {
    std::vector<std::pair<std::string, std::string>> merges = {
        {"\xE4", "\xBD"},         // 256: first two bytes of 你 (incomplete)
        {"\xE4\xBD", "\xA0"},     // 257: 你
        {"\xF0", "\x9F"},         // 258: incomplete 4-byte start
        {"\xF0\x9F", "\x98"},     // 259
        {"\xF0\x9F\x98", "\x80"}, // 260: 😀
        {"\xC3", "\xA9"},         // 261: é
        {"\xA9", "a"},            // 262: a continuation byte then a letter
    };
    return Tokenizer::from_json(tiny_tokenizer_json(
        merges, {{"<|im_end|>", true}, {"<think>", false}}, ninfer::test::kQwen3SplitRegex));
}

std::string stream(const Tokenizer& t, const std::vector<TokenId>& ids, bool skip_special,
                   bool& deltas_valid) {
    Detokenizer d(t, skip_special);
    std::string all;
    deltas_valid = true;
    for (TokenId id : ids) {
        std::string delta = d.push(id);
        deltas_valid = deltas_valid && is_valid_utf8(delta);
        all += delta;
    }
    std::string tail = d.finish();
    deltas_valid = deltas_valid && is_valid_utf8(tail);
    return all + tail;
}

} // namespace

TEST_CASE("a character split over tokens is emitted once complete", "[tokenizer_stream]") {
    auto t = stream_tokenizer();
    Detokenizer d(*t);
    CHECK(d.push(0xE4).empty());
    CHECK(d.push(0xBD).empty());
    CHECK(d.n_pending_bytes() == 2);
    CHECK(d.push(0xA0) == "\u4f60");
    CHECK(d.push(256).empty());
    CHECK(d.push(0xA0) == "\u4f60");
    CHECK(d.push(258).empty());
    CHECK(d.push(0x98).empty());
    CHECK(d.push(0x80) == "\U0001F600");
    CHECK(d.finish().empty());
}

TEST_CASE("ill-formed bytes become U+FFFD as soon as known; finish flushes one per subpart", "[tokenizer_stream]") {
    auto t = stream_tokenizer();
    Detokenizer d(*t);
    CHECK(d.push(0xE0).empty());
    CHECK(d.push(0x80) == "\uFFFD\uFFFD"); // E0 80 can never be valid: two maximal subparts
    CHECK(d.push(256).empty());
    CHECK(d.finish() == "\uFFFD"); // a truncated E4 BD is one subpart, like HF's decode
    CHECK(d.push('a') == "a");      // usable again after finish
    CHECK(d.push(262) == "\uFFFDa");
}

TEST_CASE("unknown ids and skipped special tokens produce no text", "[tokenizer_stream]") {
    auto t = stream_tokenizer();
    TokenId end = t->token_id("<|im_end|>");
    Detokenizer plain(*t), skipping(*t, true);
    CHECK(plain.push(TokenId(t->n_ids()) + 7).empty());
    CHECK(plain.push(-3).empty());
    CHECK(plain.push(end) == "<|im_end|>");
    CHECK(skipping.push(end).empty());
    CHECK(skipping.push(t->token_id("<think>")) == "<think>");
}

TEST_CASE("streamed deltas always concatenate to decode(ids): 64 seeded random generations",
          "[tokenizer_stream]") {
    auto t = stream_tokenizer();
    std::mt19937 rng(20240611);
    // Ids past the end stand for embedding padding rows.
    std::uniform_int_distribution<TokenId> any_id(0, TokenId(t->n_ids()) + 20);
    std::uniform_int_distribution<int> length(0, 200);
    for (int generation = 0; generation < 64; ++generation) {
        std::vector<TokenId> ids(size_t(length(rng)));
        for (TokenId& id : ids)
            id = any_id(rng);
        for (bool skip_special : {false, true}) {
            bool deltas_valid = false;
            std::string streamed = stream(*t, ids, skip_special, deltas_valid);
            INFO("generation " << generation << " skip_special " << skip_special);
            CHECK(deltas_valid);
            CHECK(streamed == t->decode(ids, skip_special));
        }
    }
}
