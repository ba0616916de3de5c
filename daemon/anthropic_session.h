// ninfer::daemon - POST /v1/messages: the shared generation session rendered as Anthropic
// Messages (JSON or SSE), plus /v1/messages/count_tokens and the Anthropic error shape.
//
// Contract:
// - AnthropicSession overrides ChatSession's hooks. Streaming: message_start (usage.input_tokens)
//   and one ping when the request is admitted, then per block content_block_start /
//   content_block_delta (thinking_delta, text_delta, input_json_delta) / content_block_stop in
//   output order (thinking, text, tool_use), then message_delta (stop_reason, stop_sequence,
//   usage.output_tokens) and message_stop. Non-streaming: one `message` object with the same
//   blocks. Stop reasons: end_turn, max_tokens, stop_sequence (+ the matched string), tool_use.
// - usage: input_tokens = prompt tokens not read from the cache, cache_read_input_tokens = the
//   cached ones, output_tokens = completion tokens (reasoning and a budget's forced close
//   included).
// - Errors: {"type":"error","error":{"type","message"}}; an ApiError's status maps to the
//   Anthropic type (anthropic_error_type); the engine's queue-full 429 becomes 529
//   overloaded_error, a queue timeout stays 503. After the stream started: `event: error`.
//   The shape has no `param`: a message that does not name the ApiError's param is prefixed
//   with it ("messages[0].content: message without content").
// - Every response on these routes carries `request-id: req_<n>` (set by the handlers).
// Loop thread only.
#pragma once

#include "daemon/api_common.h"
#include "daemon/chat_session.h"

namespace ninfer::daemon {

class AnthropicSession final : public ChatSession, private OutputBlocks::Listener {
  public:
    AnthropicSession(DaemonContext& ctx, uint64_t id, ChatRequest request, std::shared_ptr<ResponseWriter> writer);

  private:
    void begin_stream() override;
    void stream_events(const std::vector<core::OutputEvent>& events) override;
    void collect_events(const std::vector<core::OutputEvent>& events) override;
    void render_finished(const ChatUpdate& update) override;
    void render_error(const ApiError& error) override;

    void block_opened(size_t index, const OutputBlock& block) override;
    void block_delta(size_t index, const OutputBlock& block, std::string_view delta) override;
    void block_closed(size_t index, const OutputBlock& block) override;

    std::string message_id_;
    OutputBlocks blocks_;
};

bool is_anthropic_route(std::string_view path);
std::string_view anthropic_error_type(int status);
// The status Anthropic clients expect for an ApiError (queue full: 529).
int anthropic_status(const ApiError& error);
std::string render_anthropic_error(const ApiError& error);
void respond_anthropic_error(DaemonContext& ctx, ResponseWriter& writer, const ApiError& error);

} // namespace ninfer::daemon
