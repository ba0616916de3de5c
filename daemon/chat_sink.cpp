// ninfer::daemon - chat sink: incremental UTF-8-safe detokenizing and output parsing (engine thread).
#include "daemon/chat_sink.h"

#include "core/frontend/unicode_utf8.h"

#include <algorithm>

namespace ninfer::daemon {

ChatSink::ChatSink(std::shared_ptr<const core::Tokenizer> tokenizer, core::OutputParserOptions options,
                   std::vector<int32_t> stop_token_ids, bool want_logprobs, Deliver deliver)
    : tokenizer_(std::move(tokenizer)), parser_(options), stop_token_ids_(std::move(stop_token_ids)),
      want_logprobs_(want_logprobs), deliver_(std::move(deliver)), reasoning_open_(options.starts_in_reasoning) {}

void ChatSink::set_reasoning_budget(uint32_t max_tokens, std::vector<int32_t> close_tokens) {
    reasoning_budget_ = max_tokens;
    reasoning_close_tokens_ = std::move(close_tokens);
}

std::vector<int32_t> ChatSink::forced_tokens() {
    if (reasoning_budget_ == 0 || !reasoning_open_ || reasoning_tokens_ < reasoning_budget_) return {};
    reasoning_budget_ = 0; // once
    return reasoning_close_tokens_;
}

void ChatSink::on_admitted(int lane, uint32_t cached_tokens) {
    ChatUpdate u;
    u.kind = ChatUpdate::Kind::Admitted;
    u.cached_tokens = cached_tokens;
    u.lane = lane;
    deliver_(std::move(u));
}

TokenLogprob ChatSink::logprob_entry(const core::DecodeResult& r) const {
    TokenLogprob e;
    std::string_view raw = tokenizer_->token_bytes(r.token);
    e.token = core::utf8_lossy(raw);
    e.bytes.assign(raw.begin(), raw.end());
    e.logprob = r.logprob;
    for (const auto& [id, lp] : r.top_logprobs) e.top.emplace_back(core::utf8_lossy(tokenizer_->token_bytes(id)), lp);
    return e;
}

core::TokenVerdict ChatSink::on_token(const core::DecodeResult& result) {
    ChatUpdate u;
    if (want_logprobs_) u.logprobs.push_back(logprob_entry(result));
    bool is_stop = std::find(stop_token_ids_.begin(), stop_token_ids_.end(), result.token) != stop_token_ids_.end();
    if (is_stop) {
        ended_by_stop_token_ = true;
    } else if (!parser_.stopped()) {
        pending_bytes_ += tokenizer_->token_bytes(result.token);
        size_t stable = core::utf8_scan_stable(pending_bytes_);
        if (stable > 0) {
            std::string text = core::utf8_lossy(std::string_view(pending_bytes_).substr(0, stable));
            pending_bytes_.erase(0, stable);
            parser_.feed(text, u.events);
        }
    }
    if (reasoning_open_) {
        ++reasoning_tokens_;
        for (const core::OutputEvent& e : u.events)
            if (e.kind != core::OutputEvent::Kind::ReasoningDelta &&
                (e.kind != core::OutputEvent::Kind::Markup || e.text.find("</think>") != std::string::npos))
                reasoning_open_ = false;
    }
    deliver_(std::move(u));
    return parser_.stopped() ? core::TokenVerdict::Stop : core::TokenVerdict::Continue;
}

void ChatSink::on_finished(const core::GenerationSummary& summary) {
    ChatUpdate u;
    u.kind = ChatUpdate::Kind::Finished;
    u.summary = summary;
    u.reasoning_tokens = reasoning_tokens_;
    if (summary.reason == core::FinishReason::Cancelled || summary.reason == core::FinishReason::Failed ||
        summary.reason == core::FinishReason::ConstraintFailed) {
        u.finish = summary.reason == core::FinishReason::Failed             ? ChatFinish::EngineFailed
                   : summary.reason == core::FinishReason::ConstraintFailed ? ChatFinish::ConstraintFailed
                                                                            : ChatFinish::Cancelled;
        deliver_(std::move(u));
        return;
    }
    if (!pending_bytes_.empty() && !parser_.stopped()) parser_.feed(core::utf8_lossy(pending_bytes_), u.events);
    pending_bytes_.clear();
    bool length = summary.reason == core::FinishReason::Length && !ended_by_stop_token_ && !parser_.stopped();
    parser_.finish(length ? core::GenerationEnd::Length : core::GenerationEnd::EndOfSequence, u.events);
    u.finish = length ? ChatFinish::Length : ChatFinish::Stop;
    for (const core::OutputEvent& e : u.events) // the parser's word (output_parser.h) becomes the enum here
        if (e.kind == core::OutputEvent::Kind::Finish)
            u.finish = e.text == "tool_calls" ? ChatFinish::ToolCalls : e.text == "length" ? ChatFinish::Length
                                                                                          : ChatFinish::Stop;
    deliver_(std::move(u));
}

std::string_view finish_reason_name(ChatFinish finish) {
    switch (finish) {
    case ChatFinish::Stop: return "stop";
    case ChatFinish::Length: return "length";
    case ChatFinish::ToolCalls: return "tool_calls";
    case ChatFinish::Cancelled: return "cancelled";
    case ChatFinish::EngineFailed: return "engine_failed";
    case ChatFinish::ConstraintFailed: return "constraint_failed";
    }
    return "stop";
}

void ChatSink::on_rejected(core::RejectReason reason, const std::string& message) {
    ChatUpdate u;
    u.kind = ChatUpdate::Kind::Rejected;
    u.reject_reason = reason;
    u.message = message;
    deliver_(std::move(u));
}

} // namespace ninfer::daemon
