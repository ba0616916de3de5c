// ninfer::daemon - chat session: prepare off-loop, submit, stream or collect, finish, cancel.
#include "daemon/chat_session.h"

#include "core/util/json_writer.h"
#include "daemon/journal.h"
#include "daemon/log.h"
#include "daemon/output_constraint.h"

#include <ctime>
#include <random>

namespace ninfer::daemon {
namespace {

constexpr size_t kMaxUnsentBytes = 16u << 20;

std::string completion_id() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[32];
    std::snprintf(buf, sizeof buf, "chatcmpl-%016llx", static_cast<unsigned long long>(rng()));
    return buf;
}

ApiError rejection_error(core::RejectReason reason, const std::string& message) {
    switch (reason) {
    case core::RejectReason::QueueFull: return {429, message, "server_overloaded", "", ""};
    case core::RejectReason::QueueTimeout: return {503, message, "request_queue_timeout", "", ""};
    case core::RejectReason::ContextExceeded: return {400, message, "context_length_exceeded", "messages", ""};
    case core::RejectReason::Unsupported: return {501, message, "vision_not_supported", "messages", ""};
    case core::RejectReason::Unavailable: break;
    }
    return api_error_of({Errc::Unavailable, message});
}

std::string delta_text(const char* field, const std::string& text) {
    core::JsonWriter w;
    w.begin_object().member(field, text).end_object();
    return w.take();
}

} // namespace

void respond_error(DaemonContext& ctx, ResponseWriter& writer, const ApiError& error) {
    writer.send(error.status, "application/json", render_openai_error(error));
}

ChatSession::ChatSession(DaemonContext& ctx, uint64_t id, ChatRequest request, std::shared_ptr<ResponseWriter> writer)
    : ctx_(ctx), id_(id), request_(std::move(request)), writer_(std::move(writer)), frontend_(ctx.frontend) {
    meta_.id = completion_id();
    meta_.created = int64_t(std::time(nullptr));
    meta_.model = ctx.model_id;
    meta_.usage_null_in_chunks = request_.stream && request_.include_usage;
    // The fields the request left out: the server's options, then the model's generation_config.json.
    auto bias = std::move(request_.sampling.logit_bias);
    request_.sampling = core::resolve_sampling(frontend_->sampling_defaults(), ctx.config.sampling, request_.sampling_given);
    request_.sampling.logit_bias = std::move(bias);
    request_.has_seed = request_.has_seed || ctx.config.sampling.seed || frontend_->sampling_defaults().seed;
    if (!request_.has_seed) request_.sampling.seed = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
}

void ChatSession::start() {
    ctx_.sessions[id_] = shared_from_this();
    if (!request_.ignored_tools.empty()) {
        std::string names;
        for (const std::string& name : request_.ignored_tools) names += (names.empty() ? "" : ", ") + name;
        writer_->add_header("x-ninfer-ignored-tools", names);
        log_write(LogLevel::Info, "request " + std::to_string(id_) + ": ignored tools the model cannot call: " + names, id_);
    }
    std::weak_ptr<ChatSession> weak = shared_from_this();
    writer_->on_close([weak] {
        if (auto self = weak.lock()) self->on_peer_closed();
    });
    if (!ctx_.grammar_cache)
        ctx_.grammar_cache = std::make_shared<core::grammar::GrammarCache>(ctx_.config.grammar_cache_entries);
    grammar_cache_ = ctx_.grammar_cache;
    keep_alive_ = shared_from_this();
    work_.data = this;
    uv_queue_work(ctx_.loop, &work_, work_cb, after_work_cb);
}

void ChatSession::work_cb(uv_work_t* work) {
    auto* self = static_cast<ChatSession*>(work->data);
    try {
        self->prepared_ = self->prepare_prompt();
        self->constraint_ = compile_output_constraint(self->request_, *self->frontend_, *self->grammar_cache_,
                                                      self->prepared_.parser_options.starts_in_reasoning);
    } catch (const ApiError& e) {
        self->prepare_error_ = e;
    } catch (const std::exception& e) {
        ErrorInfo error = error_info(e);
        error.message = "cannot prepare the prompt: " + error.message;
        self->prepare_error_ = api_error_of(error, "messages");
    }
}

PreparedPrompt ChatSession::prepare_prompt() const { return frontend_->prepare(request_, ctx_.config.enable_thinking); }

void ChatSession::after_work_cb(uv_work_t* work, int) {
    auto* self = static_cast<ChatSession*>(work->data);
    std::shared_ptr<ChatSession> hold = std::move(self->keep_alive_);
    if (self->peer_gone_) return self->end_session();
    if (self->prepare_error_) return self->fail(*self->prepare_error_);
    self->submit();
}

