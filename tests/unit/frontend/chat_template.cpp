// Chat template renderer: byte equality with the transformers goldens, plus the rules around them.
#include "core/frontend/chat_template.h"
#include "core/frontend/chat_template_python.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace ninfer::core;

namespace {

const std::string kOracleDir = std::string(NINFER_SOURCE_DIR) + "/tests/oracle/template/";

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool flag(simdjson::dom::element conv, const char* key, bool fallback) {
    bool value = fallback;
    if (conv[key].get(value)) value = fallback;
    return value;
}

ChatConversation conversation_with_args(std::string arguments_json) {
    ChatConversation conv;
    conv.messages.push_back(ChatMessage::text(ChatRole::User, "go"));
    ChatMessage call;
    call.role = ChatRole::Assistant;
    call.tool_calls.push_back({"id1", "f", std::move(arguments_json)});
    conv.messages.push_back(call);
    return conv;
}

} // namespace

TEST_CASE("every golden conversation renders byte-equal to transformers", "[chat_template]") {
    const std::string all = read_file(kOracleDir + "conversations.json");
    simdjson::dom::parser parser;
    simdjson::dom::array convs = parser.parse(all).get_array().value();
    size_t index = 0, checked = 0;
    for (simdjson::dom::element conv : convs) {
        ++index;
        char stem[8];
        std::snprintf(stem, sizeof stem, "%02zu", index);
        std::string_view name;
        REQUIRE(!conv["name"].get(name));
        INFO("conversation " << stem << ": " << name);
        ChatRenderOptions options;
        options.add_generation_prompt = flag(conv, "add_generation_prompt", true);
        options.enable_thinking = flag(conv, "enable_thinking", true);
        options.preserve_thinking = flag(conv, "preserve_thinking", false);
        options.add_vision_id = flag(conv, "add_vision_id", false);
        const ChatConversation chat = parse_chat_conversation_json(simdjson::to_string(conv));
        const std::string txt = kOracleDir + "goldens/" + stem + ".txt";
        const std::string err = kOracleDir + "goldens/" + stem + ".error";
        if (std::filesystem::exists(txt)) {
            CHECK(render_chat_prompt(chat, options) == read_file(txt));
        } else {
            REQUIRE(std::filesystem::exists(err));
            std::string expected = read_file(err);
            expected.pop_back(); // the golden ends with a newline
            if (expected == "System message must be at the beginning.") {
                // Our one deliberate extension (chat_template.h): a late system turn keeps its place.
                CHECK(render_chat_prompt(chat, options).find("<|im_start|>system\n") != std::string::npos);
                ++checked;
                continue;
            }
            CHECK_THROWS_WITH(render_chat_prompt(chat, options), "chat template: " + expected);
        }
        ++checked;
    }
    CHECK(checked >= 25);
}

TEST_CASE("tool-call arguments as a JSON string render like the object", "[chat_template]") {
    const std::string object = R"({"city": "Paris", "n": 3, "ok": true, "x": null, "f": 1e-7, "l": [1, {"a": "b"}]})";
    const std::string as_string = json_quote(object); // what OpenAI clients send
    const std::string a = render_chat_prompt(conversation_with_args(object), {});
    CHECK(a == render_chat_prompt(conversation_with_args(as_string), {}));
    CHECK(a.find("<parameter=city>\nParis\n</parameter>\n<parameter=n>\n3\n</parameter>\n<parameter=ok>\nTrue\n"
                 "</parameter>\n<parameter=x>\nNone\n</parameter>\n<parameter=f>\n1e-07\n</parameter>\n"
                 "<parameter=l>\n[1, {\"a\": \"b\"}]\n</parameter>\n") != std::string::npos);
}

TEST_CASE("invalid tool-call arguments are a clear error", "[chat_template]") {
    CHECK_THROWS_WITH(render_chat_prompt(conversation_with_args("{\"a\": "), {}),
                      Catch::Contains("tool call f: arguments are not a JSON object: invalid JSON"));
    CHECK_THROWS_WITH(render_chat_prompt(conversation_with_args("\"{not json\""), {}),
                      Catch::Contains("invalid JSON inside the string"));
    CHECK_THROWS_WITH(render_chat_prompt(conversation_with_args("[1, 2]"), {}),
                      Catch::Contains("arguments are not a JSON object: [1,2]"));
    CHECK_NOTHROW(render_chat_prompt(conversation_with_args("null"), {}));
}

