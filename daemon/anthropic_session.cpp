// ninfer::daemon - Anthropic Messages rendering (message, SSE events, errors) and its handlers.
#include "daemon/anthropic_session.h"

#include "core/frontend/unicode_utf8.h"
#include "core/util/json_writer.h"
#include "daemon/anthropic_request.h"
#include "daemon/routes.h"

namespace ninfer::daemon {
namespace {

void write_usage(core::JsonWriter& w, const core::GenerationSummary& s, bool with_output) {
    w.begin_object().member("input_tokens", uint64_t(s.prompt_tokens - s.cached_tokens));
    w.member("cache_creation_input_tokens", 0).member("cache_read_input_tokens", uint64_t(s.cached_tokens));
    if (with_output) w.member("output_tokens", uint64_t(s.completion_tokens));
    w.end_object();
}

void write_block(core::JsonWriter& w, const OutputBlock& b, bool empty) {
    w.begin_object();
    switch (b.kind) {
    case OutputBlock::Kind::Reasoning:
        w.member("type", "thinking").member("thinking", empty ? "" : b.text).member("signature", "");
        break;
    case OutputBlock::Kind::Text:
        w.member("type", "text").member("text", empty ? "" : b.text);
        break;
    case OutputBlock::Kind::ToolCall:
        w.member("type", "tool_use").member("id", b.call_id).member("name", b.name).key("input");
        w.raw(empty || b.text.empty() ? "{}" : b.text);
        break;
    }
    w.end_object();
}

struct StopInfo {
    std::string reason;
    std::string sequence; // stop_sequence only
};

StopInfo stop_info(const ChatUpdate& u) {
    if (u.finish == ChatFinish::ToolCalls) return {"tool_use", ""};
    if (u.finish == ChatFinish::Length) return {"max_tokens", ""};
    for (const core::OutputEvent& e : u.events)
        if (e.kind == core::OutputEvent::Kind::Finish && !e.stop_string.empty()) return {"stop_sequence", e.stop_string};
    return {"end_turn", ""};
}

std::string request_id_of(uint64_t id) { return "req_" + std::to_string(id); }

} // namespace

bool is_anthropic_route(std::string_view path) { return path.rfind("/v1/messages", 0) == 0; }

std::string_view anthropic_error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

int anthropic_status(const ApiError& e) { return e.code == "server_overloaded" ? 529 : e.status; }

std::string render_anthropic_error(const ApiError& e) {
    core::JsonWriter w;
    w.begin_object().member("type", "error").key("error").begin_object();
    // Anthropic's error object has no param: the message names the field itself.
    bool names_param = e.param.empty() || e.message.find(e.param) != std::string::npos;
    // Messages may echo client bytes (a path): invalid UTF-8 would make the writer throw (a 500).
    w.member("type", anthropic_error_type(anthropic_status(e)))
        .member("message", core::utf8_lossy(names_param ? e.message : e.param + ": " + e.message));
    w.end_object().end_object();
    return w.take();
}

void respond_anthropic_error(DaemonContext& ctx, ResponseWriter& writer, const ApiError& error) {
    int status = anthropic_status(error);
    writer.send(status, "application/json", render_anthropic_error(error));
}

AnthropicSession::AnthropicSession(DaemonContext& ctx, uint64_t id, ChatRequest request,
                                   std::shared_ptr<ResponseWriter> writer)
    : ChatSession(ctx, id, std::move(request), std::move(writer)), message_id_(random_id("msg_", 24)) {}

void AnthropicSession::begin_stream() {
    core::JsonWriter w;
    w.begin_object().member("type", "message_start").key("message").begin_object();
    w.member("id", message_id_).member("type", "message").member("role", "assistant").member("model", meta_.model);
    w.key("content").begin_array().end_array();
    w.key("stop_reason").null().key("stop_sequence").null();
    core::GenerationSummary s;
    s.prompt_tokens = n_prompt_tokens_;
    s.cached_tokens = n_cached_tokens_;
    w.key("usage");
    write_usage(w, s, true);
    w.end_object().end_object();
    write_sse_event(*writer_, "message_start", w.take());
    write_sse_event(*writer_, "ping", R"({"type":"ping"})");
}

void AnthropicSession::stream_events(const std::vector<core::OutputEvent>& events) { blocks_.feed(events, this); }

void AnthropicSession::collect_events(const std::vector<core::OutputEvent>& events) { blocks_.feed(events, nullptr); }

void AnthropicSession::block_opened(size_t index, const OutputBlock& block) {
    core::JsonWriter w;
    w.begin_object().member("type", "content_block_start").member("index", uint64_t(index)).key("content_block");
    write_block(w, block, true);
    w.end_object();
    write_sse_event(*writer_, "content_block_start", w.take());
}

void AnthropicSession::block_delta(size_t index, const OutputBlock& block, std::string_view delta) {
    core::JsonWriter w;
    w.begin_object().member("type", "content_block_delta").member("index", uint64_t(index)).key("delta").begin_object();
    switch (block.kind) {
    case OutputBlock::Kind::Reasoning: w.member("type", "thinking_delta").member("thinking", delta); break;
    case OutputBlock::Kind::Text: w.member("type", "text_delta").member("text", delta); break;
    case OutputBlock::Kind::ToolCall: w.member("type", "input_json_delta").member("partial_json", delta); break;
    }
    w.end_object().end_object();
    write_sse_event(*writer_, "content_block_delta", w.take());
}

void AnthropicSession::block_closed(size_t index, const OutputBlock&) {
    core::JsonWriter w;
    w.begin_object().member("type", "content_block_stop").member("index", uint64_t(index)).end_object();
    write_sse_event(*writer_, "content_block_stop", w.take());
}

void AnthropicSession::render_finished(const ChatUpdate& u) {
    StopInfo stop = stop_info(u);
    core::JsonWriter w;
    if (streaming_) {
        blocks_.feed(u.events, this);
        blocks_.close(this);
        w.begin_object().member("type", "message_delta").key("delta").begin_object();
        w.member("stop_reason", stop.reason).key("stop_sequence");
        stop.sequence.empty() ? w.null() : w.value(stop.sequence);
        w.end_object().key("usage");
        write_usage(w, u.summary, true);
        w.end_object();
        write_sse_event(*writer_, "message_delta", w.take());
        write_sse_event(*writer_, "message_stop", R"({"type":"message_stop"})");
        writer_->end();
        return;
    }
    blocks_.feed(u.events, nullptr);
    blocks_.close(nullptr);
    w.begin_object().member("id", message_id_).member("type", "message").member("role", "assistant");
    w.member("model", meta_.model).key("content").begin_array();
    for (const OutputBlock& b : blocks_.blocks()) write_block(w, b, false);
    w.end_array().member("stop_reason", stop.reason).key("stop_sequence");
    stop.sequence.empty() ? w.null() : w.value(stop.sequence);
    w.key("usage");
    write_usage(w, u.summary, true);
    w.end_object();
    writer_->send(200, "application/json", w.take());
}

void AnthropicSession::render_error(const ApiError& error) {
    if (!streaming_) return respond_anthropic_error(ctx_, *writer_, error);
    write_sse_event(*writer_, "error", render_anthropic_error(error));
    writer_->end();
}

void handle_messages(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    ++ctx.counters.n_chat_requests_total;
    require_ready(ctx);
    uint64_t id = ctx.next_request_id++;
    writer->add_header("request-id", request_id_of(id));
    ChatRequest chat = parse_anthropic_request(request.body, false);
    auto session = std::make_shared<AnthropicSession>(ctx, id, std::move(chat), std::move(writer));
    session->start();
}

void handle_count_tokens(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    require_ready(ctx);
    writer->add_header("request-id", request_id_of(ctx.next_request_id++));
    auto chat = std::make_shared<const ChatRequest>(parse_anthropic_request(request.body, true));
    respond_prompt_tokens(ctx, std::move(writer), std::move(chat), true,
                          [](size_t n) { return "{\"input_tokens\":" + std::to_string(n) + "}"; });
}

} // namespace ninfer::daemon
