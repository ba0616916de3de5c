// ninfer::daemon - chat JSON rendering (chunks, completion, usage, timings, logprobs).
#include "daemon/chat_render.h"

#include "core/util/json_writer.h"

namespace ninfer::daemon {
namespace {

void write_top(core::JsonWriter& w, const TokenLogprob& t) {
    w.begin_object().member("token", t.token).member("logprob", double(t.logprob));
    w.key("bytes").begin_array();
    for (uint8_t b : t.bytes) w.value(int(b));
    w.end_array();
    w.key("top_logprobs").begin_array();
    for (const auto& [text, lp] : t.top) {
        w.begin_object().member("token", text).member("logprob", double(lp));
        w.key("bytes").begin_array();
        for (unsigned char b : text) w.value(int(b));
        w.end_array().end_object();
    }
    w.end_array().end_object();
}

void write_header(core::JsonWriter& w, const CompletionMeta& meta, const char* object) {
    w.member("id", meta.id).member("object", object).member("created", meta.created).member("model", meta.model);
    w.member("system_fingerprint", "ninfer-" NINFER_VERSION_STRING);
}

double per_second(uint64_t n, double ms) { return ms > 0 ? double(n) * 1000.0 / ms : 0.0; }

} // namespace

std::string render_logprobs(const std::vector<TokenLogprob>& logprobs) {
    core::JsonWriter w;
    w.begin_object().key("content").begin_array();
    for (const TokenLogprob& t : logprobs) write_top(w, t);
    w.end_array().end_object();
    return w.take();
}

std::string render_chunk(const CompletionMeta& meta, const std::string& delta_json, const std::string& finish_reason,
                         const std::vector<TokenLogprob>* logprobs) {
    core::JsonWriter w;
    w.begin_object();
    write_header(w, meta, "chat.completion.chunk");
    w.key("choices").begin_array().begin_object().member("index", 0);
    w.key("delta").raw(delta_json);
    w.key("logprobs");
    logprobs ? w.raw(render_logprobs(*logprobs)) : w.null();
    w.key("finish_reason");
    finish_reason.empty() ? w.null() : w.value(finish_reason);
    w.end_object().end_array();
    if (meta.usage_null_in_chunks) w.key("usage").null();
    w.end_object();
    return w.take();
}

std::string render_usage(const core::GenerationSummary& s) {
    core::JsonWriter w;
    w.begin_object().member("prompt_tokens", uint64_t(s.prompt_tokens));
    w.member("completion_tokens", uint64_t(s.completion_tokens));
    w.member("total_tokens", uint64_t(s.prompt_tokens) + s.completion_tokens);
    w.key("prompt_tokens_details").begin_object().member("cached_tokens", uint64_t(s.cached_tokens)).end_object();
    w.end_object();
    return w.take();
}

std::string render_timings(const core::GenerationSummary& s) {
    uint64_t prompt_n = s.prompt_tokens - s.cached_tokens;
    uint64_t predicted_n = s.completion_tokens;
    uint64_t intervals = predicted_n > 1 ? predicted_n - 1 : 0;
    core::JsonWriter w;
    w.begin_object().member("cache_n", uint64_t(s.cached_tokens)).member("prompt_n", prompt_n);
    w.member("prompt_ms", s.prompt_ms).member("prompt_per_token_ms", prompt_n ? s.prompt_ms / double(prompt_n) : 0.0);
    w.member("prompt_per_second", per_second(prompt_n, s.prompt_ms));
    w.member("predicted_n", predicted_n).member("predicted_ms", s.decode_ms);
    w.member("predicted_per_token_ms", intervals ? s.decode_ms / double(intervals) : 0.0);
    w.member("predicted_per_second", per_second(intervals, s.decode_ms));
    w.member("draft_n", uint64_t(s.draft_n)).member("draft_n_accepted", uint64_t(s.draft_n_accepted));
    w.end_object();
    return w.take();
}

std::string render_usage_chunk(const CompletionMeta& meta, const core::GenerationSummary& summary) {
    core::JsonWriter w;
    w.begin_object();
    write_header(w, meta, "chat.completion.chunk");
    w.key("choices").begin_array().end_array();
    w.key("usage").raw(render_usage(summary));
    w.key("timings").raw(render_timings(summary));
    w.end_object();
    return w.take();
}

std::string render_completion(const CompletionMeta& meta, const ChatResult& r, const core::GenerationSummary& summary,
                              bool want_logprobs) {
    core::JsonWriter w;
    w.begin_object();
    write_header(w, meta, "chat.completion");
    w.key("choices").begin_array().begin_object().member("index", 0);
    w.key("message").begin_object().member("role", "assistant");
    w.key("content");
    (r.content.empty() && !r.tool_calls.empty()) ? w.null() : w.value(r.content);
    if (!r.reasoning.empty()) w.member("reasoning_content", r.reasoning);
    if (!r.tool_calls.empty()) {
        w.key("tool_calls").begin_array();
        for (const ToolCallOut& c : r.tool_calls) {
            w.begin_object().member("id", c.id).member("type", "function");
            w.key("function").begin_object().member("name", c.name).member("arguments", c.arguments).end_object();
            w.end_object();
        }
        w.end_array();
    }
    w.end_object();
    w.key("logprobs");
    want_logprobs ? w.raw(render_logprobs(r.logprobs)) : w.null();
    w.member("finish_reason", r.finish_reason);
    w.end_object().end_array();
    w.key("usage").raw(render_usage(summary));
    w.key("timings").raw(render_timings(summary));
    w.end_object();
    return w.take();
}

} // namespace ninfer::daemon
