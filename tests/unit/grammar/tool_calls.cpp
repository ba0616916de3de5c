// Tool-call grammars: random strings of the grammar, read back by the real output parser, give
// calls of declared tools whose arguments validate (ajv) against the tool's schema when strict.
#include "grammar_support.h"

#include "core/frontend/output_parser.h"

#include <catch2/catch.hpp>

#include <map>

using ninfer::core::GenerationEnd;
using ninfer::core::OutputEvent;
using ninfer::core::OutputParser;
using ninfer::core::OutputParserOptions;
using ninfer::core::grammar::Grammar;
using ninfer::core::grammar::ToolChoice;
using ninfer::core::grammar::ToolSpec;
using namespace ninfer::test;
using Catch::Matchers::Contains;

namespace {

const std::vector<ToolSpec> kTools = {
    {"get_weather", R"({"type":"object","properties":{"city":{"type":"string","minLength":1,"maxLength":12},
      "unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":14},"detailed":{"type":"boolean"},
      "coords":{"type":"object","properties":{"lat":{"type":"number","minimum":-90,"maximum":90},"lon":{"type":"number"}},
      "required":["lat","lon"],"additionalProperties":false}},"required":["city","unit"],"additionalProperties":false})", true},
    {"search", R"({"type":"object","properties":{"q":{"type":"string"},"tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":3},
      "note":{"type":["string","null"]},"when":{"type":"string","format":"date"}},"required":["q"]})", true},
    {"free_form", R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}})", false},
};

struct ParsedCall {
    std::string name, arguments;
};

// The output parser's reading of a generated text: calls (name + arguments JSON) and content.
std::vector<ParsedCall> parse(const std::string& text, std::string& content) {
    OutputParserOptions options;
    options.starts_in_reasoning = false;
    std::vector<std::string> tools_json;
    for (const ToolSpec& t : kTools) tools_json.push_back("{\"name\":\"" + t.name + "\",\"parameters\":" + t.parameters_schema_json + "}");
    options.tools = ninfer::core::tool_signatures_from_json(tools_json);
    OutputParser parser(options);
    std::vector<OutputEvent> events;
    parser.feed(text, events);
    parser.finish(GenerationEnd::EndOfSequence, events);
    std::vector<ParsedCall> calls;
    for (const OutputEvent& e : events) {
        if (e.kind == OutputEvent::Kind::ToolCallStart) calls.push_back({e.text, ""});
        else if (e.kind == OutputEvent::Kind::ToolCallArgumentsDelta) calls.back().arguments += e.text;
        else if (e.kind == OutputEvent::Kind::ContentDelta) content += e.text;
    }
    return calls;
}

// Walks `n` random strings of the grammar; returns the parsed calls per tool name for ajv.
std::map<std::string, std::vector<std::string>> walk_calls(const std::shared_ptr<const Grammar>& g, int n, size_t& n_calls,
                                                           std::vector<std::string>& contents) {
    std::mt19937 rng(5);
    std::map<std::string, std::vector<std::string>> by_tool;
    n_calls = 0;
    for (int k = 0; k < n; ++k) {
        bool ok = false;
        const std::string text = grammar_random_walk(g, markup_index(), rng, ok, 1500, 0.5);
        if (!ok) continue;
        std::string content;
        for (const ParsedCall& c : parse(text, content)) {
            by_tool[c.name].push_back(c.arguments);
            ++n_calls;
        }
        contents.push_back(content);
    }
    return by_tool;
}

std::vector<OracleGroup> strict_groups(const std::map<std::string, std::vector<std::string>>& by_tool) {
    std::vector<OracleGroup> groups;
    for (const ToolSpec& t : kTools)
        if (t.strict && by_tool.count(t.name)) groups.push_back({t.parameters_schema_json, "7", by_tool.at(t.name)});
    return groups;
}

} // namespace

TEST_CASE("tool_choice required: every string parses as calls whose strict arguments validate", "[tool_calls]") {
    auto g = Grammar::tool_calls(kTools, {ToolChoice::Kind::Required, ""});
    size_t n_calls = 0;
    std::vector<std::string> contents;
    const auto by_tool = walk_calls(g, 150, n_calls, contents);
    CHECK(contents.size() >= 100);
    CHECK(n_calls >= contents.size()); // at least one call per string
    for (const std::string& c : contents) CHECK(c.find_first_not_of(" \n") == std::string::npos);
    CHECK(by_tool.count("get_weather"));
    CHECK(by_tool.count("search"));
    const auto [checked, failures] = ajv_validate(strict_groups(by_tool), "tools_required");
    for (const std::string& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
    CHECK(checked > 50);
}

TEST_CASE("tool_choice named and auto; non-strict tools take declared names with free values", "[tool_calls]") {
    auto named = Grammar::tool_calls(kTools, {ToolChoice::Kind::Named, "search"});
    size_t n_calls = 0;
    std::vector<std::string> contents;
    auto by_tool = walk_calls(named, 60, n_calls, contents);
    CHECK(by_tool.size() == 1);
    CHECK(by_tool.count("search"));
    CHECK(grammar_prefix(named, "<tool_call>\n<function=search>\n"));
    CHECK_FALSE(grammar_prefix(named, "<tool_call>\n<function=get_weather>"));

    auto any = Grammar::tool_calls(kTools, {});
    CHECK(grammar_matches(any, "Just text, no call. a < b"));
    CHECK(grammar_matches(any, ""));
    CHECK_FALSE(grammar_prefix(any, "text <tool_call>oops"));
    CHECK(grammar_matches(any, "Let me look.\n\n<tool_call>\n<function=free_form>\n<parameter=b>\nx < y </para\n</parameter>\n</function>\n</tool_call>"));
    CHECK_FALSE(grammar_prefix(any, "<tool_call>\n<function=free_form>\n<parameter=c>"));
    contents.clear();
    by_tool = walk_calls(any, 100, n_calls, contents);
    const auto [checked, failures] = ajv_validate(strict_groups(by_tool), "tools_auto");
    for (const std::string& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
    for (const std::string& c : contents) CHECK(c.find("<tool_call>") == std::string::npos);
}

TEST_CASE("tool grammars refuse what the output parser could not read back", "[tool_calls]") {
    auto one = [](const char* schema) { return Grammar::tool_calls({{"f", schema, true}}, {ToolChoice::Kind::Required, ""}); };
    CHECK_THROWS_WITH(one(R"({"properties":{"x":{"type":["string","integer"]}}})"), Contains("/properties/x") && Contains("string"));
    CHECK_THROWS_WITH(one(R"({"properties":{"x":{"$ref":"#/$defs/y"}},"$defs":{"y":{"type":"integer"}}})"), Contains("/properties/x"));
    CHECK_THROWS_WITH(one(R"({"properties":{"x":{"type":"integer"}},"required":["y"]})"), Contains("'y'"));
    CHECK_THROWS_WITH(Grammar::tool_calls(kTools, {ToolChoice::Kind::Named, "nope"}), Contains("'nope'"));
    CHECK_THROWS_WITH(Grammar::tool_calls({{"bad>name", "", true}}, {}), Contains("tool name"));
    auto none = Grammar::tool_calls({{"ping", "", true}}, {ToolChoice::Kind::Required, ""});
    CHECK(grammar_matches(none, "<tool_call>\n<function=ping>\n</function>\n</tool_call>"));
}
