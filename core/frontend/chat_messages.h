// ninfer::core - the conversation model the chat template renders: messages, content parts, tool
// calls in history and tool definitions. The HTTP layer fills it from OpenAI / Anthropic JSON;
// parse_chat_conversation_json() fills it from OpenAI-style JSON (ninferctl render, tests).
//
// Contract:
// - Roles: system, developer (rendered as system, docs/MODEL.md §15), user, assistant, tool.
// - content is an ordered list of parts; a plain string is one Text part, a null/absent content is
//   an empty list (the template treats all three alike after trimming).
// - Image/Video parts are placeholders to the template, which writes
//   <|vision_start|><|image_pad|><|vision_end|> (or <|video_pad|>); their `url` is where the
//   pixels come from as the client gave it (a data: URL, a file:// URL; core/media/media_source.h
//   decodes and checks it), "" when the message shape named none (ninferctl render).
// - ToolCall::arguments_json is the JSON text of the arguments exactly as the client sent it:
//   either a JSON object (`{"city":"Paris"}`, Anthropic `input`) or a JSON string holding an
//   object (`"{\"city\":\"Paris\"}"`, OpenAI `function.arguments`). Empty text = no arguments.
//   The renderer validates it and throws ninfer::Error("chat template: ...") when it is not an
//   object. Key order is kept.
// - ChatConversation::tools_json holds one JSON object text per tool, as the client sent it
//   (OpenAI `{"type":"function","function":{...}}`); the template prints it re-serialised the way
//   transformers' tojson does. The HTTP layer converts Anthropic tools to the OpenAI shape.
// - parse_chat_conversation_json accepts either a JSON array of messages or an object
//   {"messages": [...], "tools": [...]} (other members ignored) and throws ninfer::Error naming
//   the offending message on malformed input.
// Thread safety: plain values.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

namespace ninfer::core {

enum class ChatRole { System, Developer, User, Assistant, Tool };

struct ContentPart {
    enum class Kind { Text, Image, Video };
    Kind kind = Kind::Text;
    std::string text; // Text parts only
    std::string url;  // Image/Video parts: the media source URL as sent

    static ContentPart of_text(std::string text) { return {Kind::Text, std::move(text), {}}; }
};

struct ToolCall {
    std::string id;             // not rendered by the template; kept for the API layer
    std::string name;
    std::string arguments_json; // JSON object text, or a JSON string holding one; "" = none
};

struct ChatMessage {
    ChatRole role = ChatRole::User;
    std::vector<ContentPart> content;
    std::optional<std::string> reasoning_content; // assistant: set = use it (even empty)
    std::vector<ToolCall> tool_calls;              // assistant
    std::string tool_call_id;                      // tool: not rendered, kept for the API layer

    static ChatMessage text(ChatRole role, std::string text);
};

struct ChatConversation {
    std::vector<ChatMessage> messages;
    std::vector<std::string> tools_json;
};

std::string_view chat_role_name(ChatRole role);        // "system", "developer", ...
std::optional<ChatRole> chat_role_from_name(std::string_view name);

ChatConversation parse_chat_conversation_json(std::string_view json);

} // namespace ninfer::core
