// ninfer::core - our C++ renderer of the official Qwen3.5/3.6 chat template (docs/MODEL.md §15),
// not a Jinja engine. Byte-equal to transformers' apply_chat_template with the official template on
// every conversation in tests/oracle/template/ (the golden test enforces it).
//
// Contract:
// - render_chat_prompt(conversation, options) returns the prompt text. It reproduces the template's
//   rules exactly: Python str.strip() trimming of contents, the tools block (tojson with ", " and
//   ": " separators, key order and raw UTF-8 kept), tool calls in history (string arguments raw,
//   objects/arrays as tojson, other values as Python prints them: True/False/None, 1e-07,
//   1e+21, 1.0), consecutive tool messages grouped into one user turn, reasoning kept only after
//   the last real user query (a user turn that is not wholly <tool_response>...</tool_response>)
//   unless preserve_thinking (Qwen3.6's rule), image/video placeholders with optional
//   "Picture N: " / "Video N: " ids, and the generation opener.
// - Beyond the template (which raises "System message must be at the beginning."): the leading run
//   of system/developer messages is merged, in order, stripped and joined by a blank line, into
//   the one system turn; a system/developer message after the first other message keeps its place
//   as a ChatML turn "<|im_start|>system\n<stripped text><|im_end|>\n", never moved to the top, so
//   the prompt's prefix (and the prefix cache) stays stable across turns. One leading system
//   message renders byte-equal to the template.
// - Errors the template raises become ninfer::Error("chat template: <template's message>"):
//   "No messages provided.", "No user query found in messages.", "System message cannot contain images." / "...videos."; invalid tool-call
//   arguments give "chat template: tool call NAME: arguments are not a JSON object: ...".
// - assistant_turn_opener() is the text that opens every assistant turn, in the history and in the
//   generation prompt alike: "<|im_start|>assistant\n". The prefix cache checkpoints a prompt right
//   after its last occurrence (the daemon tokenizes it for the engine), since the next turn's
//   prompt still agrees with this one up to there.
// - generation_opener(options) is the text the prompt ends with when add_generation_prompt: the
//   assistant turn opener, then "<think>\n" (thinking on) or "<think>\n\n</think>\n\n" (off).
// Thread safety: pure functions.
#pragma once

#include "core/frontend/chat_messages.h"

#include <string>

namespace ninfer::core {

struct ChatRenderOptions {
    bool add_generation_prompt = true;
    bool enable_thinking = true;    // false: the prompt closes an empty <think> block
    bool preserve_thinking = false; // keep reasoning of every assistant turn in history
    bool add_vision_id = false;     // "Picture N: " / "Video N: " before each placeholder
};

std::string render_chat_prompt(const ChatConversation& conversation, const ChatRenderOptions& options);

std::string assistant_turn_opener();
std::string generation_opener(const ChatRenderOptions& options);

// Helpers shared with the output parser and tests: transformers' tojson (Python json.dumps with
// ensure_ascii=False, default separators) of a JSON text, and Python's str() of a JSON scalar.
std::string python_tojson(std::string_view json);

} // namespace ninfer::core