void ChatSession::submit() {
    uint32_t max_context = ctx_.config.max_context;
    size_t n_prompt = prepared_.tokens.size();
    // Anthropic's wording, which Claude Code parses to learn the limit and compact; "maximum
    // context length" is what OpenAI-compatible clients look for beside the code.
    if (n_prompt >= max_context)
        return fail({400, "prompt is too long: " + std::to_string(n_prompt) + " tokens > " +
                              std::to_string(max_context) + " maximum (the server's maximum context length, --max-context)",
                     "context_length_exceeded", "messages", ""});
    uint32_t room = max_context - uint32_t(n_prompt);
    // llama.cpp's behaviour: a max_tokens beyond what is left is shortened to fit (the reply ends
    // with the length finish); vLLM and --strict-max-tokens reject it.
    if (request_.max_tokens && *request_.max_tokens > room && !ctx_.config.strict_max_tokens)
        request_.max_tokens = room;
    if (request_.max_tokens && *request_.max_tokens > room)
        return fail({400, "max_tokens " + std::to_string(*request_.max_tokens) + " + prompt " + std::to_string(n_prompt) +
                              " tokens exceeds the context of " + std::to_string(max_context) + " tokens",
                     "context_length_exceeded", "max_tokens", ""});
    if (request_.speculative) { // a request may lower the server's speculation, never raise it
        const core::SpeculativeConfig server = core::parse_speculative(ctx_.config.speculative), want = *request_.speculative;
        if (want.on() && (!server.on() || want.k > server.k ||
                          (want.kind == core::SpeculativeKind::Mtp && server.kind != core::SpeculativeKind::Mtp)))
            return fail({400, "speculative " + core::speculative_name(want) + " is more than this server's " +
                                  core::speculative_name(server) + " (ninferd --speculative); a request may only lower it",
                         "invalid_value", "speculative", ""});
    }
    n_prompt_tokens_ = uint32_t(n_prompt);
    core::GenerationRequest g;
    g.id = id_;
    g.prompt = std::move(prepared_.tokens);
    g.sampling = request_.sampling;
    g.max_tokens = request_.max_tokens.value_or(std::min(ctx_.config.default_max_tokens, room));
    if (!request_.ignore_eos) g.stop_token_ids = frontend_->stop_token_ids();
    g.n_top_logprobs = request_.logprobs ? request_.top_logprobs : 0;
    g.logprobs = request_.logprobs;
    g.speculative = request_.speculative;
    g.media = std::move(prepared_.media);
    g.media_spans = std::move(prepared_.media_spans);
    g.constraint = std::move(constraint_);
    LoopBridge* bridge = ctx_.bridge;
    DaemonContext* ctx = &ctx_;
    uint64_t id = id_;
    auto deliver = [bridge, ctx, id](ChatUpdate&& u) {
        bridge->post([ctx, id, u = std::move(u)]() mutable {
            auto it = ctx->sessions.find(id);
            if (it != ctx->sessions.end()) it->second->deliver(std::move(u));
        });
    };
    std::shared_ptr<const core::Tokenizer> tokenizer(frontend_, &frontend_->tokenizer());
    auto sink = std::make_shared<ChatSink>(tokenizer, std::move(prepared_.parser_options), g.stop_token_ids,
                                           request_.logprobs, deliver);
    if (prepared_.reasoning_budget)
        sink->set_reasoning_budget(prepared_.reasoning_budget, std::move(prepared_.reasoning_close_tokens));
    g.sink = std::move(sink);
    submitted_ = true;
    ctx_.engine->submit(std::move(g));
}

void ChatSession::fail(const ApiError& error) {
    ApiError named = error;
    named.param = api_field(error.param);
    render_error(named);
    if (!submitted_) end_session();
}

void ChatSession::render_error(const ApiError& error) {
    if (streaming_) {
        send_sse(render_openai_error(error));
        send_sse("[DONE]");
        writer_->end();
    } else {
        respond_error(ctx_, *writer_, error);
    }
}

void ChatSession::begin_stream() { send_sse(render_chunk(meta_, R"({"role":"assistant","content":""})", "", nullptr)); }

void ChatSession::on_peer_closed() {
    if (peer_gone_ || ended_) return;
    peer_gone_ = true;
    ++ctx_.counters.n_client_disconnects_total;
    if (submitted_) ctx_.engine->cancel(id_);
}

void ChatSession::send_sse(const std::string& json) { writer_->write("data: " + json + "\n\n"); }

void ChatSession::stream_events(const std::vector<core::OutputEvent>& events) {
    using Kind = core::OutputEvent::Kind;
    for (const core::OutputEvent& e : events) {
        std::string delta;
        if (e.kind == Kind::ReasoningDelta) delta = delta_text("reasoning_content", e.text);
        else if (e.kind == Kind::ContentDelta) delta = delta_text("content", e.text);
        else if (e.kind == Kind::ToolCallStart || e.kind == Kind::ToolCallArgumentsDelta) {
            core::JsonWriter w;
            w.begin_object().key("tool_calls").begin_array().begin_object().member("index", e.tool_index);
            if (e.kind == Kind::ToolCallStart) w.member("id", e.tool_call_id).member("type", "function");
            w.key("function").begin_object();
            if (e.kind == Kind::ToolCallStart) w.member("name", e.text).member("arguments", "");
            else w.member("arguments", e.text);
            w.end_object().end_object().end_array().end_object();
            delta = w.take();
        } else {
            continue; // markup, tool-call end and finish are not deltas
        }
        const std::vector<TokenLogprob>* lp = request_.logprobs ? &pending_logprobs_ : nullptr;
        send_sse(render_chunk(meta_, delta, "", lp));
        pending_logprobs_.clear();
    }
}

