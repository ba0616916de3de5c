// ninfer tests - structured-output members of every API's request (output_format.cpp):
// response_format, text.format, llama.cpp's json_schema and grammar, strict flags of flat tools,
// Anthropic's forced tool_choice, and the 400s that name the member.
#include "daemon/anthropic_request.h"
#include "daemon/api_error.h"
#include "daemon/chat_request.h"
#include "daemon/completions_session.h"
#include "daemon/responses_request.h"

#include <catch2/catch.hpp>

using namespace ninfer::daemon;

namespace {

const std::string kMsg = R"("messages":[{"role":"user","content":"x"}])";

template <typename Parse> ApiError error_of(Parse parse, const std::string& body) {
    try {
        parse(body);
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("no error for " << body);
    return {};
}

ApiError chat_error(const std::string& members) {
    return error_of([](const std::string& b) { parse_chat_request(b); }, "{" + kMsg + "," + members + "}");
}

} // namespace

TEST_CASE("chat: response_format, json_schema and grammar fill output_format", "[output_format]") {
    auto format = [](const std::string& members) { return parse_chat_request("{" + kMsg + "," + members + "}").output_format; };
    CHECK(format(R"("response_format":{"type":"text"})").kind == OutputFormat::Kind::Text);
    OutputFormat f = format(R"("response_format":{"type":"json_object"})");
    CHECK(f.kind == OutputFormat::Kind::JsonObject);
    CHECK(f.param == "response_format");
    f = format(R"("response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type": "object"}}})");
    CHECK(f.kind == OutputFormat::Kind::JsonSchema);
    CHECK(f.source == R"({"type":"object"})");
    CHECK(f.param == "response_format.json_schema.schema");
    f = format(R"("json_schema":{"enum":[1,2]})");
    CHECK(f.kind == OutputFormat::Kind::JsonSchema);
    CHECK(f.param == "json_schema");
    f = format(R"("grammar":"root ::= \"a\"")");
    CHECK(f.kind == OutputFormat::Kind::Gbnf);
    CHECK(f.source == "root ::= \"a\"");
    CHECK(format(R"("grammar":"")").kind == OutputFormat::Kind::Text);
}

TEST_CASE("chat: bad structured-output members are 400s naming them", "[output_format]") {
    CHECK(chat_error(R"("response_format":{"type":"xml"})").code == "response_format_not_supported");
    CHECK(chat_error(R"("response_format":{"type":"xml"})").param == "response_format");
    CHECK(chat_error(R"("response_format":"json")").param == "response_format");
    CHECK(chat_error(R"("response_format":{"type":"json_schema"})").param == "response_format.json_schema");
    CHECK(chat_error(R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})").param ==
          "response_format.json_schema.schema");
    CHECK(chat_error(R"("response_format":{"type":"json_schema","json_schema":{"schema":[]}})").param ==
          "response_format.json_schema.schema");
    CHECK(chat_error(R"("response_format":{"type":"json_schema","json_schema":{"schema":{},"strict":"yes"}})").param ==
          "response_format.json_schema.strict");
    CHECK(chat_error(R"("grammar":7)").param == "grammar");
    // Two constraints at once: the second one named.
    CHECK(chat_error(R"("json_schema":{},"grammar":"root ::= \"a\"")").param == "grammar");
    CHECK(chat_error(R"("response_format":{"type":"json_object"},"json_schema":{})").param == "json_schema");
}

TEST_CASE("Responses text.format, completions members, flat tools' strict, Anthropic's forced tools", "[output_format]") {
    ResponsesRequest r = parse_responses_request(
        R"({"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}},)"
        R"("tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":true}]})");
    CHECK(r.chat.output_format.kind == OutputFormat::Kind::JsonSchema);
    CHECK(r.chat.output_format.param == "text.format.schema");
    REQUIRE(r.chat.conversation.tools_json.size() == 1);
    CHECK(r.chat.conversation.tools_json[0].find("\"strict\":true") != std::string::npos);
    CHECK(parse_responses_request(R"({"input":"x","text":{"format":{"type":"json_object"}}})").chat.output_format.kind ==
          OutputFormat::Kind::JsonObject);
    CompletionsRequest c = parse_completions_request(R"({"prompt":"x","grammar":"root ::= \"b\""})");
    CHECK(c.chat.output_format.kind == OutputFormat::Kind::Gbnf);
    const std::string tools = R"("tools":[{"name":"f","input_schema":{"type":"object"}}])";
    auto anthropic = [&](const std::string& choice) {
        return parse_anthropic_request(R"({"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],)" +
                                           tools + R"(,"tool_choice":)" + choice + "}",
                                       false);
    };
    CHECK_FALSE(anthropic(R"({"type":"auto"})").force_tool_schemas);
    CHECK(anthropic(R"({"type":"any"})").force_tool_schemas);
    ChatRequest named = anthropic(R"({"type":"tool","name":"f"})");
    CHECK(named.force_tool_schemas);
    CHECK(named.tool_choice == ToolChoice::Named);
}
