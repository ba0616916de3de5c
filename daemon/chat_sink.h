// ninfer::daemon - the engine-side half of a chat request: token ids -> UTF-8 text -> output
// parser events, handed to the loop thread as ChatUpdate values.
//
// Contract:
// - ChatSink runs on the engine thread (a core::GenerationSink). Token bytes are joined so a UTF-8
//   character split across tokens is emitted whole (utf8_scan_stable); stop token ids add no text.
//   on_token returns Stop once the parser matched a stop string.
// - Every callback produces one ChatUpdate passed to `deliver`, which must only queue it for the
//   loop thread (LoopBridge::post). Finished carries how the generation ended as a ChatFinish
//   (the parser's stop / length / tool calls; Cancelled when the engine cancelled it, EngineFailed
//   when the backend failed under it, ConstraintFailed when the request's grammar allowed no token);
//   each API renders it in its own words.
// - Reasoning budget (set_reasoning_budget): once the reasoning channel holds that many tokens
//   and is still open, forced_tokens() returns the closing ids once ("\n</think>\n\n", as
//   Qwen's template closes it), which the engine appends without sampling. Finished reports the
//   tokens spent in the reasoning channel (reasoning_tokens).
#pragma once

#include "core/engine/generation.h"
#include "core/frontend/output_parser.h"
#include "core/frontend/tokenizer.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ninfer::daemon {

struct TokenLogprob {
    std::string token;
    std::vector<uint8_t> bytes;
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;
};

enum class ChatFinish : uint8_t { Stop, Length, ToolCalls, Cancelled, EngineFailed, ConstraintFailed };
// OpenAI's finish_reason ("stop", "length", "tool_calls"); "cancelled", "engine_failed" and
// "constraint_failed" for logs.
std::string_view finish_reason_name(ChatFinish finish);

struct ChatUpdate {
    enum class Kind : uint8_t { Admitted, Tokens, Finished, Rejected };
    Kind kind = Kind::Tokens;
    std::vector<core::OutputEvent> events;
    std::vector<TokenLogprob> logprobs;
    core::GenerationSummary summary;
    ChatFinish finish = ChatFinish::Stop; // Finished
    core::RejectReason reject_reason = core::RejectReason::Unavailable;
    std::string message;
    uint32_t cached_tokens = 0;
    int lane = -1;                 // Admitted
    uint32_t reasoning_tokens = 0; // Finished
};

class ChatSink final : public core::GenerationSink {
  public:
    using Deliver = std::function<void(ChatUpdate&&)>;
    ChatSink(std::shared_ptr<const core::Tokenizer> tokenizer, core::OutputParserOptions options,
             std::vector<int32_t> stop_token_ids, bool want_logprobs, Deliver deliver);

    void on_admitted(int lane, uint32_t cached_tokens) override;
    core::TokenVerdict on_token(const core::DecodeResult& result) override;
    void on_finished(const core::GenerationSummary& summary) override;
    void on_rejected(core::RejectReason reason, const std::string& message) override;
    std::vector<int32_t> forced_tokens() override;
    void set_reasoning_budget(uint32_t max_tokens, std::vector<int32_t> close_tokens);

  private:
    TokenLogprob logprob_entry(const core::DecodeResult& result) const;

    std::shared_ptr<const core::Tokenizer> tokenizer_;
    core::OutputParser parser_;
    std::vector<int32_t> stop_token_ids_;
    bool want_logprobs_;
    Deliver deliver_;
    std::string pending_bytes_; // an incomplete UTF-8 sequence at the end of the output
    bool ended_by_stop_token_ = false;
    bool reasoning_open_;
    uint32_t reasoning_tokens_ = 0;
    uint32_t reasoning_budget_ = 0; // 0 = none
    std::vector<int32_t> reasoning_close_tokens_;
};

} // namespace ninfer::daemon
