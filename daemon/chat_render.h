// ninfer::daemon - OpenAI chat JSON renderers: SSE chunks, the final completion, usage, timings.
//
// Contract: pure functions producing compact JSON text. Chunks are `chat.completion.chunk`
// objects; the completion is a `chat.completion`. usage carries
// prompt_tokens_details.cached_tokens; timings follows llama.cpp (cache_n, prompt_n, prompt_ms,
// prompt_per_token_ms, prompt_per_second, predicted_n, predicted_ms, predicted_per_token_ms,
// predicted_per_second), the decode rate over predicted_n - 1 intervals.
#pragma once

#include "core/engine/generation.h"
#include "daemon/chat_sink.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::daemon {

struct CompletionMeta {
    std::string id; // chatcmpl-<hex>
    int64_t created = 0;
    std::string model;
    bool usage_null_in_chunks = false; // stream_options.include_usage
};

struct ToolCallOut {
    std::string id;
    std::string name;
    std::string arguments;
};

struct ChatResult {
    std::string content;
    std::string reasoning;
    std::vector<ToolCallOut> tool_calls;
    std::vector<TokenLogprob> logprobs;
    std::string finish_reason;
};

// One chunk; `delta_json` is the delta object's JSON; finish_reason "" = null; logprobs may be
// empty (null unless want_logprobs).
std::string render_chunk(const CompletionMeta& meta, const std::string& delta_json, const std::string& finish_reason,
                         const std::vector<TokenLogprob>* logprobs);
std::string render_usage_chunk(const CompletionMeta& meta, const core::GenerationSummary& summary);
std::string render_usage(const core::GenerationSummary& summary);
std::string render_timings(const core::GenerationSummary& summary);
std::string render_logprobs(const std::vector<TokenLogprob>& logprobs);
std::string render_completion(const CompletionMeta& meta, const ChatResult& result,
                              const core::GenerationSummary& summary, bool want_logprobs);

} // namespace ninfer::daemon
