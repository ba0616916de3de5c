// ninfer::daemon - the grammar a chat request's reply must follow (issue 32), compiled before the
// request is submitted: structured output (response_format, text.format, json_schema, grammar)
// or constrained tool calls (tools with strict: true, tool_choice required or a named function,
// Anthropic's forced tool_choice).
//
// Contract:
// - compile_output_constraint(request, frontend, cache, after_reasoning) returns nullopt for a
//   free reply, else the ConstraintSpec the engine applies: the grammar after the reasoning when
//   after_reasoning (thinking mode; `</think>` closes it, "\n\n" may follow), end tokens = the
//   frontend's stop ids. Which grammar: a tool grammar (core::grammar::Grammar::tool_calls, the
//   model's Qwen XML tool-call syntax) when tool_choice is required or named, or when a tool is
//   strict and tool_choice is auto (free text or calls); otherwise the output format. Strict
//   tools with tool_choice auto and an output format in one request are refused (400): the
//   answer could follow only one of them.
// - Grammars come from `cache` (keyed by kind and source, GrammarCache), compiled on a miss under
//   the engine's bounds (GrammarLimits: rules, states, time). An invalid or unsupported schema or
//   grammar, or one past the bounds, is ApiError 400 invalid_grammar naming the request member
//   ("response_format.json_schema.schema", "grammar", "tools[2].function.parameters").
// Thread safety: CPU work (compilation, the tokenizer's token index on first use): call it on the
// libuv worker pool, never on the loop thread; the cache and the frontend are thread-safe.
#pragma once

#include "core/engine/reply_constraint.h"
#include "core/grammar/grammar_cache.h"
#include "daemon/chat_request.h"
#include "daemon/model_frontend.h"

#include <optional>

namespace ninfer::daemon {

std::optional<core::ConstraintSpec> compile_output_constraint(const ChatRequest& request, const ModelFrontend& frontend,
                                                              core::grammar::GrammarCache& cache, bool after_reasoning);

} // namespace ninfer::daemon
