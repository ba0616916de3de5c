// ninfer::daemon - an Anthropic Messages request body (POST /v1/messages and
// /v1/messages/count_tokens) parsed into the shared ChatRequest.
//
// Contract:
// - parse_anthropic_request(body, for_count) parses with simdjson; throws ApiError 400 (param
//   names the field) for bad JSON or fields. max_tokens is required (>= 1) unless for_count.
// - system: a string or text blocks (joined with "\n"); a message of role system (Claude Code
//   sends one) becomes a system message in place; the chat template merges the leading run into
//   its one system turn and keeps a later one where it stands (chat_template.h).
//   messages: role user|assistant|system, content a
//   string or blocks: text, thinking (-> reasoning_content; redacted_thinking is dropped),
//   tool_use (-> tool_calls, input kept as a JSON object), tool_result (-> one tool message per
//   block, content a string or text blocks, before the user's other blocks); image blocks with a
//   base64 source -> an Image part (as a data: URL; a url source is checked like any media URL,
//   remote ones refused 400 invalid_media_url); document blocks and other image sources -> 400
//   modality_not_supported.
// - tools {name, description, input_schema} become OpenAI-shaped function tools; server tools
//   (a type other than custom: web_search_*, bash_*, ...) are dropped into ignored_tools; tool_choice
//   auto|any|none|tool(name) -> Auto|Required|None|Named; any and tool force the tools' input
//   schemas (force_tool_schemas: the call's input follows its input_schema). thinking {type: enabled|adaptive,
//   budget_tokens} turns thinking on with that budget, disabled turns it off; absent = the
//   server default. stop_sequences -> stop strings; temperature, top_p, top_k as sampled.
// - The model name is kept but not checked: Anthropic clients send their own model names.
// Thread safety: pure.
#pragma once

#include "daemon/chat_request.h"

#include <string_view>

namespace ninfer::daemon {

ChatRequest parse_anthropic_request(std::string_view body, bool for_count);

} // namespace ninfer::daemon
