// ninfer::daemon - Anthropic Messages JSON -> ChatRequest (messages, system, tools, thinking).
#include "daemon/anthropic_request.h"

#include "daemon/request_json.h"

namespace ninfer::daemon {
namespace {

using namespace request_json;
using simdjson::dom::element;
using simdjson::dom::object;

std::string block_type(element block, const std::string& param) {
    if (!block.is_object()) fail(param, "content blocks must be objects", "");
    element t;
    if (block["type"].get(t)) fail(param + ".type", "content block without a type", "");
    return string_of(t, param + ".type");
}

// A string or an array of text blocks, as one text.
std::string text_of(element content, const std::string& param, const char* joiner) {
    if (content.is_string()) return string_of(content, param);
    if (!content.is_array()) fail(param, "'" + param + "' must be a string or an array of text blocks", "");
    std::string out;
    size_t k = 0;
    for (element b : content.get_array()) {
        std::string p = param + "[" + std::to_string(k++) + "]";
        std::string type = block_type(b, p);
        if (type != "text") fail(p, "only text blocks are supported here, not '" + type + "'", "modality_not_supported");
        if (!out.empty()) out += joiner;
        out += string_of(b["text"], p + ".text");
    }
    return out;
}

// {"type":"image","source":{"type":"base64","media_type":"image/png","data":"..."}} as a data: URL;
// a "url" source is a remote URL (refused by media_part unless it is itself a data: URL).
core::ContentPart image_block(element b, const std::string& p) {
    element source;
    if (b["source"].get(source) || !source.is_object()) fail(p + ".source", "an image block needs a 'source' object", "");
    const std::string kind = string_of(source["type"], p + ".source.type");
    if (kind == "base64")
        return media_part(core::ContentPart::Kind::Image,
                          "data:" + string_of(source["media_type"], p + ".source.media_type") + ";base64," +
                              string_of(source["data"], p + ".source.data"),
                          p + ".source");
    if (kind == "url")
        return media_part(core::ContentPart::Kind::Image, string_of(source["url"], p + ".source.url"), p + ".source.url");
    fail(p + ".source.type", "image source type '" + kind + "' is not supported by this server (base64 is)",
         "modality_not_supported");
}

void add_user_blocks(element content, const std::string& param, std::vector<core::ChatMessage>& out) {
    core::ChatMessage user;
    user.role = core::ChatRole::User;
    size_t k = 0;
    for (element b : content.get_array()) {
        std::string p = param + "[" + std::to_string(k++) + "]";
        std::string type = block_type(b, p);
        if (type == "text") {
            user.content.push_back(core::ContentPart::of_text(string_of(b["text"], p + ".text")));
        } else if (type == "tool_result") {
            core::ChatMessage tool;
            tool.role = core::ChatRole::Tool;
            tool.tool_call_id = string_of(b["tool_use_id"], p + ".tool_use_id");
            element c;
            if (!b["content"].get(c) && !c.is_null())
                tool.content.push_back(core::ContentPart::of_text(text_of(c, p + ".content", "\n")));
            out.push_back(std::move(tool));
        } else if (type == "image") {
            user.content.push_back(image_block(b, p));
        } else if (type == "document") {
            fail(p, "content block type '" + type + "' is not supported by this server", "modality_not_supported");
        } else {
            fail(p, "unsupported content block type '" + type + "' in a user message", "");
        }
    }
    if (!user.content.empty()) out.push_back(std::move(user));
}

core::ChatMessage assistant_from_blocks(element content, const std::string& param) {
    core::ChatMessage msg;
    msg.role = core::ChatRole::Assistant;
    size_t k = 0;
    for (element b : content.get_array()) {
        std::string p = param + "[" + std::to_string(k++) + "]";
        std::string type = block_type(b, p);
        if (type == "text") {
            msg.content.push_back(core::ContentPart::of_text(string_of(b["text"], p + ".text")));
        } else if (type == "thinking") {
            msg.reasoning_content = msg.reasoning_content.value_or("") + string_of(b["thinking"], p + ".thinking");
        } else if (type == "redacted_thinking") {
            continue;
        } else if (type == "tool_use") {
            core::ToolCall call;
            call.id = string_of(b["id"], p + ".id");
            call.name = string_of(b["name"], p + ".name");
            element input;
            if (b["input"].get(input) || !input.is_object()) fail(p + ".input", "tool_use needs an 'input' object", "");
            call.arguments_json = simdjson::minify(input);
            msg.tool_calls.push_back(std::move(call));
        } else {
            fail(p, "unsupported content block type '" + type + "' in an assistant message", "");
        }
    }
    return msg;
}

void parse_messages(element messages, ChatRequest& r) {
    if (!messages.is_array()) fail("messages", "'messages' must be an array", "");
    size_t index = 0;
    for (element m : messages.get_array()) {
        std::string param = "messages[" + std::to_string(index++) + "]";
        if (!m.is_object()) fail(param, "each message must be an object", "");
        std::string role = string_of(m["role"], param + ".role");
        element content;
        if (m["content"].get(content)) fail(param + ".content", "message without content", "");
        bool is_user = role == "user";
        if (role == "system") { // Claude Code sends one inside messages; merged like the top-level field
            r.conversation.messages.push_back(core::ChatMessage::text(core::ChatRole::System, text_of(content, param + ".content", "\n")));
            continue;
        }
        if (!is_user && role != "assistant")
            fail(param + ".role", "role must be 'user', 'assistant' or 'system'", "unsupported_role");
        if (content.is_string()) {
            r.conversation.messages.push_back(
                core::ChatMessage::text(is_user ? core::ChatRole::User : core::ChatRole::Assistant, string_of(content, param)));
        } else if (!content.is_array()) {
            fail(param + ".content", "content must be a string or an array of blocks", "");
        } else if (is_user) {
            add_user_blocks(content, param + ".content", r.conversation.messages);
        } else {
            r.conversation.messages.push_back(assistant_from_blocks(content, param + ".content"));
        }
    }
    if (r.conversation.messages.empty()) fail("messages", "'messages' must not be empty", "");
}

void parse_anthropic_tools(element tools, ChatRequest& r) {
    parse_flat_tools(tools, "input_schema", r, [](element t) { // server tools (web_search_*, bash_*) are dropped
        element e;
        return t["type"].get(e) || e.is_null() || string_of(e, "tools.type") == "custom";
    });
}

void parse_anthropic_tool_choice(element choice, ChatRequest& r) {
    if (choice.is_null()) return;
    if (!choice.is_object()) fail("tool_choice", "'tool_choice' must be an object", "");
    std::string type = string_of(choice["type"], "tool_choice.type");
    if (type == "auto") r.tool_choice = ToolChoice::Auto;
    else if (type == "any") r.tool_choice = ToolChoice::Required, r.force_tool_schemas = true;
    else if (type == "none") r.tool_choice = ToolChoice::None;
    else if (type == "tool") {
        r.tool_choice = ToolChoice::Named;
        r.tool_choice_name = string_of(choice["name"], "tool_choice.name");
        r.force_tool_schemas = true;
    } else {
        fail("tool_choice.type", "tool_choice type must be auto, any, none or tool", "");
    }
}

void parse_thinking(element thinking, ChatRequest& r) {
    if (thinking.is_null()) return;
    if (!thinking.is_object()) fail("thinking", "'thinking' must be an object", "");
    std::string type = string_of(thinking["type"], "thinking.type");
    if (type == "disabled") {
        r.enable_thinking = false;
        return;
    }
    if (type != "enabled" && type != "adaptive") fail("thinking.type", "thinking type must be enabled, adaptive or disabled", "");
    r.enable_thinking = true;
    element budget;
    if (!thinking["budget_tokens"].get(budget) && !budget.is_null()) {
        r.thinking_budget = positive_count(budget, "thinking.budget_tokens");
    }
}

} // namespace

ChatRequest parse_anthropic_request(std::string_view body, bool for_count) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(body);
    object b = parse_json_object(parser, padded);
    ChatRequest r;
    element e;
    if (!b["model"].get(e) && !e.is_null()) r.model = string_of(e, "model");
    if (!b["system"].get(e) && !e.is_null())
        r.conversation.messages.push_back(core::ChatMessage::text(core::ChatRole::System, text_of(e, "system", "\n")));
    if (b["messages"].get(e)) fail("messages", "'messages' is required", "");
    parse_messages(e, r);
    if (!b["tools"].get(e)) parse_anthropic_tools(e, r);
    if (!b["tool_choice"].get(e)) parse_anthropic_tool_choice(e, r);
    if (!b["thinking"].get(e)) parse_thinking(e, r);
    if (!b["max_tokens"].get(e) && !e.is_null()) {
        r.max_tokens = positive_count(e, "max_tokens");
    } else if (!for_count) {
        fail("max_tokens", "'max_tokens' is required", "");
    }
    if (!b["stop_sequences"].get(e)) parse_stop(e, "stop_sequences", r);
    if (!b["stream"].get(e) && !e.is_null()) r.stream = bool_of(e, "stream");
    parse_sampling(b, r);
    return r;
}

} // namespace ninfer::daemon