void ChatSession::collect_events(const std::vector<core::OutputEvent>& events) {
    using Kind = core::OutputEvent::Kind;
    for (const core::OutputEvent& e : events) {
        if (e.kind == Kind::ReasoningDelta) result_.reasoning += e.text;
        else if (e.kind == Kind::ContentDelta) result_.content += e.text;
        else if (e.kind == Kind::ToolCallStart) result_.tool_calls.push_back({e.tool_call_id, e.text, ""});
        else if (e.kind == Kind::ToolCallArgumentsDelta && !result_.tool_calls.empty())
            result_.tool_calls.back().arguments += e.text;
    }
}

void ChatSession::deliver(ChatUpdate&& u) {
    switch (u.kind) {
    case ChatUpdate::Kind::Admitted:
        lane_ = u.lane;
        n_cached_tokens_ = u.cached_tokens;
        ctx_.counters.queue_seconds.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
        if (request_.stream && !peer_gone_) {
            writer_->add_header("Cache-Control", "no-cache");
            writer_->add_header("X-Accel-Buffering", "no");
            writer_->start_stream(200, "text/event-stream");
            streaming_ = true;
            begin_stream();
        }
        return;
    case ChatUpdate::Kind::Tokens:
        ++n_generated_tokens_;
        if (const auto now = std::chrono::steady_clock::now(); !first_token_seen_) {
            first_token_seen_ = true;
            ctx_.counters.ttft_seconds.observe(std::chrono::duration<double>(now - started_).count());
            last_token_at_ = now;
        } else {
            ctx_.counters.token_gap_seconds.observe(std::chrono::duration<double>(now - last_token_at_).count());
            last_token_at_ = now;
        }
        for (auto& lp : u.logprobs) (request_.stream ? pending_logprobs_ : result_.logprobs).push_back(std::move(lp));
        if (peer_gone_) return;
        if (streaming_) stream_events(u.events);
        else collect_events(u.events);
        if (writer_->write_queue_bytes() > kMaxUnsentBytes) {
            log_req(LogLevel::Warning, id_, "http, client reads too slowly: cancelling");
            on_peer_closed();
        }
        return;
    case ChatUpdate::Kind::Finished:
        finish(u);
        return end_session();
    case ChatUpdate::Kind::Rejected:
        if (!peer_gone_) fail(rejection_error(u.reject_reason, u.message));
        return end_session();
    }
}

void ChatSession::finish(const ChatUpdate& u) {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    ctx_.counters.request_seconds.observe(seconds);
    ctx_.counters.prompt_tokens.observe(double(u.summary.prompt_tokens));
    ctx_.counters.generation_tokens.observe(double(u.summary.completion_tokens));
    ctx_.counters.n_tokens_max =
        std::max<uint64_t>(ctx_.counters.n_tokens_max, uint64_t(u.summary.prompt_tokens) + u.summary.completion_tokens);
    log_request_finished(id_, u.summary, finish_reason_name(u.finish), seconds * 1000);
    if (peer_gone_) return;
    if (u.finish == ChatFinish::Cancelled) // the daemon's drain deadline passed
        return fail({503, "the server is shutting down", "server_shutting_down", "", ""});
    if (u.finish == ChatFinish::EngineFailed)
        return fail(api_error_of({Errc::Unavailable, "the inference engine failed while generating this reply "
                                                     "(see the server log); the server cannot generate until it restarts"}));
    if (u.finish == ChatFinish::ConstraintFailed)
        return fail({500, "constrained decoding: the grammar allowed no next token the model's vocabulary holds "
                          "(or refused a forced one); the reply is incomplete", "constraint_failed", "", ""});
    result_.finish_reason = finish_reason_name(u.finish);
    render_finished(u);
}

void ChatSession::render_finished(const ChatUpdate& u) {
    if (streaming_) {
        stream_events(u.events);
        const std::vector<TokenLogprob>* lp = request_.logprobs ? &pending_logprobs_ : nullptr;
        send_sse(render_chunk(meta_, "{}", result_.finish_reason, lp));
        if (request_.include_usage) send_sse(render_usage_chunk(meta_, u.summary));
        send_sse("[DONE]");
        writer_->end();
        return;
    }
    collect_events(u.events);
    writer_->send(200, "application/json", render_completion(meta_, result_, u.summary, request_.logprobs));
}

void ChatSession::end_session() {
    if (ended_) return;
    ended_ = true;
    auto hold = shared_from_this();
    ctx_.sessions.erase(id_);
    if (ctx_.on_session_end) ctx_.on_session_end();
}

} // namespace ninfer::daemon
