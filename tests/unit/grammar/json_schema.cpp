// JSON Schema compiler: what each supported keyword lets through, and what it refuses.
#include "grammar_support.h"

#include "core/util/error.h"

#include <catch2/catch.hpp>

using ninfer::core::grammar::Grammar;
using ninfer::test::grammar_matches;
using ninfer::test::grammar_prefix;
using Catch::Matchers::Contains;

namespace {
std::shared_ptr<const Grammar> schema(const char* text) { return Grammar::from_json_schema(text); }
} // namespace

TEST_CASE("json schema: objects with required and optional properties in declared order", "[json_schema]") {
    auto g = schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                        "required":["b"]})");
    CHECK(grammar_matches(g, R"({"b":"x"})"));
    CHECK(grammar_matches(g, R"({"a":-12,"b":"x","c":true})"));
    CHECK(grammar_matches(g, R"({"b":"","c":false})"));
    CHECK_FALSE(grammar_matches(g, R"({"a":1})"));
    CHECK_FALSE(grammar_matches(g, R"({"b":"x","a":1})"));
    CHECK_FALSE(grammar_matches(g, R"({,"b":"x"})"));
    CHECK_FALSE(grammar_matches(g, R"({"a":01,"b":"x"})"));
    auto only_optional = schema(R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"}}})");
    for (const char* s : {"{}", R"({"a":null})", R"({"b":null})", R"({"a":null,"b":null})"}) CHECK(grammar_matches(only_optional, s));
    CHECK_FALSE(grammar_matches(only_optional, R"({"a":null,})"));
}

TEST_CASE("json schema: any object, maps, arrays with bounds, nesting", "[json_schema]") {
    auto any = Grammar::json_object();
    CHECK(grammar_matches(any, R"({"k":[1,{"x":null}],"e":"\u00e9\n"})"));
    CHECK(grammar_matches(any, "{}"));
    CHECK_FALSE(grammar_matches(any, "[]"));
    auto arr = schema(R"({"type":"array","items":{"type":"number"},"minItems":2,"maxItems":3})");
    CHECK(grammar_matches(arr, "[1,2.5]"));
    CHECK(grammar_matches(arr, "[1,2,-3e5]"));
    CHECK_FALSE(grammar_matches(arr, "[1]"));
    CHECK_FALSE(grammar_matches(arr, "[1,2,3,4]"));
    auto tuple = schema(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})");
    for (const char* s : {"[]", R"(["a"])", R"(["a",1])"}) CHECK(grammar_matches(tuple, s));
    CHECK_FALSE(grammar_matches(tuple, R"(["a",1,2])"));
    auto map = schema(R"({"type":"object","additionalProperties":{"type":"integer"}})");
    CHECK(grammar_matches(map, R"({"x":1,"y":2})"));
    CHECK_FALSE(grammar_matches(map, R"({"x":"1"})"));
}

TEST_CASE("json schema: enum, const, anyOf, type arrays, oneOf with disjoint types", "[json_schema]") {
    auto e = schema(R"({"enum":["red","green",3,null]})");
    for (const char* s : {R"("red")", R"("green")", "3", "null"}) CHECK(grammar_matches(e, s));
    CHECK_FALSE(grammar_matches(e, R"("blue")"));
    auto c = schema(R"({"const":{"a":[1,2]}})");
    CHECK(grammar_matches(c, R"({"a":[1,2]})"));
    auto t = schema(R"({"type":["string","null"]})");
    CHECK(grammar_matches(t, "null"));
    CHECK(grammar_matches(t, R"("x")"));
    CHECK_FALSE(grammar_matches(t, "1"));
    auto o = schema(R"({"oneOf":[{"type":"string"},{"type":"integer"}]})");
    CHECK(grammar_matches(o, "7"));
    CHECK_THROWS_WITH(schema(R"({"oneOf":[{"type":"number"},{"type":"integer"}]})"), Contains("/oneOf/1") && Contains("overlap"));
    // Objects told apart by a required property with different const/enum strings (through $ref).
    auto tagged = schema(R"({"oneOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}],"$defs":{
        "a":{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"]},
        "b":{"type":"object","properties":{"kind":{"enum":["b","c"]},"y":{"type":"string"}},"required":["kind"]}}})");
    CHECK(grammar_matches(tagged, R"({"kind":"a","x":1})"));
    CHECK(grammar_matches(tagged, R"({"kind":"c","y":"z"})"));
    CHECK_FALSE(grammar_matches(tagged, R"({"kind":"a","y":"z"})"));
    CHECK_THROWS_WITH(schema(R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},
        {"type":"object","properties":{"k":{"enum":["a","b"]}},"required":["k"]}]})"), Contains("overlap"));
    CHECK_THROWS_WITH(schema(R"({"oneOf":[{"properties":{"k":{"const":"a"}},"required":["k"]},
        {"properties":{"k":{"const":"b"}},"required":["k"]}]})"), Contains("overlap")); // untyped: 1 validates both
}

TEST_CASE("json schema: integer and number bounds", "[json_schema]") {
    auto g = schema(R"({"type":"integer","minimum":-15,"maximum":1234})");
    for (int v = -40; v <= 1300; ++v) CHECK(grammar_matches(g, std::to_string(v)) == (v >= -15 && v <= 1234));
    CHECK_FALSE(grammar_matches(g, "-0"));
    CHECK_FALSE(grammar_matches(g, "007"));
    auto ex = schema(R"({"type":"integer","exclusiveMinimum":5})");
    CHECK_FALSE(grammar_matches(ex, "5"));
    CHECK(grammar_matches(ex, "6"));
    CHECK(grammar_matches(ex, "123456789"));
    auto n = schema(R"({"type":"number","minimum":0.5,"maximum":3})");
    for (const char* s : {"1", "2", "3", "1.25", "2.999"}) CHECK(grammar_matches(n, s));
    for (const char* s : {"0", "0.7", "3.5", "-1", "4"}) CHECK_FALSE(grammar_matches(n, s)); // 0.7 is valid, not generated
}

