// ninfer::daemon - OpenAI Responses JSON -> ChatRequest (input items, instructions, tools).
#include "daemon/responses_request.h"

#include "core/util/json_writer.h" // json_quote
#include "daemon/request_json.h"

namespace ninfer::daemon {
namespace {

using namespace request_json;
using simdjson::dom::element;
using simdjson::dom::object;

// One content part's text ("" for a refusal); 400 for parts this server does not take.
std::string part_text(element part, const std::string& p) {
    if (!part.is_object()) fail(p, "content parts must be objects", "");
    std::string type = string_of(part["type"], p + ".type");
    if (type == "input_text" || type == "output_text" || type == "text" || type == "reasoning_text" ||
        type == "summary_text")
        return string_of(part["text"], p + ".text");
    if (type == "input_file" || type == "input_audio" || type == "input_image")
        fail(p, "content part type '" + type + "' is not supported by this server" +
                    (type == "input_image" ? std::string(" here (images go in user messages)") : std::string()),
             "modality_not_supported");
    if (type != "refusal") fail(p, "unknown content part type '" + type + "'", "");
    return "";
}

std::string text_parts(element content, const std::string& param) {
    if (content.is_string()) return string_of(content, param);
    if (!content.is_array()) fail(param, "'" + param + "' must be a string or an array of parts", "");
    std::string out;
    size_t k = 0;
    for (element part : content.get_array()) out += part_text(part, param + "[" + std::to_string(k++) + "]");
    return out;
}

// A user or system message's content: text parts joined as text_parts does, input_image parts
// (image_url as a data: URL; file_id is refused) as Image parts in their place.
std::vector<core::ContentPart> message_parts(element content, const std::string& param) {
    std::vector<core::ContentPart> parts;
    if (!content.is_array()) {
        parts.push_back(core::ContentPart::of_text(text_parts(content, param)));
        return parts;
    }
    std::string text;
    auto flush = [&] {
        if (!text.empty()) parts.push_back(core::ContentPart::of_text(std::move(text)));
        text.clear();
    };
    size_t k = 0;
    for (element part : content.get_array()) {
        std::string p = param + "[" + std::to_string(k++) + "]";
        std::string_view type;
        if (part.is_object() && !part["type"].get(type) && type == "input_image") {
            element url;
            if (part["image_url"].get(url) || url.is_null())
                fail(p, "input_image needs an 'image_url' (a data: URL); file_id is not supported by this server",
                     "modality_not_supported");
            flush();
            parts.push_back(media_part(core::ContentPart::Kind::Image, string_of(url, p + ".image_url"), p + ".image_url"));
            continue;
        }
        text += part_text(part, p);
    }
    flush();
    return parts;
}

// The assistant message the next output item belongs to: the last message when it is an
// assistant's without a later user turn, else a new one.
core::ChatMessage& assistant_for(std::vector<core::ChatMessage>& messages, bool for_tool_call) {
    if (!messages.empty() && messages.back().role == core::ChatRole::Assistant &&
        (for_tool_call || (messages.back().content.empty() && messages.back().tool_calls.empty())))
        return messages.back();
    messages.push_back({});
    messages.back().role = core::ChatRole::Assistant;
    return messages.back();
}

void append_item(element item, const std::string& p, std::vector<core::ChatMessage>& messages) {
    if (!item.is_object()) fail(p, "input items must be objects", "");
    element e;
    std::string type = item["type"].get(e) || e.is_null() ? "message" : string_of(e, p + ".type");
    if (type == "message") {
        std::string role = string_of(item["role"], p + ".role");
        auto parsed = core::chat_role_from_name(role);
        if (!parsed || *parsed == core::ChatRole::Tool) fail(p + ".role", "unsupported role '" + role + "'", "unsupported_role");
        if (item["content"].get(e)) fail(p + ".content", "message without content", "");
        if (*parsed == core::ChatRole::Assistant) {
            core::ChatMessage& m = assistant_for(messages, false);
            m.content.push_back(core::ContentPart::of_text(text_parts(e, p + ".content")));
        } else {
            core::ChatMessage m;
            m.role = *parsed;
            m.content = message_parts(e, p + ".content");
            messages.push_back(std::move(m));
        }
    } else if (type == "function_call") {
        core::ToolCall call;
        call.id = string_of(item["call_id"], p + ".call_id");
        call.name = string_of(item["name"], p + ".name");
        call.arguments_json = core::json_quote(string_of(item["arguments"], p + ".arguments"));
        assistant_for(messages, true).tool_calls.push_back(std::move(call));
    } else if (type == "function_call_output") {
        core::ChatMessage tool;
        tool.role = core::ChatRole::Tool;
        tool.tool_call_id = string_of(item["call_id"], p + ".call_id");
        if (item["output"].get(e)) fail(p + ".output", "function_call_output needs 'output'", "");
        tool.content.push_back(core::ContentPart::of_text(text_parts(e, p + ".output")));
        messages.push_back(std::move(tool));
    } else if (type == "reasoning") {
        std::string text;
        if (!item["content"].get(e) && !e.is_null()) text = text_parts(e, p + ".content");
        else if (!item["summary"].get(e) && !e.is_null()) text = text_parts(e, p + ".summary");
        core::ChatMessage& m = assistant_for(messages, false);
        m.reasoning_content = m.reasoning_content.value_or("") + text;
    } else {
        fail(p + ".type", "input item type '" + type + "' is not supported by this server", "unsupported_item");
    }
}

void append_items(element input, std::vector<core::ChatMessage>& messages) {
    if (input.is_string()) {
        messages.push_back(core::ChatMessage::text(core::ChatRole::User, string_of(input, "input")));
        return;
    }
    if (!input.is_array()) fail("input", "'input' must be a string or an array of items", "");
    size_t k = 0;
    for (element item : input.get_array()) append_item(item, "input[" + std::to_string(k++) + "]", messages);
}

void parse_response_tools(element tools, ChatRequest& r) {
    parse_flat_tools(tools, "parameters", r, [](element t) {
        std::string_view type;
        return !t["type"].get(type) && type == "function";
    });
}

// Strings as in chat; the object form names the function flat ({type:function, name}).
void parse_response_tool_choice(element choice, ChatRequest& r) {
    if (!choice.is_object()) return parse_tool_choice(choice, r);
    if (string_of(choice["type"], "tool_choice.type") != "function")
        fail("tool_choice", "'tool_choice' must be none, auto, required or {type:function,name}", "");
    r.tool_choice = ToolChoice::Named;
    r.tool_choice_name = string_of(choice["name"], "tool_choice.name");
}

} // namespace

void append_response_items(std::string_view items_json, std::vector<core::ChatMessage>& messages) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(items_json);
    append_items(parser.parse(padded).value(), messages);
}

