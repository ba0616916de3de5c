// Bounds: huge or deep inputs are refused with an error naming the bound, never a crash or a hang;
// the grammar cache; concurrent matchers on one grammar.
#include "grammar_support.h"

#include "core/grammar/grammar_cache.h"
#include "core/grammar/token_masks.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

using ninfer::core::grammar::Grammar;
using ninfer::core::grammar::GrammarCache;
using ninfer::core::grammar::GrammarKind;
using ninfer::core::grammar::GrammarLimits;
using ninfer::core::grammar::Matcher;
using Catch::Matchers::Contains;

TEST_CASE("huge schemas hit max_rules / max_states / max_compile_time cleanly", "[limits]") {
    std::string props;
    for (int i = 0; i < 3000; ++i)
        props += (props.empty() ? "" : ",") + ("\"p" + std::to_string(i) + "\":{\"type\":\"string\",\"maxLength\":" + std::to_string(200 + i) + "}");
    const std::string huge = "{\"type\":\"object\",\"properties\":{" + props + "}}";
    try {
        Grammar::from_json_schema(huge);
        FAIL("a 3000-property schema with long bounded strings compiled");
    } catch (const ninfer::Error& e) {
        const std::string what = e.what();
        CHECK((what.find("max_rules") != std::string::npos || what.find("max_states") != std::string::npos ||
               what.find("max_compile_time") != std::string::npos));
    }
    GrammarLimits quick;
    quick.max_compile_time = std::chrono::milliseconds(0);
    CHECK_THROWS_WITH(Grammar::from_json_schema(huge, quick), Contains("max_compile_time"));
    GrammarLimits few;
    few.max_rules = 100;
    CHECK_THROWS_WITH(Grammar::from_json_schema(R"({"type":"array","items":{"type":"integer"},"maxItems":500})", few), Contains("max_rules"));
    CHECK_THROWS_WITH(Grammar::from_json_schema(R"({"type":"string","maxLength":2000000000})"), Contains("maxLength") || Contains("1e9") || Contains("max_"));
}

TEST_CASE("deep nesting is refused, not a stack overflow", "[limits]") {
    const std::string deep_gbnf = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')') + "\n";
    CHECK_THROWS_WITH(Grammar::from_gbnf(deep_gbnf), Contains("nested deeper"));
    std::string deep_schema;
    for (int i = 0; i < 5000; ++i) deep_schema += "{\"items\":";
    deep_schema += "{}" + std::string(5000, '}');
    CHECK_THROWS_AS(Grammar::from_json_schema(deep_schema), ninfer::Error);
    std::string ok_schema;
    for (int i = 0; i < 200; ++i) ok_schema += "{\"type\":\"array\",\"items\":";
    ok_schema += "{\"type\":\"null\"}" + std::string(200, '}');
    auto g = Grammar::from_json_schema(ok_schema);
    CHECK(ninfer::test::grammar_matches(g, std::string(200, '[') + std::string(200, ']')));
    CHECK(ninfer::test::grammar_matches(g, std::string(200, '[') + "null" + std::string(200, ']')));
}

TEST_CASE("grammar cache: hits by (kind, source), LRU bound, errors not cached", "[limits]") {
    GrammarCache cache(2);
    int compiles = 0;
    auto get = [&](GrammarKind kind, const std::string& text) {
        return cache.get_or_compile(kind, text, [&] { ++compiles; return Grammar::from_gbnf(text); });
    };
    auto a = get(GrammarKind::Gbnf, "root ::= \"a\"\n");
    CHECK(get(GrammarKind::Gbnf, "root ::= \"a\"\n") == a);
    CHECK(get(GrammarKind::JsonSchema, "root ::= \"a\"\n") != a); // another kind, another entry
    CHECK(compiles == 2);
    CHECK(get(GrammarKind::Gbnf, "root ::= \"a\"\n") == a);     // now the most recent
    get(GrammarKind::Gbnf, "root ::= \"b\"\n");                 // evicts the least recent (the JsonSchema one)
    CHECK(cache.n_entries() == 2);
    CHECK(get(GrammarKind::Gbnf, "root ::= \"a\"\n") == a);
    CHECK(compiles == 3);
    get(GrammarKind::JsonSchema, "root ::= \"a\"\n");
    CHECK(compiles == 4);
    CHECK_THROWS_AS(get(GrammarKind::Gbnf, "root ::= nope\n"), ninfer::Error);
    CHECK_THROWS_AS(get(GrammarKind::Gbnf, "root ::= nope\n"), ninfer::Error);
    CHECK(compiles == 6);
    CHECK(cache.n_hits() == 3);
    GrammarCache small(10, a->memory_bytes() + 100); // room for about one grammar
    small.get_or_compile(GrammarKind::Gbnf, "1", [&] { return a; });
    small.get_or_compile(GrammarKind::Gbnf, "2", [&] { return Grammar::from_gbnf("root ::= \"x\" [a-z]*\n"); });
    CHECK(small.n_entries() == 1); // the least recent one went
    GrammarCache off(0);
    CHECK(off.get_or_compile(GrammarKind::Gbnf, "x", [&] { return a; }) == a);
    CHECK(off.n_entries() == 0);
}