TEST_CASE("json schema: strings with lengths, formats and patterns", "[json_schema]") {
    auto len = schema(R"({"type":"string","minLength":2,"maxLength":3})");
    CHECK(grammar_matches(len, R"("ab")"));
    CHECK(grammar_matches(len, "\"\xc3\xa9\xe4\xb8\x80\\n\""));
    CHECK_FALSE(grammar_matches(len, R"("a")"));
    CHECK_FALSE(grammar_matches(len, R"("abcd")"));
    CHECK_FALSE(grammar_matches(len, R"("\ud83d\ude00x")")); // surrogate escapes are not counted
    auto date = schema(R"({"type":"string","format":"date"})");
    CHECK(grammar_matches(date, R"("2024-02-28")"));
    CHECK_FALSE(grammar_matches(date, R"("2024-02-30")"));
    CHECK_FALSE(grammar_matches(date, R"("2024-13-01")"));
    auto uuid = schema(R"({"type":"string","format":"uuid"})");
    CHECK(grammar_matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
    auto pat = schema(R"({"type":"string","pattern":"^[a-z]+-\\d{2,3}$"})");
    CHECK(grammar_matches(pat, R"("abc-12")"));
    CHECK_FALSE(grammar_matches(pat, R"("abc-1")"));
    auto unanchored = schema(R"({"type":"string","pattern":"x\"y"})");
    CHECK(grammar_matches(unanchored, R"("aax\"yb")"));
}

TEST_CASE("json schema: $ref, $defs and recursion", "[json_schema]") {
    auto tree = schema(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
        "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}}})");
    CHECK(grammar_matches(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
    CHECK_FALSE(grammar_matches(tree, R"({"kids":[]})"));
    CHECK_THROWS_WITH(schema(R"({"$ref":"#"})"), Contains("no finite string"));
    CHECK_THROWS_WITH(schema(R"({"type":"object","properties":{"c":{"$ref":"#"}},"required":["c"]})"), Contains("no finite string"));
}

TEST_CASE("json schema: unsupported constructs are refused by pointer", "[json_schema]") {
    CHECK_THROWS_WITH(schema(R"({"properties":{"a":{"not":{}}}})"), Contains("/properties/a") && Contains("'not'"));
    CHECK_THROWS_WITH(schema(R"({"type":"array","uniqueItems":true})"), Contains("uniqueItems"));
    CHECK_THROWS_WITH(schema(R"({"type":"string","format":"ipv6"})"), Contains("/format") && Contains("ipv6"));
    CHECK_THROWS_WITH(schema(R"x({"type":"string","pattern":"(?=a)"})x"), Contains("/pattern") && Contains("lookaround"));
    CHECK_THROWS_WITH(schema(R"({"$ref":"other.json#/x"})"), Contains("local references"));
    CHECK_THROWS_WITH(schema("{"), Contains("not valid JSON"));
    CHECK_THROWS_WITH(schema("false"), Contains("accepts no value"));
    CHECK_THROWS_WITH(schema(R"({"type":"integer","maximum":1e300})"), Contains("1e15"));
}

TEST_CASE("json schema: large enums are factored by common prefixes (UTF-8 safe)", "[json_schema]") {
    std::string values;
    std::vector<std::string> words;
    for (int i = 0; i < 1000; ++i) words.push_back("item-" + std::to_string(i * 7919 % 100000));
    words.push_back("caf\xc3\xa9");
    words.push_back("caf\xc3\xa8");
    words.push_back("caf");
    for (const std::string& w : words) values += (values.empty() ? "\"" : ",\"") + w + "\"";
    auto g = Grammar::from_json_schema("{\"enum\":[" + values + "]}");
    for (const std::string& w : words) CHECK(grammar_matches(g, "\"" + w + "\""));
    CHECK_FALSE(grammar_matches(g, "\"item-1\""));
    CHECK_FALSE(grammar_matches(g, "\"caf\xc3\xa7\""));
    CHECK(g->gbnf().find("\"item-\"") != std::string::npos); // one shared prefix
}

TEST_CASE("json schema: compact by default, bounded whitespace on request", "[json_schema]") {
    const char* text = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]})";
    CHECK_FALSE(grammar_matches(schema(text), "{ \"a\":[1]}"));
    ninfer::core::grammar::GrammarLimits limits;
    limits.max_json_whitespace = 2;
    auto g = Grammar::from_json_schema(text, limits);
    CHECK(grammar_matches(g, "{\"a\":[1,2]}"));
    CHECK(grammar_matches(g, "{ \"a\" :\n [ 1 ,\t2 ] }"));
    CHECK(grammar_matches(g, "{\n \"a\": [1, 2]\n}"));
    CHECK_FALSE(grammar_matches(g, "{   \"a\":[1]}")); // three spaces
    CHECK_FALSE(grammar_matches(g, "{\"a\":[1 2]}"));
    CHECK(grammar_matches(Grammar::json_object(limits), "{ \"k\" : [ ] , \"j\" : { } }"));
}
