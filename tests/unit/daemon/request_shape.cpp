// ninfer tests - every API's JSON request parser answers a missing or wrong-typed field with an
// ApiError 400 naming the field (issue 30 item 4: simdjson's "field does not exist" escaped as a
// 500): the cases the issue found, then a sweep that deletes each member of valid bodies in turn
// and replaces each value with every JSON type.
#include "daemon/anthropic_request.h"
#include "daemon/api_error.h"
#include "daemon/chat_request.h"
#include "daemon/completions_session.h"
#include "daemon/responses_request.h"

#include <simdjson.h>

#include <catch2/catch.hpp>

#include <functional>

using namespace ninfer::daemon;

namespace {

using Parse = std::function<void(const std::string&)>;

const Parse kChat = [](const std::string& b) { parse_chat_request(b); };
const Parse kResponses = [](const std::string& b) { parse_responses_request(b); };
const Parse kMessages = [](const std::string& b) { parse_anthropic_request(b, false); };
const Parse kCountTokens = [](const std::string& b) { parse_anthropic_request(b, true); };
const Parse kCompletions = [](const std::string& b) { parse_completions_request(b); };

// The ApiError `parse` throws for `body`; a test failure when it accepts the body or throws
// anything else.
ApiError error_of(const Parse& parse, const std::string& body) {
    try {
        parse(body);
    } catch (const ApiError& e) {
        return e;
    } catch (const std::exception& e) {
        FAIL("not an ApiError (" << e.what() << ") for " << body);
    }
    FAIL("no error for " << body);
    return {};
}

// Every JSON value a field could wrongly hold.
const char* const kReplacements[] = {"null", "true", "0", "-1", "0.5", "1e300", "18446744073709551615",
                                     "\"\"", "\"x\"", "[]", "{}", "[{}]", "{\"type\":\"text\"}"};

// Each text that is `e` with exactly one change: a member or element deleted, or a value replaced.
std::vector<std::string> mutations_of(simdjson::dom::element e) {
    std::vector<std::string> out(std::begin(kReplacements), std::end(kReplacements));
    auto wrap = [&](const std::vector<std::string>& parts, char open, char close, size_t skip,
                    size_t replaced, const std::string& replacement) {
        std::string s(1, open);
        for (size_t i = 0; i < parts.size(); ++i) {
            if (i == skip) continue;
            if (s.size() > 1) s += ',';
            s += i == replaced ? replacement : parts[i];
        }
        return s + close;
    };
    std::vector<std::string> keys, values;
    std::vector<simdjson::dom::element> children;
    if (e.is_object()) {
        for (auto [key, value] : simdjson::dom::object(e)) {
            keys.push_back("\"" + std::string(key) + "\":"); // the bodies' keys need no escaping
            values.push_back(simdjson::minify(value));
            children.push_back(value);
        }
    } else if (e.is_array()) {
        for (simdjson::dom::element value : simdjson::dom::array(e)) {
            keys.emplace_back();
            values.push_back(simdjson::minify(value));
            children.push_back(value);
        }
    } else {
        return out;
    }
    std::vector<std::string> parts;
    for (size_t i = 0; i < keys.size(); ++i) parts.push_back(keys[i] + values[i]);
    char open = e.is_object() ? '{' : '[', close = e.is_object() ? '}' : ']';
    for (size_t i = 0; i < children.size(); ++i) {
        out.push_back(wrap(parts, open, close, i, SIZE_MAX, ""));
        for (const std::string& m : mutations_of(children[i]))
            out.push_back(wrap(parts, open, close, SIZE_MAX, i, keys[i] + m));
    }
    return out;
}

// Every mutation of `valid` is accepted or refused with a 4xx naming its field; returns how many
// were refused so the caller can check the sweep reached the parser's checks.
size_t sweep(const Parse& parse, const std::string& valid) {
    parse(valid);
    simdjson::dom::parser parser;
    std::vector<std::string> bodies = mutations_of(parser.parse(simdjson::padded_string(valid)).value());
    size_t n_refused = 0;
    for (const std::string& body : bodies) {
        try {
            parse(body);
        } catch (const ApiError& e) {
            ++n_refused;
            INFO(body << " -> " << e.status << " " << e.message);
            CHECK(e.status >= 400);
            CHECK(e.status < 500);
            bool is_root = body.empty() || body[0] != '{';
            if (!is_root) CHECK_FALSE(e.param.empty());
        } catch (const std::exception& e) {
            FAIL_CHECK("not an ApiError (" << e.what() << ") for " << body);
        }
    }
    CHECK(bodies.size() > 100);
    return n_refused;
}

const char* const kChatBody = R"({
  "model":"m","max_tokens":8,"max_completion_tokens":8,"stream":false,"stream_options":{"include_usage":true},
  "messages":[{"role":"system","content":"s"},
    {"role":"user","content":[{"type":"text","text":"hi"}]},
    {"role":"assistant","content":null,"reasoning_content":"r",
     "tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"ok"}],
  "tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],
  "tool_choice":{"type":"function","function":{"name":"f"}},
  "stop":["x","y"],"temperature":0.5,"top_p":0.9,"top_k":4,"min_p":0.1,"presence_penalty":0.1,
  "frequency_penalty":0.1,"repetition_penalty":1.1,"seed":3,"logit_bias":{"5":1},"n":1,
  "response_format":{"type":"text"},"logprobs":true,"top_logprobs":2,"enable_thinking":false,
  "chat_template_kwargs":{"enable_thinking":false,"preserve_thinking":true},"reasoning_effort":"low"})";

const char* const kResponsesBody = R"({
  "model":"m","instructions":"i","max_output_tokens":8,"store":false,"stream":false,"metadata":{"k":"v"},
  "reasoning":{"effort":"low"},"text":{"format":{"type":"text"}},"temperature":0.5,
  "input":[{"role":"user","content":"q"},
    {"type":"message","role":"user","content":[{"type":"input_text","text":"weather?"}]},
    {"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"content":[{"type":"reasoning_text","text":"t"}]},
    {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
    {"type":"function_call_output","call_id":"c1","output":"sunny"}],
  "tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"}}],
  "tool_choice":{"type":"function","name":"f"}})";

