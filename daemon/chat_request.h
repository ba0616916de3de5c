// ninfer::daemon - an OpenAI Chat Completions request body, parsed and validated.
//
// Contract:
// - parse_chat_request(body) parses with simdjson and returns the typed request, or throws
//   ApiError (400, with `param` naming the field) for bad JSON, wrong types, out-of-range values
//   and unsupported features: n != 1 (n_not_supported), functions/function_call (tools_not_supported),
//   audio and file parts (modality_not_supported). image_url / video_url parts ({"url": ...} or a
//   string) become Image / Video content parts with their URL; a remote or unknown URL is a 400
//   "invalid_media_url" (request_json.h media_part); decoding happens off the loop thread. Tools of a type other than 'function' are
//   dropped and listed in ignored_tools (what OpenAI-compatible servers that cannot run them do).
// - Structured output (issue 32; output_format.cpp): response_format {type: text | json_object |
//   json_schema {name, schema, strict}} and llama.cpp's `json_schema` (an object) and `grammar`
//   (GBNF text) fill output_format; a type other than these is 400 response_format_not_supported.
//   Tools whose function says strict: true, tool_choice required / a named function constrain the
//   tool calls (daemon/output_constraint.h compiles them before submission).
// - Unknown members are ignored (clients send many). Sampling fields the request leaves out come
//   from the server's defaults (generation_config.h: options over the model's
//   generation_config.json over OpenAI's temperature 1, top_p 1), applied by the session; `reasoning_effort: "none"` or chat_template_kwargs.enable_thinking=false turn
//   thinking off. max_tokens is left unset when absent (the daemon resolves it).
// Thread safety: pure; runs on the loop thread (bounded by max-body-mib).
#pragma once

#include "core/backend/generation_config.h"
#include "core/backend/sampling.h"
#include "core/engine/generation.h"
#include "core/frontend/chat_messages.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::daemon {

enum class ToolChoice : uint8_t { Auto, None, Required, Named };

// The grammar the reply must follow (issue 32), as the request gave it.
struct OutputFormat {
    enum class Kind : uint8_t { Text, JsonObject, JsonSchema, Gbnf };
    Kind kind = Kind::Text;
    std::string source; // the schema (minified JSON) or the GBNF text
    std::string param;  // the member it came from ("response_format.json_schema.schema"), named in 400s
};

struct ChatRequest {
    std::string model;
    core::ChatConversation conversation; // tools_json holds the tools as the client sent them
    bool stream = false;
    bool include_usage = false;
    bool continuous_usage = false; // /v1/completions: stream_options.continuous_usage_stats (with include_usage)
    bool ignore_eos = false;       // /v1/completions: the stop token ids do not end the generation
    std::optional<uint32_t> max_tokens; // max_completion_tokens or max_tokens
    core::SamplingParams sampling;        // resolved from sampling_given over the defaults
    core::SamplingDefaults sampling_given; // the sampling fields the request set
    bool has_seed = false;
    std::vector<std::string> stop;
    bool logprobs = false;
    int top_logprobs = 0;
    std::optional<bool> enable_thinking;
    std::optional<uint32_t> thinking_budget; // reasoning tokens before the engine closes it
    bool preserve_thinking = false;
    ToolChoice tool_choice = ToolChoice::Auto;
    std::string tool_choice_name; // Named
    OutputFormat output_format;
    // Anthropic's tool_choice any / tool: every tool's input follows its input_schema (as strict).
    bool force_tool_schemas = false;
    // Tools of a type the model cannot call (web_search, local_shell, Anthropic server tools...),
    // dropped rather than refused, as "type" or "type:name"; named in the x-ninfer-ignored-tools
    // response header and a log line.
    std::vector<std::string> ignored_tools;
    // "speculative": "off" | "mtp:K" | "ngram:K" | {"type": "off|mtp|ngram", "k": 1..5}; the
    // session refuses one above the server's (400, param "speculative").
    std::optional<core::SpeculativeConfig> speculative;
};

ChatRequest parse_chat_request(std::string_view body);

} // namespace ninfer::daemon
