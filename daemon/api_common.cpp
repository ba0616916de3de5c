// ninfer::daemon - shared API pieces: output blocks, named SSE events, ids, pool work.
#include "daemon/api_common.h"

#include "daemon/anthropic_session.h"
#include "daemon/chat_session.h"

#include <memory>
#include <random>

namespace ninfer::daemon {
namespace {

bool all_whitespace(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

} // namespace

void OutputBlocks::open(OutputBlock block, Listener* listener) {
    close(listener);
    blocks_.push_back(std::move(block));
    open_ = true;
    if (listener) listener->block_opened(blocks_.size() - 1, blocks_.back());
}

void OutputBlocks::append(std::string_view delta, Listener* listener) {
    if (delta.empty()) return;
    blocks_.back().text += delta;
    if (listener) listener->block_delta(blocks_.size() - 1, blocks_.back(), delta);
}

void OutputBlocks::close(Listener* listener) {
    if (!open_) return;
    open_ = false;
    if (listener) listener->block_closed(blocks_.size() - 1, blocks_.back());
}

bool OutputBlocks::has_tool_calls() const {
    for (const OutputBlock& b : blocks_)
        if (b.kind == OutputBlock::Kind::ToolCall) return true;
    return false;
}

void OutputBlocks::feed(const std::vector<core::OutputEvent>& events, Listener* listener) {
    using EK = core::OutputEvent::Kind;
    using BK = OutputBlock::Kind;
    for (const core::OutputEvent& e : events) {
        bool in = open_ && !blocks_.empty();
        switch (e.kind) {
        case EK::ReasoningDelta:
            if (!in || blocks_.back().kind != BK::Reasoning) open({BK::Reasoning, "", "", ""}, listener);
            append(e.text, listener);
            break;
        case EK::ContentDelta:
            if (in && blocks_.back().kind == BK::Text) {
                append(e.text, listener);
            } else if (all_whitespace(held_whitespace_ + e.text)) {
                held_whitespace_ += e.text;
            } else {
                open({BK::Text, "", "", ""}, listener);
                append(held_whitespace_ + e.text, listener);
                held_whitespace_.clear();
            }
            break;
        case EK::ToolCallStart:
            held_whitespace_.clear();
            open({BK::ToolCall, "", e.tool_call_id, e.text}, listener);
            break;
        case EK::ToolCallArgumentsDelta:
            if (in && blocks_.back().kind == BK::ToolCall) append(e.text, listener);
            break;
        case EK::ToolCallEnd:
            if (in && blocks_.back().kind == BK::ToolCall) close(listener);
            break;
        case EK::Markup:
        case EK::Finish:
            break;
        }
    }
}

void write_sse_event(ResponseWriter& writer, std::string_view event, const std::string& json) {
    std::string frame;
    frame.reserve(event.size() + json.size() + 16);
    frame.append("event: ").append(event).append("\ndata: ").append(json).append("\n\n");
    writer.write(frame);
}

std::string random_id(std::string_view prefix, size_t n_hex) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* digits = "0123456789abcdef";
    std::string out(prefix);
    for (size_t i = 0; i < n_hex; ++i) out += digits[rng() & 15];
    return out;
}

void require_ready(const DaemonContext& ctx) {
    if (ctx.state != ServeState::Ready || !ctx.frontend)
        throw ApiError{503, ctx.state == ServeState::Loading ? "the model is loading" : "the engine is unavailable",
                       "model_not_ready", "", ""};
}

void require_model(const DaemonContext& ctx, const std::string& model) {
    if (!model.empty() && model != ctx.model_id)
        throw ApiError{404, "the model '" + model + "' does not exist; this server serves '" + ctx.model_id + "'",
                       "model_not_found", "model", ""};
}

namespace {

struct PoolJob {
    uv_work_t req{};
    std::function<void()> work;
    std::function<void(std::optional<ApiError>)> done;
    std::optional<ApiError> error;
};

} // namespace

void run_off_loop(uv_loop_t* loop, std::function<void()> work, std::function<void(std::optional<ApiError>)> done) {
    auto* job = new PoolJob{{}, std::move(work), std::move(done), std::nullopt};
    job->req.data = job;
    uv_queue_work(
        loop, &job->req,
        [](uv_work_t* req) {
            auto* j = static_cast<PoolJob*>(req->data);
            try {
                j->work();
            } catch (const ApiError& e) {
                j->error = e;
            } catch (const std::exception& e) {
                j->error = api_error_of(error_info(e));
            }
        },
        [](uv_work_t* req, int) {
            std::unique_ptr<PoolJob> j(static_cast<PoolJob*>(req->data));
            j->done(std::move(j->error));
        });
}

void respond_prompt_tokens(DaemonContext& ctx, std::shared_ptr<ResponseWriter> writer, std::shared_ptr<const ChatRequest> chat,
                           bool anthropic, std::function<std::string(size_t)> body_of) {
    auto frontend = ctx.frontend;
    const bool thinking = ctx.config.enable_thinking;
    auto n_tokens = std::make_shared<size_t>(0);
    DaemonContext* c = &ctx;
    run_off_loop(
        ctx.loop, [=] { *n_tokens = frontend->prepare(*chat, thinking).tokens.size(); },
        [c, writer, n_tokens, anthropic, body_of = std::move(body_of)](std::optional<ApiError> error) {
            if (!writer->is_open()) return;
            if (error) return anthropic ? respond_anthropic_error(*c, *writer, *error) : respond_error(*c, *writer, *error);
            writer->send(200, "application/json", body_of(*n_tokens));
        });
}

} // namespace ninfer::daemon
