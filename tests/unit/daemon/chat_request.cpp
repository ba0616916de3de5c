// ninfer tests - OpenAI chat request parsing: fields, defaults, and 400s with param and code.
#include "daemon/api_error.h"
#include "daemon/chat_request.h"
#include "daemon/routes.h"

#include <catch2/catch.hpp>

using namespace ninfer::daemon;

namespace {

ApiError error_of(const std::string& body) {
    try {
        parse_chat_request(body);
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("no error for " << body);
    return {};
}

} // namespace

TEST_CASE("a full request parses into typed fields", "[chat_request]") {
    ChatRequest r = parse_chat_request(R"({
      "model":"m","stream":true,"stream_options":{"include_usage":true},
      "messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},
        {"role":"assistant","content":null,"reasoning_content":"r",
         "tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"ok"}],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
      "tool_choice":{"type":"function","function":{"name":"f"}},
      "temperature":0,"top_p":0.5,"top_k":40,"min_p":0.1,"presence_penalty":1,"frequency_penalty":-1,
      "repetition_penalty":1.1,"seed":18446744073709551615,"stop":["x","y"],"max_completion_tokens":7,
      "logprobs":true,"top_logprobs":3,"logit_bias":{"5":-100},"chat_template_kwargs":{"enable_thinking":false,"preserve_thinking":true}})");
    CHECK(r.model == "m");
    CHECK(r.stream);
    CHECK(r.include_usage);
    REQUIRE(r.conversation.messages.size() == 4);
    CHECK(r.conversation.messages[1].content[0].text == "hi");
    CHECK(*r.conversation.messages[2].reasoning_content == "r");
    CHECK(r.conversation.messages[2].tool_calls[0].arguments_json == R"("{\"a\":1}")");
    CHECK(r.conversation.messages[3].tool_call_id == "c1");
    CHECK(r.conversation.tools_json.size() == 1);
    CHECK(r.tool_choice == ToolChoice::Named);
    CHECK(r.tool_choice_name == "f");
    CHECK(r.sampling.is_greedy());
    CHECK(r.sampling.top_k == 40);
    CHECK(r.sampling.seed == UINT64_MAX);
    CHECK(r.has_seed);
    CHECK(r.stop == std::vector<std::string>{"x", "y"});
    CHECK(*r.max_tokens == 7);
    CHECK(r.top_logprobs == 3);
    CHECK(r.sampling.logit_bias.size() == 1);
    CHECK(*r.enable_thinking == false);
    CHECK(r.preserve_thinking);
}

TEST_CASE("defaults: temperature 1, no max_tokens, reasoning_effort none disables thinking", "[chat_request]") {
    ChatRequest r = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"none"})");
    CHECK(r.sampling.temperature == 1.0f);
    CHECK_FALSE(r.max_tokens.has_value());
    CHECK_FALSE(r.stream);
    CHECK(*r.enable_thinking == false);
}

TEST_CASE("bad input is a 400 naming the field, with OpenAI codes for unsupported features", "[chat_request]") {
    CHECK(error_of("{not json").status == 400);
    CHECK(error_of("[]").message.find("JSON object") != std::string::npos);
    CHECK(error_of(R"({"messages":[]})").param == "messages");
    CHECK(error_of(R"({"messages":[{"role":"robot","content":"x"}]})").code == "unsupported_role");
    const std::string msg = R"("messages":[{"role":"user","content":"x"}])";
    CHECK(error_of("{" + msg + R"(,"temperature":3})").param == "temperature");
    CHECK(error_of("{" + msg + R"(,"max_tokens":0})").param == "max_tokens");
    CHECK(error_of("{" + msg + R"(,"n":2})").code == "n_not_supported");
    CHECK(error_of("{" + msg + R"(,"response_format":{"type":"xml"}})").code == "response_format_not_supported");
    CHECK(error_of("{" + msg + R"(,"functions":[]})").code == "tools_not_supported");
    CHECK(parse_chat_request("{" + msg + R"(,"tools":[{"type":"retrieval"}]})").ignored_tools ==
          std::vector<std::string>{"retrieval"});
    CHECK(error_of("{" + msg + R"(,"top_logprobs":2})").param == "top_logprobs");
    // Media parts: remote and unknown URLs are refused here; data: URLs are decoded later (media_input.h).
    CHECK(error_of(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})").code ==
          "invalid_media_url");
    CHECK(error_of(R"({"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"http://a/b.mp4"}}]}]})")
              .message.find("remote media URLs are not fetched") != std::string::npos);
    CHECK(error_of(R"({"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]})").code ==
          "modality_not_supported");
    const ChatRequest media = parse_chat_request(
        R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},)"
        R"({"type":"video_url","video_url":"file:///m/v.mp4"}]}]})");
    REQUIRE(media.conversation.messages[0].content.size() == 3);
    CHECK(media.conversation.messages[0].content[1].kind == ninfer::core::ContentPart::Kind::Image);
    CHECK(media.conversation.messages[0].content[1].url == "data:image/png;base64,AAAA");
    CHECK(media.conversation.messages[0].content[2].kind == ninfer::core::ContentPart::Kind::Video);
    CHECK(media.conversation.messages[0].content[2].url == "file:///m/v.mp4");
    CHECK(parse_chat_request("{" + msg + R"(,"response_format":{"type":"text"}})").conversation.messages.size() == 1);
}

TEST_CASE("API keys compare in constant time over the longer input", "[chat_request]") {
    CHECK(constant_time_equals("abc", "abc"));
    CHECK_FALSE(constant_time_equals("abc", "abd"));
    CHECK_FALSE(constant_time_equals("abc", "abcd"));
    CHECK_FALSE(constant_time_equals("", "a"));
    CHECK(constant_time_equals("", ""));
}

TEST_CASE("error bodies stay valid JSON when the message echoes invalid UTF-8", "[chat_request]") {
    std::string body = render_openai_error({404, "no route GET /\xff\xfe", "not_found", "", ""});
    CHECK(body.find("\"message\":\"no route GET /\xEF\xBF\xBD\xEF\xBF\xBD\"") != std::string::npos);
    CHECK(body.find("\"param\":null") != std::string::npos);
    CHECK(body.find("\"type\":\"not_found_error\"") != std::string::npos);
}

TEST_CASE("speculative: a string or {type, k}; anything else is a 400 on param speculative", "[chat_request]") {
    using ninfer::core::SpeculativeConfig;
    using ninfer::core::SpeculativeKind;
    const std::string head = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"speculative":)";
    CHECK_FALSE(parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})").speculative);
    CHECK(parse_chat_request(head + R"("off"})").speculative == SpeculativeConfig{});
    CHECK(parse_chat_request(head + R"({"type":"off"}})").speculative == SpeculativeConfig{});
    CHECK(parse_chat_request(head + R"("ngram:4"})").speculative == SpeculativeConfig{SpeculativeKind::Ngram, 4});
    CHECK(parse_chat_request(head + R"({"type":"mtp","k":2}})").speculative == SpeculativeConfig{SpeculativeKind::Mtp, 2});
    for (const char* bad : {R"("on")", R"("mtp:0")", R"("mtp:6")", "3", "true", R"({"type":"mtp"})",
                            R"({"type":"mtp","k":6})", R"({"type":"mtp","k":"2"})", R"({"k":2})", R"({"type":"eagle","k":1})"}) {
        INFO(bad);
        const ApiError e = error_of(head + bad + "}");
        CHECK(e.status == 400);
        CHECK(e.param == "speculative");
    }
}
