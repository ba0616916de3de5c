// ninfer::daemon - POST /v1/completions: OpenAI legacy completions over a raw prompt, through
// the shared generation session.
//
// Contract:
// - Body: prompt (a string, an array of one string, or an array of token ids), max_tokens
//   (default 16, as OpenAI), stream + stream_options.include_usage, stop, echo, sampling as in
//   chat (temperature, top_p, top_k, min_p, penalties, seed, logit_bias). n != 1, best_of > 1
//   and suffix -> 400. Extensions (as vLLM's): ignore_eos (the end-of-sequence ids do not stop
//   the generation: it runs to max_tokens or a stop string; benchmarks) and
//   stream_options.continuous_usage_stats (with include_usage: every text chunk carries the usage
//   so far, so a client counts the tokens behind each chunk). No chat template and no reasoning/tool parsing: the text is the model's
//   output verbatim (stop strings still end it).
// - Answer: {id:"cmpl-<hex>", object:"text_completion", created, model, choices:[{index:0,
//   text, logprobs:null, finish_reason}], usage}; streamed as text_completion chunks, a usage
//   chunk (choices []) when asked, then [DONE]. Errors in the OpenAI shape; x-request-id.
// Loop thread only.
#pragma once

#include "daemon/chat_session.h"

namespace ninfer::daemon {

struct CompletionsRequest {
    ChatRequest chat;            // no conversation: sampling, stop, max_tokens, stream
    std::string prompt;          // text prompt, or
    std::vector<int32_t> prompt_ids; // token ids when the client sent ids
    bool echo = false;
};

CompletionsRequest parse_completions_request(std::string_view body);

class CompletionsSession final : public ChatSession {
  public:
    CompletionsSession(DaemonContext& ctx, uint64_t id, CompletionsRequest request,
                       std::shared_ptr<ResponseWriter> writer);

  private:
    PreparedPrompt prepare_prompt() const override;
    void begin_stream() override;
    void stream_events(const std::vector<core::OutputEvent>& events) override;
    void collect_events(const std::vector<core::OutputEvent>& events) override;
    void render_finished(const ChatUpdate& update) override;
    std::string_view api_field(std::string_view chat_field) const override {
        return chat_field == "messages" ? "prompt" : chat_field;
    }

    std::string chunk(const std::string& text, const std::string& finish_reason) const;
    std::string prompt_text() const;

    std::string prompt_;
    std::vector<int32_t> prompt_ids_;
    bool echo_;
    std::string text_; // not streaming
};

} // namespace ninfer::daemon
