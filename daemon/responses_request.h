// ninfer::daemon - an OpenAI Responses request body (POST /v1/responses) parsed into the shared
// ChatRequest plus the members the Responses object echoes back.
//
// Contract:
// - parse_responses_request(body) throws ApiError 400 (param names the field) for bad JSON or
//   fields. `input` is a string (one user message) or an array of items: messages
//   ({role, content} with or without type "message"; content a string or input_text /
//   output_text parts; roles user, assistant, system, developer), function_call
//   (-> the assistant's tool call, arguments kept as the JSON string the client sent),
//   function_call_output (-> a tool message) and reasoning (its reasoning_text / summary text
//   -> reasoning_content of the assistant message that follows). input_image parts of user and
//   system messages with an image_url (a data: URL) -> Image parts in place; file_id images,
//   images elsewhere, files and other items -> 400 (modality_not_supported / unsupported_item).
// - `instructions` becomes a leading system message at render time (not stored with the
//   conversation, as in OpenAI's API); tools ({type:function, name, parameters}) become
//   OpenAI chat tools, a {type:namespace, tools} contributes its functions, other types
//   (web_search, local_shell, custom, ...) are dropped into ignored_tools; tool_choice none|auto|required|{type:function,name};
//   max_output_tokens -> max_tokens; reasoning.effort "none" turns thinking off;
//   text.format {type: text | json_object | json_schema, name, schema, strict} -> output_format
//   (another type: 400 response_format_not_supported); store (default true),
//   previous_response_id and metadata are kept for the session.
// Thread safety: pure.
#pragma once

#include "core/frontend/chat_messages.h"
#include "daemon/chat_request.h"

#include <string>
#include <string_view>

namespace ninfer::daemon {

struct ResponsesRequest {
    ChatRequest chat;                            // conversation = the input items only
    std::string instructions;
    std::string previous_response_id;
    bool store = true;
    std::string metadata_json = "{}";            // echoed
    std::string tools_json = "[]";               // echoed as sent
    std::string tool_choice_json = "\"auto\"";   // echoed as sent
    std::string reasoning_effort;                // echoed ("" = null)
};

ResponsesRequest parse_responses_request(std::string_view body);

// Appends input items (a JSON array text, or messages already parsed) to a conversation:
// exposed so a stored response's output items continue a conversation the same way.
void append_response_items(std::string_view items_json, std::vector<core::ChatMessage>& messages);

} // namespace ninfer::daemon
