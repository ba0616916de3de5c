// Streaming output parser: reasoning split, typed tool-call arguments, degradation, and a
// randomized stream/split test (no crash, no lost text, split-independent results).
#include "core/frontend/output_parser.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <map>
#include <random>

using namespace ninfer::core;
using Kind = OutputEvent::Kind;

namespace {

const char* kWeatherTool = R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
  "properties":{"city":{"type":"string"},"days":{"type":"integer"},"temp":{"type":"number"},"metric":{"type":"boolean"},
  "opts":{"type":"object"},"tags":{"type":"array"},"note":{"type":["string","null"]}}}}})";

struct Collected {
    std::string reasoning, content, markup, raw; // raw: reasoning + content + markup in event order
    std::vector<std::string> names, ids, args;
    int ends = 0;
    std::string finish, stop_string;
};

Collected collect(const std::vector<OutputEvent>& events) {
    Collected c;
    for (const OutputEvent& e : events) {
        switch (e.kind) {
        case Kind::ReasoningDelta: c.reasoning += e.text; c.raw += e.text; break;
        case Kind::ContentDelta: c.content += e.text; c.raw += e.text; break;
        case Kind::Markup: c.markup += e.text; c.raw += e.text; break;
        case Kind::ToolCallStart:
            REQUIRE(e.tool_index == static_cast<int>(c.names.size()));
            c.names.push_back(e.text);
            c.ids.push_back(e.tool_call_id);
            c.args.emplace_back();
            break;
        case Kind::ToolCallArgumentsDelta:
            REQUIRE(e.tool_index == static_cast<int>(c.names.size()) - 1);
            c.args.back() += e.text;
            break;
        case Kind::ToolCallEnd: ++c.ends; break;
        case Kind::Finish: c.finish = e.text; c.stop_string = e.stop_string; break;
        }
    }
    return c;
}

OutputParserOptions with_tools(bool reasoning) {
    OutputParserOptions o;
    o.starts_in_reasoning = reasoning;
    o.tools = tool_signatures_from_json({kWeatherTool});
    return o;
}

// Feeds text in pieces of the given sizes (cycled), then finishes.
Collected run(OutputParserOptions options, std::string_view text, std::vector<size_t> sizes = {}) {
    OutputParser parser(std::move(options));
    std::vector<OutputEvent> events;
    size_t pos = 0, i = 0;
    while (pos < text.size()) {
        const size_t n = sizes.empty() ? text.size() : sizes[i++ % sizes.size()];
        parser.feed(text.substr(pos, n), events);
        pos += n;
    }
    parser.finish(GenerationEnd::EndOfSequence, events);
    return collect(events);
}

} // namespace

TEST_CASE("reasoning ends at </think>, also when the prompt opened it", "[output_parser]") {
    OutputParserOptions opened;
    const Collected a = run(opened, "Let me think.\nOK.\n</think>\n\nThe answer is 4.", {3});
    CHECK(a.reasoning == "Let me think.\nOK.");
    CHECK(a.content == "The answer is 4.");
    CHECK(a.finish == "stop");
    OutputParserOptions closed;
    closed.starts_in_reasoning = false;
    const Collected b = run(closed, "<think>\nhmm\n</think>\n\nHi", {1});
    CHECK(b.reasoning == "hmm");
    CHECK(b.content == "Hi");
    const Collected c = run(closed, "<thin ice", {2});
    CHECK(c.reasoning.empty());
    CHECK(c.content == "<thin ice");
    const Collected d = run(opened, "unfinished </thi", {4});
    CHECK(d.reasoning == "unfinished </thi");
}

TEST_CASE("a streamed tool call: name first, arguments typed by the schema", "[output_parser]") {
    const std::string text =
        "I'll check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan \"Francisco\"\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n<parameter=temp>\n-2.5e1\n</parameter>\n<parameter=metric>\nTrue\n"
        "</parameter>\n<parameter=opts>\n{\"a\": [1, null]}\n</parameter>\n<parameter=tags>\n[\"x\"]\n</parameter>\n"
        "<parameter=note>\nNone\n</parameter>\n<parameter=extra>\n42\n</parameter>\n</function>\n</tool_call>";
    for (size_t split : {1, 2, 5, 7, 1000}) {
        OutputParser parser(with_tools(false));
        std::vector<OutputEvent> events;
        bool name_seen_early = false;
        for (size_t pos = 0; pos < text.size(); pos += split) {
            parser.feed(std::string_view(text).substr(pos, split), events);
            for (const OutputEvent& e : events)
                if (e.kind == Kind::ToolCallStart && pos + split < text.find("<parameter=city>") + 20) name_seen_early = true;
        }
        parser.finish(GenerationEnd::EndOfSequence, events);
        const Collected c = collect(events);
        INFO("split " << split);
        CHECK(c.content == "I'll check.");
        REQUIRE(c.names == std::vector<std::string>{"get_weather"});
        CHECK(c.ids == std::vector<std::string>{"call_0"});
        CHECK(c.args[0] == R"({"city":"San \"Francisco\"","days":3,"temp":-2.5e1,"metric":true,"opts":{"a": [1, null]},)"
                           R"("tags":["x"],"note":null,"extra":"42"})");
        CHECK(c.ends == 1);
        CHECK(c.finish == "tool_calls");
        CHECK(c.raw == text);
        if (split < 20) CHECK(name_seen_early);
    }
}

