// ninfer tests - OutputBlocks: parser events grouped into ordered reasoning/text/tool-call
// blocks with open/delta/close callbacks, whitespace before a tool call dropped.
#include "core/frontend/output_parser.h"
#include "daemon/api_common.h"

#include <catch2/catch.hpp>

using namespace ninfer::daemon;
using Kind = ninfer::core::OutputEvent::Kind;

namespace {

struct Recorder : OutputBlocks::Listener {
    std::vector<std::string> log;
    void block_opened(size_t i, const OutputBlock& b) override { log.push_back("open " + std::to_string(i) + " " + b.name); }
    void block_delta(size_t i, const OutputBlock&, std::string_view d) override {
        log.push_back("delta " + std::to_string(i) + " " + std::string(d));
    }
    void block_closed(size_t i, const OutputBlock&) override { log.push_back("close " + std::to_string(i)); }
};

ninfer::core::OutputEvent ev(Kind kind, std::string text, std::string id = "") {
    ninfer::core::OutputEvent e;
    e.kind = kind;
    e.text = std::move(text);
    e.tool_call_id = std::move(id);
    return e;
}

// The parser's real events for a Qwen output, fed in pieces of `step` bytes.
std::vector<ninfer::core::OutputEvent> parse(const std::string& text, size_t step) {
    ninfer::core::OutputParserOptions o;
    o.tools = ninfer::core::tool_signatures_from_json(
        {R"({"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}})"});
    ninfer::core::OutputParser p(o);
    std::vector<ninfer::core::OutputEvent> events;
    for (size_t i = 0; i < text.size(); i += step) p.feed(std::string_view(text).substr(i, step), events);
    p.finish(ninfer::core::GenerationEnd::EndOfSequence, events);
    return events;
}

} // namespace

TEST_CASE("events become ordered blocks with open, delta and close", "[api_common]") {
    OutputBlocks blocks;
    Recorder r;
    blocks.feed({ev(Kind::ReasoningDelta, "th"), ev(Kind::ReasoningDelta, "ink"), ev(Kind::Markup, "\n</think>\n\n"),
                 ev(Kind::ContentDelta, "Hi"), ev(Kind::ToolCallStart, "f", "call_1"),
                 ev(Kind::ToolCallArgumentsDelta, "{}"), ev(Kind::ToolCallEnd, "")},
                &r);
    blocks.close(&r);
    CHECK(r.log == std::vector<std::string>{"open 0 ", "delta 0 th", "delta 0 ink", "close 0", "open 1 ", "delta 1 Hi",
                                            "close 1", "open 2 f", "delta 2 {}", "close 2"});
    REQUIRE(blocks.blocks().size() == 3);
    CHECK(blocks.blocks()[0].text == "think");
    CHECK(blocks.blocks()[2].call_id == "call_1");
    CHECK(blocks.has_tool_calls());
}

TEST_CASE("whitespace before a tool call makes no text block; before text it is kept", "[api_common]") {
    for (size_t step : {1, 3, 1000}) {
        OutputBlocks a;
        a.feed(parse("r\n</think>\n\n<tool_call>\n<function=f>\n<parameter=a>\n7\n</parameter>\n</function>\n</tool_call>", step),
               nullptr);
        a.close(nullptr);
        REQUIRE(a.blocks().size() == 2);
        CHECK(a.blocks()[0].kind == OutputBlock::Kind::Reasoning);
        CHECK(a.blocks()[1].kind == OutputBlock::Kind::ToolCall);
        CHECK(a.blocks()[1].text == R"({"a":7})");
    }
    OutputBlocks b;
    b.feed({ev(Kind::ContentDelta, " \n"), ev(Kind::ContentDelta, "x")}, nullptr);
    REQUIRE(b.blocks().size() == 1);
    CHECK(b.blocks()[0].text == " \nx");
}
