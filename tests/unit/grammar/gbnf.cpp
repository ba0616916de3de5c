// GBNF reader: the llama.cpp syntax accepted, its meaning, and clear errors for the rest.
#include "grammar_support.h"

#include "core/util/error.h"

#include <catch2/catch.hpp>

using ninfer::core::grammar::Grammar;
using ninfer::core::grammar::GrammarLimits;
using ninfer::test::grammar_matches;
using ninfer::test::grammar_prefix;

TEST_CASE("gbnf literals, alternatives, grouping and repetition", "[gbnf]") {
    auto g = Grammar::from_gbnf(R"(
# a comment
root ::= greeting (" " name)+ "!"?   # trailing comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]*
)");
    CHECK(grammar_matches(g, "hi Bob"));
    CHECK(grammar_matches(g, "hello Bob Al!"));
    CHECK_FALSE(grammar_matches(g, "hi"));
    CHECK_FALSE(grammar_matches(g, "hi bob"));
    CHECK(grammar_prefix(g, "hel"));
    CHECK_FALSE(grammar_prefix(g, "hex"));
}

TEST_CASE("gbnf bounded repetition {m}, {m,}, {m,n}", "[gbnf]") {
    auto g = Grammar::from_gbnf("root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,}\n");
    CHECK(grammar_matches(g, "aabcc"));
    CHECK(grammar_matches(g, "aabbbccccc"));
    CHECK_FALSE(grammar_matches(g, "abcc"));
    CHECK_FALSE(grammar_matches(g, "aabbbbcc"));
    CHECK_FALSE(grammar_matches(g, "aabc"));
    auto h = Grammar::from_gbnf("root ::= ( \"x\" | \"yz\" ){0,2}\n");
    for (const char* s : {"", "x", "yz", "xyz", "yzyz", "xx"}) CHECK(grammar_matches(h, s));
    for (const char* s : {"xxx", "y", "yzx" "x"}) CHECK_FALSE(grammar_matches(h, s));
}

TEST_CASE("gbnf escapes, UTF-8 classes, negation and any", "[gbnf]") {
    auto g = Grammar::from_gbnf(R"(root ::= "\x41\u00e9\n\"\\" [^a-z\n] [α-ω] .)");
    CHECK(grammar_matches(g, "A\xc3\xa9\n\"\\Z\xce\xb2\xf0\x9f\x98\x80"));  // ... Z β 😀
    CHECK(grammar_matches(g, "A\xc3\xa9\n\"\\\xe4\xb8\x80\xce\xb1x"));      // 一 α x
    CHECK_FALSE(grammar_matches(g, "A\xc3\xa9\n\"\\a\xce\xb1x"));
    CHECK_FALSE(grammar_matches(g, "A\xc3\xa9\n\"\\Z\xce\xb1\xed\xa0\x80")); // a surrogate is not UTF-8
    CHECK_FALSE(grammar_prefix(g, "A\xc3\xa9\n\"\\\xff"));
}

TEST_CASE("gbnf recursion: nested brackets", "[gbnf]") {
    auto g = Grammar::from_gbnf("root ::= item+\nitem ::= \"(\" item* \")\" | \"x\"\n");
    CHECK(grammar_matches(g, "((x)(()))x"));
    CHECK(grammar_matches(g, std::string(200, '(') + std::string(200, ')')));
    CHECK_FALSE(grammar_matches(g, "(()"));
    CHECK_FALSE(grammar_prefix(g, "())"));
}

TEST_CASE("gbnf errors name the construct and the line", "[gbnf]") {
    using Catch::Matchers::Contains;
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= foo\n"), Contains("line 1") && Contains("undefined rule 'foo'"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("x ::= \"a\"\n"), Contains("no rule 'root'"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= \"a\"\n\nroot ::= \"b\"\n"), Contains("line 3") && Contains("defined twice"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= <[123]>\n"), Contains("token references"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= !\"a\"\n"), Contains("negation"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= \"a\n"), Contains("newline inside a literal"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= [z-a]\n"), Contains("class range"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= \"a\"{3,1}\n"), Contains("max < min"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= \"\\q\"\n"), Contains("unknown escape"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= (\"a\"\n"), Contains("expected ')'"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= root \"a\" | \"b\"\n"), Contains("left recursion"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= x \"a\"\nx ::= \"\" | root\n"), Contains("left recursion"));
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= \"a\" root\n"), Contains("derives no finite string"));
    CHECK_THROWS_AS(Grammar::from_gbnf("root ::= (\"a\"?)*\n"), ninfer::Error);
}

TEST_CASE("gbnf dead alternatives are pruned; limits are enforced", "[gbnf]") {
    auto g = Grammar::from_gbnf("root ::= \"a\" | loop\nloop ::= \"b\" loop\n");
    CHECK(grammar_matches(g, "a"));
    CHECK_FALSE(grammar_prefix(g, "b")); // b can never finish
    GrammarLimits small;
    small.max_rules = 50;
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= \"a\"{0,100}\n", small), Catch::Matchers::Contains("max_rules"));
    small = {};
    small.max_states = 1000;
    CHECK_THROWS_WITH(Grammar::from_gbnf("root ::= \"abc\"{2000}\n", small), Catch::Matchers::Contains("max_states"));
}

TEST_CASE("gbnf as llama.cpp writes it: multi-line groups with comments, empty alternatives, its JSON converter's output", "[gbnf]") {
    auto chess = Grammar::from_gbnf(R"(# `root` specifies the pattern for the overall output
root ::= (
    # it must start with "1. " followed by a move
    "1. " move " " move "\n"

    # then numbered moves
    ([1-9] [0-9]? ". " move " " move "\n")+
)
move ::= (pawn | nonpawn | castle) [+#]?
pawn ::= [a-h] [1-8]
nonpawn ::= [NBKQR] [a-h] [1-8]
castle ::= "O-O" "-O"?
)");
    CHECK(grammar_matches(chess, "1. e4 e5\n2. Nf3 Nc6\n10. O-O O-O-O#\n"));
    CHECK_FALSE(grammar_matches(chess, "1. e4 e5\n"));
    auto people = Grammar::from_gbnf(R"(char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
item ::= "{" space item-name-kv "," space item-age-kv "}" space
item-age ::= ([0-9] | ([1-8] [0-9] | [9] [0-9]) | "1" ([0-4] [0-9] | [5] "0")) space
item-age-kv ::= "\"age\"" space ":" space item-age
item-name ::= "\"" char{1,100} "\"" space
item-name-kv ::= "\"name\"" space ":" space item-name
root ::= "[" space item ("," space item){1,9} "]" space
space ::= | " " | "\n" [ \t]{0,20}
)");
    CHECK(grammar_matches(people, R"([{"name": "Ada", "age": 36}, {"name":"Alan","age":41}])"));
    CHECK(grammar_matches(people, "[\n  {\"name\": \"A\\u00e9\", \"age\": 150}, {\"name\": \"B\", \"age\": 0}]\n"));
    CHECK_FALSE(grammar_matches(people, R"([{"name": "Ada", "age": 151}, {"name":"Alan","age":41}])"));
    CHECK_FALSE(grammar_matches(people, R"([{"name": "Ada", "age": 36}])"));
    auto continued = Grammar::from_gbnf("root ::= \"a\" |\n  \"b\" |\n  \"c\"\n");
    CHECK(grammar_matches(continued, "c"));
}
