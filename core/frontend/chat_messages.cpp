// The chat message model: role names and the OpenAI-style JSON reader used by ninferctl and tests.
#include "core/frontend/chat_messages.h"

#include "core/util/error.h"

#include <simdjson.h>

namespace ninfer::core {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

[[noreturn]] void fail(size_t index, const std::string& why) {
    throw Error("chat messages: message " + std::to_string(index) + ": " + why);
}

bool has_key(object obj, std::string_view key) {
    element ignored;
    return !obj.at_key(key).get(ignored);
}

std::string_view string_member(object obj, std::string_view key) {
    std::string_view s;
    return obj.at_key(key).get_string().get(s) ? std::string_view() : s;
}

// The source URL of a media part: "image_url" / "video_url" as a string or {"url": ...}, or
// "image" / "video" as a string; "" when none.
std::string media_url(object part) {
    for (std::string_view key : {"image_url", "video_url", "image", "video"}) {
        element e;
        if (part.at_key(key).get(e)) continue;
        std::string_view s;
        object o;
        if (!e.get_string().get(s)) return std::string(s);
        if (!e.get_object().get(o)) return std::string(string_member(o, "url"));
    }
    return {};
}

// Mirrors the template: image if the part has "image"/"image_url" or type "image"; video if
// "video"/"video_url" or type "video"/"video_url"; otherwise it must carry "text".
ContentPart read_part(size_t index, element item) {
    object part;
    if (item.get_object().get(part)) fail(index, "content part is not an object");
    const std::string_view type = string_member(part, "type");
    if (has_key(part, "image") || has_key(part, "image_url") || type == "image")
        return {ContentPart::Kind::Image, {}, media_url(part)};
    if (has_key(part, "video") || has_key(part, "video_url") || type == "video" || type == "video_url")
        return {ContentPart::Kind::Video, {}, media_url(part)};
    element text;
    if (part.at_key("text").get(text)) fail(index, "unexpected content part type '" + std::string(type) + "'");
    std::string_view s;
    if (text.get_string().get(s)) fail(index, "content part text is not a string");
    return ContentPart::of_text(std::string(s));
}

std::vector<ContentPart> read_content(size_t index, object msg) {
    element content;
    if (msg.at_key("content").get(content) || content.is_null()) return {};
    if (content.is_string()) return {ContentPart::of_text(std::string(content.get_string().value_unsafe()))};
    if (!content.is_array()) fail(index, "content is neither a string, an array nor null");
    std::vector<ContentPart> parts;
    for (element item : simdjson::dom::array(content.get_array().value_unsafe())) parts.push_back(read_part(index, item));
    return parts;
}

ToolCall read_tool_call(size_t index, element item) {
    object call;
    if (item.get_object().get(call)) fail(index, "tool call is not an object");
    ToolCall out;
    out.id = std::string(string_member(call, "id"));
    object function = call;
    element wrapped;
    if (!call.at_key("function").get(wrapped) && wrapped.get_object().get(function)) fail(index, "tool call function is not an object");
    out.name = std::string(string_member(function, "name"));
    if (out.name.empty()) fail(index, "tool call without a name");
    element args;
    if (!function.at_key("arguments").get(args)) out.arguments_json = simdjson::to_string(args);
    return out;
}

ChatMessage read_message(size_t index, element item) {
    object msg;
    if (item.get_object().get(msg)) fail(index, "not an object");
    const std::string_view role_name = string_member(msg, "role");
    const auto role = chat_role_from_name(role_name);
    if (!role) fail(index, "unexpected role '" + std::string(role_name) + "'");
    ChatMessage m;
    m.role = *role;
    m.content = read_content(index, msg);
    element reasoning;
    if (!msg.at_key("reasoning_content").get(reasoning) && reasoning.is_string())
        m.reasoning_content = std::string(reasoning.get_string().value_unsafe());
    element calls;
    if (!msg.at_key("tool_calls").get(calls) && !calls.is_null()) {
        if (!calls.is_array()) fail(index, "tool_calls is not an array");
        for (element call : simdjson::dom::array(calls.get_array().value_unsafe())) m.tool_calls.push_back(read_tool_call(index, call));
    }
    m.tool_call_id = std::string(string_member(msg, "tool_call_id"));
    return m;
}

} // namespace

ChatMessage ChatMessage::text(ChatRole role, std::string text) {
    ChatMessage m;
    m.role = role;
    m.content.push_back(ContentPart::of_text(std::move(text)));
    return m;
}

std::string_view chat_role_name(ChatRole role) {
    switch (role) {
    case ChatRole::System: return "system";
    case ChatRole::Developer: return "developer";
    case ChatRole::User: return "user";
    case ChatRole::Assistant: return "assistant";
    case ChatRole::Tool: return "tool";
    }
    return "?";
}

std::optional<ChatRole> chat_role_from_name(std::string_view name) {
    for (ChatRole r : {ChatRole::System, ChatRole::Developer, ChatRole::User, ChatRole::Assistant, ChatRole::Tool})
        if (chat_role_name(r) == name) return r;
    return std::nullopt;
}

ChatConversation parse_chat_conversation_json(std::string_view json) {
    simdjson::dom::parser parser;
    element root;
    if (auto err = parser.parse(json.data(), json.size()).get(root))
        throw Error(std::string("chat messages: invalid JSON: ") + simdjson::error_message(err));
    ChatConversation conv;
    element messages = root;
    if (root.is_object()) {
        if (root.at_key("messages").get(messages)) throw Error("chat messages: object without \"messages\"");
        element tools;
        if (!root.at_key("tools").get(tools) && !tools.is_null()) {
            if (!tools.is_array()) throw Error("chat messages: \"tools\" is not an array");
            for (element tool : simdjson::dom::array(tools.get_array().value_unsafe())) {
                if (!tool.is_object()) throw Error("chat messages: a tool is not an object");
                conv.tools_json.push_back(simdjson::to_string(tool));
            }
        }
    }
    if (!messages.is_array()) throw Error("chat messages: \"messages\" is not an array");
    size_t index = 0;
    for (element item : simdjson::dom::array(messages.get_array().value_unsafe())) conv.messages.push_back(read_message(index++, item));
    return conv;
}

} // namespace ninfer::core