TEST_CASE("concurrent matchers on one grammar agree with a single-threaded run", "[limits]") {
    auto g = Grammar::from_json_schema(R"({"type":"object","properties":{"k":{"type":"array","items":{"type":"string","maxLength":4}}},"required":["k"]})");
    const std::string text = R"({"k":["ab","","wxyz","q"]})";
    auto index = ninfer::test::byte_index();
    auto masks_along = [&] {
        std::vector<uint32_t> all, words(index->n_words());
        Matcher m(g, index);
        for (char c : text) {
            m.fill_mask(words);
            all.insert(all.end(), words.begin(), words.end());
            if (!m.accept(uint8_t(c))) return std::vector<uint32_t>{};
        }
        return all;
    };
    const auto expected = masks_along();
    REQUIRE_FALSE(expected.empty());
    std::atomic<int> same{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] { for (int r = 0; r < 20; ++r) same += masks_along() == expected; });
    for (auto& t : threads) t.join();
    CHECK(same == 80);
}

TEST_CASE("mutated schemas and grammars fail only with ninfer::Error", "[limits]") {
    const std::vector<std::string> seeds = {
        R"({"type":"object","properties":{"a":{"type":"string","maxLength":3,"pattern":"^x"},"b":{"$ref":"#/$defs/n"}},"required":["a"],"$defs":{"n":{"type":"integer","minimum":-3,"maximum":70}}})",
        R"({"oneOf":[{"type":"array","prefixItems":[{"const":1}],"items":{"enum":["a",null]},"maxItems":4},{"type":"string","format":"date-time"}]})",
        R"({"anyOf":[{"type":"number","exclusiveMinimum":0.5},{"type":"object","additionalProperties":{"type":"boolean"},"maxProperties":2}]})",
        "root ::= (\"a\" | [b-d\\u00e9]+ | x){1,3} \"!\"?\nx ::= \"(\" root \")\" | .\n",
    };
    std::mt19937 rng(3);
    const std::string alphabet = "{}[]\":,01-9aez$#/\\()|*+?.^ \n";
    int compiled = 0, refused = 0;
    for (int n = 0; n < 10000; ++n) {
        std::string text = seeds[size_t(n) % seeds.size()];
        for (int k = std::uniform_int_distribution<int>(1, 4)(rng); k > 0; --k) {
            const size_t at = std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng);
            const char c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
            switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
            case 0: text[at] = c; break;
            case 1: text.insert(text.begin() + long(at), c); break;
            default: text.erase(at, 1 + at % 3);
            }
        }
        const bool gbnf = text.find("::=") != std::string::npos;
        std::shared_ptr<const Grammar> g;
        try {
            g = gbnf ? Grammar::from_gbnf(text) : Grammar::from_json_schema(text);
            ++compiled;
        } catch (const ninfer::Error&) {
            ++refused;
        } catch (const std::exception& e) {
            FAIL("not a ninfer::Error: " << e.what() << " for: " << text);
        }
        if (!g) continue;
        bool ok = false;
        std::mt19937 walk_rng{uint32_t(n)};
        INFO(text);
        CHECK_NOTHROW(ninfer::test::grammar_random_walk(g, ninfer::test::byte_index(), walk_rng, ok, 200)); // no dead end
    }
    CHECK(compiled > 100);
    CHECK(refused > 100);
}

TEST_CASE("warm_up fills token tables ahead of the first request", "[limits]") {
    auto g = Grammar::from_json_schema(R"({"type":"object","properties":{"a":{"type":"string"},"b":{"enum":[1,2]}},"required":["a","b"]})");
    auto index = ninfer::test::byte_index();
    CHECK(g->masks_for(index)->n_tables() == 0);
    CHECK(ninfer::core::grammar::warm_up(g, index, std::chrono::milliseconds(200)) > 0);
    CHECK(g->masks_for(index)->n_tables() >= 5);
}
