// ninfer::daemon - OpenAI Responses rendering (response object, output items, SSE events),
// the store, and the /v1/responses handlers.
#include "daemon/responses_session.h"

#include "daemon/responses_store.h"
#include "daemon/routes.h"

#include <ctime>

namespace ninfer::daemon {
namespace {

using BK = OutputBlock::Kind;

std::string_view item_prefix(BK kind) { return kind == BK::Reasoning ? "rs_" : kind == BK::Text ? "msg_" : "fc_"; }

void write_part(core::JsonWriter& w, const OutputBlock& b, bool done) {
    w.begin_object();
    if (b.kind == BK::Reasoning) {
        w.member("type", "reasoning_text").member("text", done ? b.text : "");
    } else {
        w.member("type", "output_text").member("text", done ? b.text : "");
        w.key("annotations").begin_array().end_array().key("logprobs").begin_array().end_array();
    }
    w.end_object();
}

void write_item(core::JsonWriter& w, const OutputBlock& b, const std::string& id, bool done) {
    w.begin_object().member("id", id);
    switch (b.kind) {
    case BK::Reasoning:
        w.member("type", "reasoning").key("summary").begin_array().end_array().key("content").begin_array();
        if (done) write_part(w, b, true);
        w.end_array();
        break;
    case BK::Text:
        w.member("type", "message").member("status", done ? "completed" : "in_progress").member("role", "assistant");
        w.key("content").begin_array();
        if (done) write_part(w, b, true);
        w.end_array();
        break;
    case BK::ToolCall:
        w.member("type", "function_call").member("status", done ? "completed" : "in_progress");
        w.member("call_id", b.call_id).member("name", b.name).member("arguments", done ? b.text : "");
        break;
    }
    w.end_object();
}

ResponseStore& store_of(DaemonContext& ctx) {
    if (!ctx.response_store) ctx.response_store = std::make_shared<ResponseStore>();
    return *ctx.response_store;
}

std::string id_from_path(const HttpRequest& request) {
    return request.path.substr(std::string_view("/v1/responses/").size());
}

ApiError response_not_found(const std::string& id, const char* param) {
    return {404, "no stored response with id '" + id + "'", param[0] ? "previous_response_not_found" : "not_found",
            param, ""};
}

// What the model sees: the earlier turns, then this request's input, the instructions (if any) first.
std::vector<core::ChatMessage> with_instructions(std::vector<core::ChatMessage> messages, const std::string& instructions) {
    if (!instructions.empty()) messages.insert(messages.begin(), core::ChatMessage::text(core::ChatRole::System, instructions));
    return messages;
}

// The stored conversation previous_response_id names (none when empty), else 404.
std::vector<core::ChatMessage> history_of(DaemonContext& ctx, const std::string& previous_response_id) {
    if (previous_response_id.empty()) return {};
    const StoredResponse* previous = store_of(ctx).get(previous_response_id);
    if (!previous) throw response_not_found(previous_response_id, "previous_response_id");
    return previous->conversation;
}

} // namespace

ResponsesSession::ResponsesSession(DaemonContext& ctx, uint64_t id, ResponsesRequest request,
                                   std::vector<core::ChatMessage> history, std::shared_ptr<ResponseWriter> writer)
    : ChatSession(ctx, id, std::move(request.chat), std::move(writer)), echo_(std::move(request)),
      input_(std::move(history)), response_id_(random_id("resp_", 32)), created_at_(int64_t(std::time(nullptr))) {
    std::vector<core::ChatMessage>& messages = request_.conversation.messages;
    input_.insert(input_.end(), messages.begin(), messages.end());
    messages = with_instructions(input_, echo_.instructions);
}

std::string ResponsesSession::render_response(const ChatUpdate* u) const {
    bool incomplete = u && u->finish == ChatFinish::Length;
    core::JsonWriter w;
    w.begin_object().member("id", response_id_).member("object", "response").member("created_at", created_at_);
    w.member("status", !u ? "in_progress" : incomplete ? "incomplete" : "completed");
    w.member("background", false).key("error").null().key("incomplete_details");
    incomplete ? (void)w.begin_object().member("reason", "max_output_tokens").end_object() : (void)w.null();
    w.key("instructions");
    echo_.instructions.empty() ? w.null() : w.value(echo_.instructions);
    w.key("max_output_tokens");
    request_.max_tokens ? w.value(uint64_t(*request_.max_tokens)) : w.null();
    w.member("model", meta_.model).key("output").begin_array();
    if (u)
        for (size_t i = 0; i < blocks_.blocks().size(); ++i) write_item(w, blocks_.blocks()[i], item_ids_[i], true);
    w.end_array().member("parallel_tool_calls", true).key("previous_response_id");
    echo_.previous_response_id.empty() ? w.null() : w.value(echo_.previous_response_id);
    w.key("reasoning").begin_object().key("effort");
    echo_.reasoning_effort.empty() ? w.null() : w.value(echo_.reasoning_effort);
    w.key("summary").null().end_object();
    w.member("store", echo_.store).member("temperature", double(request_.sampling.temperature));
    w.key("text").raw(R"({"format":{"type":"text"}})").key("tool_choice").raw(echo_.tool_choice_json);
    w.key("tools").raw(echo_.tools_json).member("top_p", double(request_.sampling.top_p));
    w.member("truncation", "disabled").key("usage");
    if (u) {
        const core::GenerationSummary& s = u->summary;
        w.begin_object().member("input_tokens", uint64_t(s.prompt_tokens));
        w.key("input_tokens_details").begin_object().member("cached_tokens", uint64_t(s.cached_tokens)).end_object();
        w.member("output_tokens", uint64_t(s.completion_tokens));
        w.key("output_tokens_details").begin_object().member("reasoning_tokens", uint64_t(u->reasoning_tokens));
        w.end_object().member("total_tokens", uint64_t(s.prompt_tokens) + s.completion_tokens).end_object();
    } else {
        w.null();
    }
    w.key("user").null().key("metadata").raw(echo_.metadata_json).end_object();
    return w.take();
}

void ResponsesSession::emit(std::string_view type, const std::function<void(core::JsonWriter&)>& fields) {
    core::JsonWriter w;
    w.begin_object().member("type", type).member("sequence_number", sequence_++);
    fields(w);
    w.end_object();
    write_sse_event(*writer_, type, w.take());
}

void ResponsesSession::begin_stream() {
    std::string response = render_response(nullptr);
    emit("response.created", [&](core::JsonWriter& w) { w.key("response").raw(response); });
    emit("response.in_progress", [&](core::JsonWriter& w) { w.key("response").raw(response); });
}

void ResponsesSession::stream_events(const std::vector<core::OutputEvent>& events) { blocks_.feed(events, this); }

void ResponsesSession::collect_events(const std::vector<core::OutputEvent>& events) { blocks_.feed(events, this); }

void ResponsesSession::block_opened(size_t index, const OutputBlock& b) {
    item_ids_.push_back(random_id(item_prefix(b.kind), 24));
    if (!streaming_) return;
    const std::string& id = item_ids_.back();
    emit("response.output_item.added", [&](core::JsonWriter& w) {
        w.member("output_index", uint64_t(index)).key("item");
        write_item(w, b, id, false);
    });
    if (b.kind == BK::ToolCall) return;
    emit("response.content_part.added", [&](core::JsonWriter& w) {
        w.member("item_id", id).member("output_index", uint64_t(index)).member("content_index", 0).key("part");
        write_part(w, b, false);
    });
}

void ResponsesSession::block_delta(size_t index, const OutputBlock& b, std::string_view delta) {
    if (!streaming_) return;
    const std::string& id = item_ids_[index];
    std::string_view type = b.kind == BK::Reasoning ? "response.reasoning_text.delta"
                            : b.kind == BK::Text    ? "response.output_text.delta"
                                                    : "response.function_call_arguments.delta";
    emit(type, [&](core::JsonWriter& w) {
        w.member("item_id", id).member("output_index", uint64_t(index));
        if (b.kind != BK::ToolCall) w.member("content_index", 0);
        w.member("delta", delta);
        if (b.kind == BK::Text) w.key("logprobs").begin_array().end_array();
    });
}

void ResponsesSession::block_closed(size_t index, const OutputBlock& b) {
    if (!streaming_) return;
    const std::string& id = item_ids_[index];
    auto common = [&](core::JsonWriter& w) { w.member("item_id", id).member("output_index", uint64_t(index)); };
    if (b.kind == BK::ToolCall) {
        emit("response.function_call_arguments.done", [&](core::JsonWriter& w) {
            common(w);
            w.member("name", b.name).member("arguments", b.text);
        });
    } else {
        bool text = b.kind == BK::Text;
        emit(text ? "response.output_text.done" : "response.reasoning_text.done", [&](core::JsonWriter& w) {
            common(w);
            w.member("content_index", 0).member("text", b.text);
            if (text) w.key("logprobs").begin_array().end_array();
        });
        emit("response.content_part.done", [&](core::JsonWriter& w) {
            common(w);
            w.member("content_index", 0).key("part");
            write_part(w, b, true);
        });
    }
    emit("response.output_item.done", [&](core::JsonWriter& w) {
        w.member("output_index", uint64_t(index)).key("item");
        write_item(w, b, id, true);
    });
}

void ResponsesSession::store_result(const std::string& response_json) const {
    StoredResponse record{response_json, input_};
    core::ChatMessage out;
    out.role = core::ChatRole::Assistant;
    for (const OutputBlock& b : blocks_.blocks()) {
        if (b.kind == BK::Reasoning) out.reasoning_content = out.reasoning_content.value_or("") + b.text;
        else if (b.kind == BK::Text) out.content.push_back(core::ContentPart::of_text(b.text));
        else out.tool_calls.push_back({b.call_id, b.name, b.text.empty() ? "{}" : b.text});
    }
    record.conversation.push_back(std::move(out));
    store_of(ctx_).put(response_id_, std::move(record));
}

void ResponsesSession::render_finished(const ChatUpdate& u) {
    blocks_.feed(u.events, this);
    blocks_.close(this);
    std::string response = render_response(&u);
    if (echo_.store) store_result(response);
    if (!streaming_) {
        writer_->send(200, "application/json", response);
        return;
    }
    emit(u.finish == ChatFinish::Length ? "response.incomplete" : "response.completed",
         [&](core::JsonWriter& w) { w.key("response").raw(response); });
    writer_->end();
}

std::string_view ResponsesSession::api_field(std::string_view chat_field) const {
    if (chat_field == "messages") return "input";
    return chat_field == "max_tokens" ? "max_output_tokens" : chat_field;
}

void ResponsesSession::render_error(const ApiError& error) {
    if (!streaming_) return respond_error(ctx_, *writer_, error);
    emit("error", [&](core::JsonWriter& w) {
        w.member("code", error.code.empty() ? status_type(error.status) : std::string_view(error.code));
        w.member("message", error.message).key("param");
        error.param.empty() ? w.null() : w.value(error.param);
    });
    writer_->end();
}

void handle_responses_create(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    ++ctx.counters.n_chat_requests_total;
    require_ready(ctx);
    uint64_t id = ctx.next_request_id++;
    writer->add_header("x-request-id", std::to_string(id));
    ResponsesRequest parsed = parse_responses_request(request.body);
    require_model(ctx, parsed.chat.model);
    std::vector<core::ChatMessage> history = history_of(ctx, parsed.previous_response_id);
    auto session = std::make_shared<ResponsesSession>(ctx, id, std::move(parsed), std::move(history), std::move(writer));
    session->start();
}

void handle_responses_input_tokens(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    require_ready(ctx);
    writer->add_header("x-request-id", std::to_string(ctx.next_request_id++));
    ResponsesRequest parsed = parse_responses_request(request.body);
    require_model(ctx, parsed.chat.model);
    std::vector<core::ChatMessage> messages = history_of(ctx, parsed.previous_response_id);
    const std::vector<core::ChatMessage>& input = parsed.chat.conversation.messages;
    messages.insert(messages.end(), input.begin(), input.end());
    parsed.chat.conversation.messages = with_instructions(std::move(messages), parsed.instructions);
    respond_prompt_tokens(ctx, std::move(writer), std::make_shared<const ChatRequest>(std::move(parsed.chat)), false,
                          [](size_t n) {
                              return "{\"object\":\"response.input_tokens\",\"input_tokens\":" + std::to_string(n) + "}";
                          });
}

void handle_responses_get(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    writer->add_header("x-request-id", std::to_string(ctx.next_request_id++));
    std::string id = id_from_path(request);
    const StoredResponse* stored = store_of(ctx).get(id);
    if (!stored) throw response_not_found(id, "");
    writer->send(200, "application/json", stored->response_json);
}

void handle_responses_delete(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    writer->add_header("x-request-id", std::to_string(ctx.next_request_id++));
    std::string id = id_from_path(request);
    if (!store_of(ctx).erase(id)) throw response_not_found(id, "");
    core::JsonWriter w;
    w.begin_object().member("id", id).member("object", "response.deleted").member("deleted", true).end_object();
    writer->send(200, "application/json", w.take());
}

} // namespace ninfer::daemon
