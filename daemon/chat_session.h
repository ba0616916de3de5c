// ninfer::daemon - one /v1/chat/completions request on the loop thread, from parsed body to the
// last byte: prepare (template + tokenize on the libuv thread pool), submit to the engine, turn
// ChatUpdates into SSE chunks or one JSON body.
//
// Contract:
// - start() registers the session in ctx.sessions and queues the prompt preparation (and the
//   compilation of the grammar a constrained reply follows: output_constraint.h; a bad schema or
//   grammar is a 400 naming the member, before anything reaches the engine). The engine
//   reports every submitted request's end exactly once (Finished or Rejected); the session then
//   removes itself and calls ctx.on_session_end.
// - max_tokens: explicit values that do not fit max_context - prompt are 400
//   context_length_exceeded; absent means min(default-max-tokens, max_context - prompt).
// - Streaming starts (HTTP 200, text/event-stream) when the engine admits the request, so queue
//   rejections keep real statuses: QueueFull 429 server_overloaded, QueueTimeout 503
//   request_queue_timeout, ContextExceeded 400, Unavailable 503. Errors after the stream started
//   go in-band as `data: {"error":...}` before `data: [DONE]`.
// - A peer that disconnects (or stalls with > 16 MiB unsent) cancels the request in the engine,
//   which frees its lane within one step.
// - The lifecycle is shared by every generation API: the virtual hooks (prepare_prompt,
//   begin_stream, stream_events, collect_events, render_finished, render_error) render OpenAI
//   Chat Completions here; the Responses, Anthropic Messages and completions sessions override
//   them. Errors name chat fields ("messages", "max_tokens"); api_field maps them to the
//   request field of the session's own API ("input", "max_output_tokens", "prompt").
#pragma once

#include "daemon/api_error.h"
#include "daemon/chat_render.h"
#include "daemon/chat_request.h"
#include "daemon/daemon_context.h"
#include "daemon/http_server.h"

#include <chrono>
#include <memory>

namespace ninfer::daemon {

class ChatSession : public std::enable_shared_from_this<ChatSession> {
  public:
    ChatSession(DaemonContext& ctx, uint64_t id, ChatRequest request, std::shared_ptr<ResponseWriter> writer);
    virtual ~ChatSession() = default;
    void start();
    void deliver(ChatUpdate&& update); // loop thread
    // Read-only view for /slots: the lane (-1 while queued), prompt and generated token counts.
    int lane() const { return lane_; }
    uint64_t id() const { return id_; }
    uint32_t n_prompt_tokens() const { return n_prompt_tokens_; }
    uint32_t n_generated_tokens() const { return n_generated_tokens_; }

  protected:
    virtual PreparedPrompt prepare_prompt() const; // libuv pool thread
    virtual void begin_stream();                   // the 200 SSE header was just sent
    virtual void stream_events(const std::vector<core::OutputEvent>& events);
    virtual void collect_events(const std::vector<core::OutputEvent>& events); // not streaming
    virtual void render_finished(const ChatUpdate& update);
    virtual void render_error(const ApiError& error); // before or after the stream started
    virtual std::string_view api_field(std::string_view chat_field) const { return chat_field; }

    static void work_cb(uv_work_t* work);
    static void after_work_cb(uv_work_t* work, int status);
    void submit();
    void fail(const ApiError& error);
    void on_peer_closed();
    void send_sse(const std::string& json);
    void finish(const ChatUpdate& update);
    void end_session();

    DaemonContext& ctx_;
    uint64_t id_;
    ChatRequest request_;
    std::shared_ptr<ResponseWriter> writer_;
    std::shared_ptr<ModelFrontend> frontend_;
    CompletionMeta meta_;
    ChatResult result_;
    std::vector<TokenLogprob> pending_logprobs_; // streamed with the next chunk
    PreparedPrompt prepared_;
    std::optional<ApiError> prepare_error_;
    std::shared_ptr<core::grammar::GrammarCache> grammar_cache_; // for the pool thread
    std::optional<core::ConstraintSpec> constraint_;            // compiled with the prompt
    uv_work_t work_{};
    std::shared_ptr<ChatSession> keep_alive_; // holds the session while the pool works
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    bool submitted_ = false;
    bool streaming_ = false;
    bool peer_gone_ = false;
    bool ended_ = false;
    bool first_token_seen_ = false;
    std::chrono::steady_clock::time_point last_token_at_; // the inter-token latency histogram's
    int lane_ = -1;
    uint32_t n_prompt_tokens_ = 0;
    uint32_t n_cached_tokens_ = 0; // of the prompt, known once admitted
    uint32_t n_generated_tokens_ = 0;
};

void respond_error(DaemonContext& ctx, ResponseWriter& writer, const ApiError& error);

} // namespace ninfer::daemon
