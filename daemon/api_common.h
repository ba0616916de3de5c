// ninfer::daemon - pieces the Responses, Anthropic Messages and completions APIs share: output
// events grouped into ordered blocks, named SSE events, ids, and CPU work off the loop thread.
//
// Contract:
// - OutputBlocks turns the output parser's events into ordered blocks (reasoning, text, tool
//   call) and tells a listener when one opens, grows and closes, so each API renders its own
//   events (Anthropic content_block_*, Responses output_item/content_part) from one state
//   machine. A new block kind closes the open one; whitespace-only text before any other text is
//   held back and dropped if a tool call or the end follows (Qwen writes "\n\n" before
//   <tool_call>). Markup and Finish events are not text. blocks() is the result so far.
// - write_sse_event writes `event: NAME\ndata: JSON\n\n` as one chunk.
// - random_id(prefix, n) = prefix + n lowercase hex digits.
// - run_off_loop(loop, work, done): work() on the libuv thread pool, then done() on the loop
//   thread; an exception from work() reaches done as an ApiError (400 unless it is one).
// - respond_prompt_tokens(ctx, writer, chat, anthropic, body_of): renders and tokenizes chat's
//   prompt off the loop (template + tokenizer, no engine work), then sends 200 application/json
//   body_of(n_tokens), or the error in the route's shape (Anthropic's when `anthropic`).
// - require_ready(ctx) throws 503 model_not_ready unless the engine is Ready; require_model(ctx,
//   model) throws 404 model_not_found when a model is named and is not the served one.
// Thread safety: OutputBlocks belongs to one session (loop thread).
#pragma once

#include "core/frontend/output_parser.h"
#include "daemon/api_error.h"
#include "daemon/chat_request.h"
#include "daemon/daemon_context.h"
#include "daemon/http_server.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <uv.h>

namespace ninfer::daemon {

struct OutputBlock {
    enum class Kind : uint8_t { Reasoning, Text, ToolCall };
    Kind kind = Kind::Text;
    std::string text;    // reasoning or text so far; a tool call's arguments JSON so far
    std::string call_id; // ToolCall
    std::string name;    // ToolCall
};

class OutputBlocks {
  public:
    struct Listener {
        virtual ~Listener() = default;
        virtual void block_opened(size_t index, const OutputBlock& block) = 0;
        virtual void block_delta(size_t index, const OutputBlock& block, std::string_view delta) = 0;
        virtual void block_closed(size_t index, const OutputBlock& block) = 0;
    };
    void feed(const std::vector<core::OutputEvent>& events, Listener* listener);
    void close(Listener* listener); // closes the open block (end of output)
    const std::vector<OutputBlock>& blocks() const { return blocks_; }
    bool has_tool_calls() const;

  private:
    void open(OutputBlock block, Listener* listener);
    void append(std::string_view delta, Listener* listener);
    std::vector<OutputBlock> blocks_;
    bool open_ = false;
    std::string held_whitespace_;
};

void write_sse_event(ResponseWriter& writer, std::string_view event, const std::string& json);
std::string random_id(std::string_view prefix, size_t n_hex);

void require_ready(const DaemonContext& ctx);
void require_model(const DaemonContext& ctx, const std::string& model);
void run_off_loop(uv_loop_t* loop, std::function<void()> work, std::function<void(std::optional<ApiError>)> done);
void respond_prompt_tokens(DaemonContext& ctx, std::shared_ptr<ResponseWriter> writer, std::shared_ptr<const ChatRequest> chat,
                           bool anthropic, std::function<std::string(size_t)> body_of);

} // namespace ninfer::daemon
