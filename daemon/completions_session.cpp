// ninfer::daemon - /v1/completions: raw prompt parsing, text_completion rendering, handler.
#include "daemon/completions_session.h"

#include "core/util/json_writer.h"
#include "daemon/api_common.h"
#include "daemon/request_json.h"
#include "daemon/routes.h"

#include <algorithm>

namespace ninfer::daemon {
namespace {

using namespace request_json;
using simdjson::dom::element;

void parse_prompt(element prompt, CompletionsRequest& r) {
    if (prompt.is_string()) {
        r.prompt = string_of(prompt, "prompt");
        return;
    }
    if (!prompt.is_array()) fail("prompt", "'prompt' must be a string, [string] or an array of token ids", "");
    size_t n = 0;
    for (element e : prompt.get_array()) {
        ++n;
        if (e.is_string()) {
            if (n > 1) fail("prompt", "only one prompt per request", "");
            r.prompt = string_of(e, "prompt");
        } else {
            int64_t id = integer_of(e, "prompt");
            if (id < 0 || id > INT32_MAX) fail("prompt", "token ids must be non-negative", "");
            r.prompt_ids.push_back(int32_t(id));
        }
    }
    if (!r.prompt_ids.empty() && !r.prompt.empty()) fail("prompt", "mix of text and token ids", "");
    if (n == 0) fail("prompt", "'prompt' must not be empty", "");
}

// Every text-carrying event: completions show the output verbatim, think markup included; a
// matched stop string (also markup) is left out.
std::string text_of(const std::vector<core::OutputEvent>& events, const std::vector<std::string>& stops) {
    using Kind = core::OutputEvent::Kind;
    std::string out;
    for (const core::OutputEvent& e : events) {
        bool stop = e.kind == Kind::Markup && std::find(stops.begin(), stops.end(), e.text) != stops.end();
        if ((e.kind == Kind::ContentDelta || e.kind == Kind::ReasoningDelta || e.kind == Kind::Markup) && !stop)
            out += e.text;
    }
    return out;
}

} // namespace

CompletionsRequest parse_completions_request(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(body);
    simdjson::dom::object b = parse_json_object(parser, padded);
    CompletionsRequest r;
    element e;
    if (!b["model"].get(e) && !e.is_null()) r.chat.model = string_of(e, "model");
    if (b["prompt"].get(e) || e.is_null()) fail("prompt", "'prompt' is required", "");
    parse_prompt(e, r);
    r.chat.max_tokens = 16;
    if (!b["max_tokens"].get(e) && !e.is_null()) r.chat.max_tokens = positive_count(e, "max_tokens");
    if (!b["stream"].get(e) && !e.is_null()) r.chat.stream = bool_of(e, "stream");
    if (!b["stream_options"].get(e) && e.is_object()) {
        element u;
        if (!e["include_usage"].get(u) && !u.is_null()) r.chat.include_usage = bool_of(u, "stream_options.include_usage");
        if (!e["continuous_usage_stats"].get(u) && !u.is_null())
            r.chat.continuous_usage = bool_of(u, "stream_options.continuous_usage_stats");
    }
    if (!b["ignore_eos"].get(e) && !e.is_null()) r.chat.ignore_eos = bool_of(e, "ignore_eos");
    if (!b["echo"].get(e) && !e.is_null()) r.echo = bool_of(e, "echo");
    if (!b["n"].get(e) && !e.is_null() && integer_of(e, "n") != 1) fail("n", "only n = 1 is supported", "n_not_supported");
    if (!b["best_of"].get(e) && !e.is_null() && integer_of(e, "best_of") != 1)
        fail("best_of", "only best_of = 1 is supported", "");
    if (!b["suffix"].get(e) && !e.is_null()) fail("suffix", "'suffix' (fill in the middle) is not supported", "");
    if (!b["stop"].get(e)) parse_stop(e, "stop", r.chat);
    parse_sampling(b, r.chat);
    parse_output_format(b, r.chat); // llama.cpp's json_schema / grammar (and response_format)
    return r;
}

CompletionsSession::CompletionsSession(DaemonContext& ctx, uint64_t id, CompletionsRequest request,
                                       std::shared_ptr<ResponseWriter> writer)
    : ChatSession(ctx, id, std::move(request.chat), std::move(writer)), prompt_(std::move(request.prompt)),
      prompt_ids_(std::move(request.prompt_ids)), echo_(request.echo) {
    meta_.id = random_id("cmpl-", 24);
}

PreparedPrompt CompletionsSession::prepare_prompt() const {
    PreparedPrompt out;
    out.tokens = prompt_ids_.empty() ? frontend_->tokenizer().encode(prompt_) : prompt_ids_;
    for (int32_t id : out.tokens)
        if (size_t(id) >= frontend_->tokenizer().n_ids())
            throw bad_request("token id " + std::to_string(id) + " is not in the vocabulary", "prompt");
    if (out.tokens.empty()) throw bad_request("the prompt is empty", "prompt");
    out.parser_options.starts_in_reasoning = false;
    out.parser_options.stop_strings = request_.stop;
    return out;
}

std::string CompletionsSession::chunk(const std::string& text, const std::string& finish_reason) const {
    core::JsonWriter w;
    w.begin_object().member("id", meta_.id).member("object", "text_completion").member("created", meta_.created);
    w.member("model", meta_.model).key("choices").begin_array().begin_object().member("index", 0);
    w.member("text", text).key("logprobs").null().key("finish_reason");
    finish_reason.empty() ? w.null() : w.value(finish_reason);
    w.end_object().end_array();
    if (request_.include_usage && request_.continuous_usage) {
        core::GenerationSummary so_far; // the tokens delivered up to this chunk
        so_far.prompt_tokens = n_prompt_tokens_;
        so_far.cached_tokens = n_cached_tokens_;
        so_far.completion_tokens = n_generated_tokens_;
        w.key("usage").raw(render_usage(so_far));
    } else if (request_.include_usage) {
        w.key("usage").null();
    }
    w.end_object();
    return w.take();
}

std::string CompletionsSession::prompt_text() const {
    return prompt_ids_.empty() ? prompt_ : frontend_->tokenizer().decode(prompt_ids_);
}

void CompletionsSession::begin_stream() {
    if (echo_) send_sse(chunk(prompt_text(), ""));
}

void CompletionsSession::stream_events(const std::vector<core::OutputEvent>& events) {
    std::string text = text_of(events, request_.stop);
    if (!text.empty()) send_sse(chunk(text, ""));
}

void CompletionsSession::collect_events(const std::vector<core::OutputEvent>& events) { text_ += text_of(events, request_.stop); }

void CompletionsSession::render_finished(const ChatUpdate& u) {
    std::string finish = u.finish == ChatFinish::Length ? "length" : "stop";
    if (streaming_) {
        std::string rest = text_of(u.events, request_.stop);
        send_sse(chunk(rest, finish));
        if (request_.include_usage) {
            core::JsonWriter w;
            w.begin_object().member("id", meta_.id).member("object", "text_completion").member("created", meta_.created);
            w.member("model", meta_.model).key("choices").begin_array().end_array();
            w.key("usage").raw(render_usage(u.summary)).end_object();
            send_sse(w.take());
        }
        send_sse("[DONE]");
        writer_->end();
        return;
    }
    collect_events(u.events);
    core::JsonWriter w;
    w.begin_object().member("id", meta_.id).member("object", "text_completion").member("created", meta_.created);
    w.member("model", meta_.model).key("choices").begin_array().begin_object().member("index", 0);
    w.member("text", echo_ ? prompt_text() + text_ : text_).key("logprobs").null().member("finish_reason", finish);
    w.end_object().end_array().key("usage").raw(render_usage(u.summary)).key("timings").raw(render_timings(u.summary));
    w.end_object();
    writer_->send(200, "application/json", w.take());
}

void handle_completions(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    ++ctx.counters.n_chat_requests_total;
    require_ready(ctx);
    uint64_t id = ctx.next_request_id++;
    writer->add_header("x-request-id", std::to_string(id));
    CompletionsRequest parsed = parse_completions_request(request.body);
    require_model(ctx, parsed.chat.model);
    auto session = std::make_shared<CompletionsSession>(ctx, id, std::move(parsed), std::move(writer));
    session->start();
}

} // namespace ninfer::daemon