ResponsesRequest parse_responses_request(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(body);
    object b = parse_json_object(parser, padded);
    ResponsesRequest r;
    element e;
    if (!b["model"].get(e) && !e.is_null()) r.chat.model = string_of(e, "model");
    if (b["input"].get(e) || e.is_null()) fail("input", "'input' is required", "");
    append_items(e, r.chat.conversation.messages);
    if (!b["instructions"].get(e) && !e.is_null()) r.instructions = string_of(e, "instructions");
    if (!b["previous_response_id"].get(e) && !e.is_null())
        r.previous_response_id = string_of(e, "previous_response_id");
    if (!b["store"].get(e) && !e.is_null()) r.store = bool_of(e, "store");
    if (!b["metadata"].get(e) && e.is_object()) r.metadata_json = simdjson::minify(e);
    if (!b["tools"].get(e) && !e.is_null()) {
        parse_response_tools(e, r.chat);
        r.tools_json = simdjson::minify(e);
    }
    if (!b["tool_choice"].get(e) && !e.is_null()) {
        parse_response_tool_choice(e, r.chat);
        r.tool_choice_json = simdjson::minify(e);
    }
    if (!b["max_output_tokens"].get(e) && !e.is_null()) r.chat.max_tokens = positive_count(e, "max_output_tokens");
    if (!b["stream"].get(e) && !e.is_null()) r.chat.stream = bool_of(e, "stream");
    if (!b["reasoning"].get(e) && e.is_object()) {
        element effort;
        if (!e["effort"].get(effort) && !effort.is_null()) {
            r.reasoning_effort = string_of(effort, "reasoning.effort");
            r.chat.enable_thinking = r.reasoning_effort != "none";
        }
    }
    if (!b["text"].get(e) && e.is_object()) {
        element format;
        if (!e["format"].get(format) && !format.is_null()) parse_text_format(format, r.chat);
    }
    parse_sampling(b, r.chat);
    return r;
}

} // namespace ninfer::daemon