TEST_CASE("generation openers for thinking on and off", "[chat_template]") {
    ChatConversation conv;
    conv.messages.push_back(ChatMessage::text(ChatRole::User, "hi"));
    ChatRenderOptions on, off;
    off.enable_thinking = false;
    CHECK(render_chat_prompt(conv, on) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n");
    CHECK(render_chat_prompt(conv, off) == "<|im_start|>user\nhi<|im_end|>\n" + generation_opener(off));
    CHECK(generation_opener(off) == "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    CHECK_THROWS_WITH(render_chat_prompt(ChatConversation{}, on), "chat template: No messages provided.");
}

TEST_CASE("the assistant-turn opener opens history turns and the generation prompt alike", "[chat_template]") {
    ChatConversation conv;
    conv.messages.push_back(ChatMessage::text(ChatRole::User, "hi"));
    conv.messages.push_back(ChatMessage::text(ChatRole::Assistant, "hello"));
    conv.messages.push_back(ChatMessage::text(ChatRole::User, "again"));
    ChatRenderOptions options;
    const std::string opener = assistant_turn_opener();
    CHECK(opener == "<|im_start|>assistant\n");
    const std::string prompt = render_chat_prompt(conv, options);
    const size_t history = prompt.find(opener), last = prompt.rfind(opener);
    CHECK(history != std::string::npos);
    CHECK(last > history); // the reply in the history, then the generation prompt
    CHECK(prompt.substr(last) == generation_opener(options));
    CHECK(generation_opener(options).rfind(opener, 0) == 0);
}

TEST_CASE("Python float repr and str.strip", "[chat_template]") {
    CHECK(python_float_repr(1.0) == "1.0");
    CHECK(python_float_repr(-0.0) == "-0.0");
    CHECK(python_float_repr(1e16) == "1e+16");
    CHECK(python_float_repr(1e15) == "1000000000000000.0");
    CHECK(python_float_repr(1.5e16) == "1.5e+16");
    CHECK(python_float_repr(0.0001) == "0.0001");
    CHECK(python_float_repr(0.00012) == "0.00012");
    CHECK(python_float_repr(1e-5) == "1e-05");
    CHECK(python_float_repr(123.456) == "123.456");
    CHECK(python_float_repr(5e-324) == "5e-324");
    CHECK(python_float_repr(1e100) == "1e+100");
    CHECK(python_strip("\xc2\xa0 a b\t\x1f") == "a b");
    CHECK(python_strip("\xe2\x80\x8bx") == "\xe2\x80\x8bx"); // U+200B is not whitespace
    CHECK(python_strip("\xe3\x80\x80") == "");
    CHECK(python_strip("\xff \xff") == "\xff \xff");
}

TEST_CASE("the leading run of system and developer messages merges into one system turn", "[chat_template]") {
    ChatConversation conv;
    conv.messages.push_back(ChatMessage::text(ChatRole::Developer, "  first rules \n"));
    conv.messages.push_back(ChatMessage::text(ChatRole::System, ""));
    conv.messages.push_back(ChatMessage::text(ChatRole::Developer, "second rules"));
    conv.messages.push_back(ChatMessage::text(ChatRole::User, "hi"));
    ChatRenderOptions options;
    options.add_generation_prompt = false;
    CHECK(render_chat_prompt(conv, options) ==
          "<|im_start|>system\nfirst rules\n\nsecond rules<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n");
    conv.tools_json.push_back(R"({"type":"function","function":{"name":"f","parameters":{}}})");
    const std::string with_tools = render_chat_prompt(conv, options);
    CHECK(with_tools.find("</IMPORTANT>\n\nfirst rules\n\nsecond rules<|im_end|>") != std::string::npos);
}

TEST_CASE("a later system message keeps its place, so the earlier turns stay a stable prefix", "[chat_template]") {
    ChatConversation conv;
    conv.messages.push_back(ChatMessage::text(ChatRole::System, "rules"));
    conv.messages.push_back(ChatMessage::text(ChatRole::User, "hi"));
    conv.messages.push_back(ChatMessage::text(ChatRole::Assistant, "hello"));
    ChatRenderOptions options;
    options.add_generation_prompt = false;
    options.preserve_thinking = true; // history renders alike whatever the last query is
    const std::string before = render_chat_prompt(conv, options);
    conv.messages.push_back(ChatMessage::text(ChatRole::Developer, " reminder "));
    conv.messages.push_back(ChatMessage::text(ChatRole::User, "again"));
    const std::string after = render_chat_prompt(conv, options);
    REQUIRE(after.size() > before.size());
    CHECK(after.substr(0, before.size()) == before);
    CHECK(after.substr(before.size()) ==
          "<|im_start|>system\nreminder<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n");
}
