// ninfer::daemon - POST /v1/responses (create, stream), POST /v1/responses/input_tokens and
// GET/DELETE /v1/responses/{id}: the shared generation session rendered as OpenAI Responses.
//
// Contract:
// - Output items in order: reasoning ({type:reasoning, content:[reasoning_text]}), message
//   ({type:message, content:[output_text]}), function_call ({call_id, name, arguments}), ids
//   rs_/msg_/fc_ + hex. status "completed", or "incomplete" with incomplete_details
//   {reason:"max_output_tokens"} when max_output_tokens ended it. usage: input_tokens
//   (input_tokens_details.cached_tokens), output_tokens (output_tokens_details.reasoning_tokens),
//   total_tokens.
// - Streaming events, each `event: TYPE` + data with type and a growing sequence_number:
//   response.created, response.in_progress; per item output_item.added, then for reasoning and
//   message content_part.added, reasoning_text.delta / output_text.delta*, reasoning_text.done /
//   output_text.done, content_part.done; for a function call function_call_arguments.delta*,
//   function_call_arguments.done; output_item.done; finally response.completed (or
//   response.incomplete). Errors after the stream started: an `error` event.
// - store (default true) keeps the response and its conversation (input + output, instructions
//   excluded) in ctx.response_store; previous_response_id continues that conversation (404
//   previous_response_not_found when it is not there). GET returns the stored object, DELETE
//   removes it ({id, object:"response.deleted", deleted:true}); unknown ids 404.
// - input_tokens takes a create body and answers {object:"response.input_tokens", input_tokens}:
//   the prompt create would prefill (instructions, previous_response_id's conversation, input).
// - x-request-id on every answer of these routes. Loop thread only.
#pragma once

#include "core/util/json_writer.h"
#include "daemon/api_common.h"
#include "daemon/chat_session.h"
#include "daemon/responses_request.h"

#include <functional>

namespace ninfer::daemon {

class ResponsesSession final : public ChatSession, private OutputBlocks::Listener {
  public:
    // `history` is the stored conversation previous_response_id names (empty without one).
    ResponsesSession(DaemonContext& ctx, uint64_t id, ResponsesRequest request,
                     std::vector<core::ChatMessage> history, std::shared_ptr<ResponseWriter> writer);

  private:
    void begin_stream() override;
    void stream_events(const std::vector<core::OutputEvent>& events) override;
    void collect_events(const std::vector<core::OutputEvent>& events) override;
    void render_finished(const ChatUpdate& update) override;
    void render_error(const ApiError& error) override;
    std::string_view api_field(std::string_view chat_field) const override;

    void block_opened(size_t index, const OutputBlock& block) override;
    void block_delta(size_t index, const OutputBlock& block, std::string_view delta) override;
    void block_closed(size_t index, const OutputBlock& block) override;

    std::string render_response(const ChatUpdate* finished) const;
    // One SSE event: {"type","sequence_number", <fields(w) members>}.
    void emit(std::string_view type, const std::function<void(core::JsonWriter&)>& fields);
    void store_result(const std::string& response_json) const;

    ResponsesRequest echo_; // the request's members the response object repeats (chat moved out)
    std::vector<core::ChatMessage> input_; // history + this request's input, for the store
    std::string response_id_;
    int64_t created_at_;
    std::vector<std::string> item_ids_;
    OutputBlocks blocks_;
    uint64_t sequence_ = 0;
};

} // namespace ninfer::daemon