const char* const kMessagesBody = R"({
  "model":"m","max_tokens":8,"stream":false,"system":[{"type":"text","text":"A"}],
  "messages":[{"role":"user","content":"weather?"},
    {"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"x"},{"type":"text","text":"c"},
      {"type":"tool_use","id":"t1","name":"f","input":{"city":"Paris"}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"sunny"}]},
      {"type":"text","text":"thanks"}]}],
  "tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],
  "tool_choice":{"type":"tool","name":"f"},"thinking":{"type":"enabled","budget_tokens":64},
  "stop_sequences":["END"],"temperature":0.5,"top_k":4})";

const char* const kCompletionsBody = R"({
  "model":"m","prompt":"Once","max_tokens":4,"stream":true,"stream_options":{"include_usage":true},"echo":false,
  "n":1,"best_of":1,"stop":["x"],"temperature":0,"seed":1})";

} // namespace

TEST_CASE("missing nested required fields are 400s naming the field", "[request_shape]") {
    struct Case {
        const Parse* parse;
        const char* body;
        const char* param;
    };
    const Case cases[] = {
        {&kResponses, R"({"input":"q","tools":[{"type":"function"}]})", "tools[0].name"},
        {&kResponses, R"({"input":"q","tool_choice":{"type":"function"}})", "tool_choice.name"},
        {&kMessages, R"({"max_tokens":4,"messages":[{"content":"hi"}]})", "messages[0].role"},
        {&kCountTokens, R"({"messages":[{"content":"hi"}]})", "messages[0].role"},
        {&kMessages, R"({"max_tokens":4,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]})",
         "messages[0].content[0].id"},
        {&kMessages, R"({"max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]})",
         "messages[0].content[0].tool_use_id"},
        {&kChat, R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{}}]})",
         "tools[0].function.name"},
        {&kChat, R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages[0].content.text"},
        {&kChat, R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"function","function":{}}})",
         "tool_choice.function.name"},
    };
    for (const Case& c : cases) {
        ApiError e = error_of(*c.parse, c.body);
        INFO(c.body << " -> " << e.message);
        CHECK(e.status == 400);
        CHECK(e.param == c.param);
        CHECK(e.message.find(c.param) != std::string::npos);
    }
}

TEST_CASE("deleting or retyping any field of a valid body never escapes as a non-4xx", "[request_shape]") {
    // Each sweep must also refuse some mutations, or it never reached the parser's checks.
    CHECK(sweep(kChat, kChatBody) > 50);
    CHECK(sweep(kResponses, kResponsesBody) > 50);
    CHECK(sweep(kMessages, kMessagesBody) > 50);
    CHECK(sweep(kCountTokens, kMessagesBody) > 50);
    CHECK(sweep(kCompletions, kCompletionsBody) > 20);
}