TEST_CASE("values that do not fit their type stay strings; two calls in a row", "[output_parser]") {
    CHECK(typed_param_json("3.5", kParamInteger) == "\"3.5\"");
    CHECK(typed_param_json(" 7 ", kParamInteger) == "7");
    CHECK(typed_param_json("yes", kParamBoolean) == "\"yes\"");
    CHECK(typed_param_json("{bad", kParamObject) == "\"{bad\"");
    CHECK(typed_param_json("[1]", kParamObject) == "\"[1]\"");
    CHECK(typed_param_json("01", kParamNumber) == "\"01\"");
    const std::string call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>";
    const Collected c = run(with_tools(false), call + "\n" + call + "\n", {3});
    CHECK(c.names.size() == 2);
    CHECK(c.args == std::vector<std::string>{R"({"city":"Rome"})", R"({"city":"Rome"})"});
    CHECK(c.content.empty());
}

TEST_CASE("malformed calls degrade to text and never throw", "[output_parser]") {
    const Collected undeclared = run(with_tools(false), "x <tool_call>\n<function=rm_rf>\n</function>\n</tool_call>", {2});
    CHECK(undeclared.names.empty());
    CHECK(undeclared.content == "x <tool_call>\n<function=rm_rf>\n</function>\n</tool_call>");
    const Collected garbage = run(with_tools(false), "<tool_call>oops", {1});
    CHECK(garbage.content == "<tool_call>oops");
    const Collected cut = run(with_tools(false), "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", {4});
    CHECK(cut.names.size() == 1);
    CHECK(cut.args[0] == R"({"city":"Par"})");
    CHECK(cut.ends == 1);
    const Collected bad_param = run(with_tools(false), "<tool_call>\n<function=get_weather>\nhello <b>", {3});
    CHECK(bad_param.args[0] == "{}");
    CHECK(bad_param.content == "hello <b>");
    OutputParserOptions no_tools;
    no_tools.starts_in_reasoning = false;
    const Collected plain = run(no_tools, "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>", {5});
    CHECK(plain.names.empty());
    CHECK(plain.content == "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>");
}

TEST_CASE("stop strings apply to content, not reasoning", "[output_parser]") {
    OutputParserOptions o;
    o.stop_strings = {"END"};
    OutputParser parser(o);
    std::vector<OutputEvent> events;
    for (std::string_view piece : {"no END here</th", "ink>\n\nfirst E", "ND second"}) parser.feed(piece, events);
    CHECK(parser.stopped());
    parser.finish(GenerationEnd::EndOfSequence, events);
    const Collected c = collect(events);
    CHECK(c.reasoning == "no END here");
    CHECK(c.content == "first ");
    CHECK(c.finish == "stop");
    CHECK(c.stop_string == "END");
}

TEST_CASE("random streams and random splits: no crash, no lost text", "[output_parser]") {
    const std::vector<std::string> fragments = {
        "<think>", "</think>", "<tool_call>", "</tool_call>", "<function=", "get_weather", "nope", ">", "<parameter=",
        "city", "days", "opts", "</parameter>", "</function>", "\n", "\n\n", " ", "<", "/", "Paris", "42", "True",
        "{\"a\": [1, 2]}", "<tool_", "</para", "é", "中文", "STOP", "ST", "=", "\"q\\", "\t",
        "<tool_call>\n<function=get_weather>\n", "<parameter=city>\nRo\"me\n</parameter>\n",
        "<parameter=days>\n12\n</parameter>\n", "<parameter=opts>\n{\"k\": 1}\n</parameter>\n", "</function>\n</tool_call>"};
    std::mt19937 rng(20240601);
    int rounds_with_calls = 0, rounds_with_reasoning = 0, rounds_stopped = 0;
    for (int round = 0; round < 3000; ++round) {
        const bool random_bytes = round % 2 == 1;
        std::string text;
        for (int i = 0, n = static_cast<int>(rng() % 40); i < n; ++i) {
            if (random_bytes && rng() % 4 == 0) text += static_cast<char>(rng() % 256);
            else text += fragments[rng() % fragments.size()];
        }
        OutputParserOptions options = rng() % 4 ? with_tools(rng() % 2) : OutputParserOptions{};
        options.starts_in_reasoning = rng() % 2;
        if (rng() % 3 == 0) options.stop_strings = {"STOP", "\n\n\n"};
        const Collected whole = run(options, text);
        std::vector<size_t> sizes;
        for (int i = 0; i < 8; ++i) sizes.push_back(1 + rng() % 6);
        const Collected split = run(options, text, sizes);
        INFO("round " << round << " text [" << text << "]");
        if (whole.stop_string.empty()) CHECK(whole.raw == text);
        else CHECK(text.compare(0, whole.raw.size(), whole.raw) == 0);
        CHECK(split.raw == whole.raw);
        CHECK(split.reasoning == whole.reasoning);
        CHECK(split.content == whole.content);
        CHECK(split.names == whole.names);
        CHECK(split.args == whole.args);
        CHECK(split.finish == whole.finish);
        CHECK(whole.ends == static_cast<int>(whole.names.size()));
        rounds_with_calls += !whole.names.empty();
        rounds_with_reasoning += !whole.reasoning.empty();
        rounds_stopped += !whole.stop_string.empty();
        if (!random_bytes) {
            simdjson::dom::parser json;
            for (const std::string& a : whole.args) CHECK(json.parse(a).is_object());
        }
    }
    // The generator must actually reach the interesting paths.
    CHECK(rounds_with_calls > 30);
    CHECK(rounds_with_reasoning > 300);
    CHECK(rounds_stopped > 30);
}
