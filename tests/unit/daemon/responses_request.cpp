// ninfer tests - Responses request parsing (input items -> chat messages, tools, options) and
// the bounded response store.
#include "daemon/api_error.h"
#include "daemon/responses_request.h"
#include "daemon/responses_store.h"

#include <catch2/catch.hpp>

using namespace ninfer::daemon;
using ninfer::core::ChatRole;

namespace {

ApiError error_of(const std::string& body) {
    try {
        parse_responses_request(body);
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("no error for " << body);
    return {};
}

StoredResponse record_of(size_t text_bytes) {
    StoredResponse r;
    r.response_json = std::string(text_bytes, 'x');
    return r;
}

} // namespace

TEST_CASE("input items become a chat conversation", "[responses_request]") {
    ResponsesRequest r = parse_responses_request(R"({
      "model":"m","instructions":"be brief","max_output_tokens":64,"store":false,"previous_response_id":"resp_1",
      "metadata":{"k":"v"},"reasoning":{"effort":"none"},
      "input":[
        {"role":"developer","content":"dev"},
        {"type":"message","role":"user","content":[{"type":"input_text","text":"weather?"}]},
        {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
        {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Checking."}]},
        {"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
        {"type":"function_call_output","call_id":"call_1","output":"sunny"}],
      "tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{}}}],
      "tool_choice":{"type":"function","name":"get_weather"}})");
    const auto& m = r.chat.conversation.messages;
    REQUIRE(m.size() == 4);
    CHECK(m[0].role == ChatRole::Developer);
    CHECK(m[1].content[0].text == "weather?");
    CHECK(m[2].role == ChatRole::Assistant);
    CHECK(m[2].reasoning_content.value() == "think");
    CHECK(m[2].content[0].text == "Checking.");
    REQUIRE(m[2].tool_calls.size() == 1);
    CHECK(m[2].tool_calls[0].arguments_json == R"("{\"city\":\"Paris\"}")");
    CHECK(m[3].role == ChatRole::Tool);
    CHECK(m[3].tool_call_id == "call_1");
    CHECK(r.instructions == "be brief");
    CHECK(r.chat.max_tokens == 64u);
    CHECK_FALSE(r.store);
    CHECK(r.previous_response_id == "resp_1");
    CHECK(r.metadata_json == R"({"k":"v"})");
    CHECK(r.chat.enable_thinking == false);
    CHECK(r.chat.tool_choice == ToolChoice::Named);
    REQUIRE(r.chat.conversation.tools_json.size() == 1);
    CHECK(r.chat.conversation.tools_json[0] ==
          R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{}}}})");
    CHECK(parse_responses_request(R"({"input":"hi"})").chat.conversation.messages[0].role == ChatRole::User);
}

TEST_CASE("bad Responses requests are 400 with the field named", "[responses_request]") {
    CHECK(error_of("[]").status == 400);
    CHECK(error_of(R"({"model":"m"})").param == "input");
    CHECK(error_of(R"({"input":[{"type":"item_reference","id":"x"}]})").code == "unsupported_item");
    CHECK(error_of(R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]})").code ==
          "invalid_media_url");
    CHECK(error_of(R"({"input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]})").code ==
          "modality_not_supported");
    CHECK(error_of(R"({"input":[{"role":"assistant","content":[{"type":"input_image","image_url":"data:,"}]}]})").code ==
          "modality_not_supported");
    const ResponsesRequest media = parse_responses_request(
        R"({"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AA=="},)"
        R"({"type":"input_text","text":"b"}]}]})");
    REQUIRE(media.chat.conversation.messages.size() == 1);
    const auto& parts = media.chat.conversation.messages[0].content;
    REQUIRE(parts.size() == 3);
    CHECK(parts[0].text == "a");
    CHECK(parts[1].url == "data:image/png;base64,AA==");
    CHECK(parts[2].text == "b");
    CHECK(error_of(R"({"input":"x","text":{"format":{"type":"yaml"}}})").code == "response_format_not_supported");
    CHECK(error_of(R"({"input":"x","text":{"format":{"type":"json_schema"}}})").param == "text.format.schema");
    CHECK(error_of(R"({"input":"x","tools":[{"type":"namespace","name":"n"}]})").param == "tools[0].tools");
    CHECK(error_of(R"({"input":"x","tools":[{"type":"namespace","tools":[{"type":"function"}]}]})").param ==
          "tools[0].tools[0].name");
    CHECK(error_of(R"({"input":"x","max_output_tokens":0})").param == "max_output_tokens");
    CHECK(error_of(R"({"input":"x","tool_choice":"sometimes"})").param == "tool_choice");
}

TEST_CASE("the response store is bounded by records and bytes, least recently used first", "[responses_request]") {
    ResponseStore store(3, 1000);
    store.put("a", record_of(100));
    store.put("b", record_of(100));
    store.put("c", record_of(100));
    REQUIRE(store.get("a") != nullptr); // a is now the most recently used
    store.put("d", record_of(100));     // 4 records: b goes
    CHECK(store.get("b") == nullptr);
    CHECK(store.size() == 3);
    store.put("e", record_of(800));     // 1100 bytes: the oldest go until it fits
    CHECK(store.bytes() <= 1000);
    CHECK(store.get("e") != nullptr);
    CHECK(store.get("c") == nullptr);
    store.put("huge", record_of(5000)); // larger than the store: not kept, nothing evicted
    CHECK(store.get("huge") == nullptr);
    CHECK(store.get("e") != nullptr);
    CHECK(store.erase("e"));
    CHECK_FALSE(store.erase("e"));
    store.put("d", record_of(10));      // replacing keeps one record per id
    CHECK(store.get("d")->response_json.size() == 10);
}

TEST_CASE("Codex's tools: a namespace gives its functions, uncallable types are dropped and named", "[responses_request]") {
    ResponsesRequest r = parse_responses_request(
        R"({"input":"x","tools":[{"type":"function","name":"shell","parameters":{"type":"object"}},)"
        R"({"type":"namespace","name":"mcp__docs","tools":[{"type":"function","name":"search","parameters":{}},)"
        R"({"type":"function","name":"fetch"}]},{"type":"web_search"},{"type":"local_shell"},)"
        R"({"type":"custom","name":"apply_patch","format":{"type":"grammar"}},{"type":"file_search"}]})");
    const auto& tools = r.chat.conversation.tools_json;
    REQUIRE(tools.size() == 3);
    CHECK(tools[1] == R"({"type":"function","function":{"name":"search","parameters":{}}})");
    CHECK(tools[2] == R"({"type":"function","function":{"name":"fetch"}})");
    CHECK(r.chat.ignored_tools ==
          std::vector<std::string>{"web_search", "local_shell", "custom:apply_patch", "file_search"});
}
