// Streaming output parser: reasoning / content split, stop strings and Qwen XML tool calls.
#include "core/frontend/output_parser.h"

#include "core/frontend/output_parser_json.h"

namespace ninfer::core {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";
constexpr size_t kMaxNameBytes = 128;

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
// s could still grow into p (s is a proper prefix of p).
bool may_become(std::string_view s, std::string_view p) { return s.size() < p.size() && starts_with(p, s); }

} // namespace

struct OutputParser::Impl {
    enum class Channel { ReasoningStart, Reasoning, AfterThink, ContentStart, Content };
    enum class Tool { Text, Head, Params, Value, Tail };
    using Kind = OutputEvent::Kind;

    OutputParserOptions opt;
    StopStringMatcher stop;
    std::vector<OutputEvent>* events = nullptr;
    size_t first_new_event = 0; // events before this index belong to earlier calls: never merged into
    bool stopped = false;

    Channel channel;
    std::string chan_buf;

    Tool tool = Tool::Text;
    std::string tbuf;         // tool stage input not yet consumed
    bool after_call = false;  // only whitespace since the last complete call
    std::string head_raw;     // Head: consumed bytes of a call whose name is not accepted yet
    size_t head_prefix = 0;   // head_raw bytes up to the end of "<tool_call>"
    bool head_in_name = false;
    int calls = 0;
    const ToolSignature* call_tool = nullptr;
    bool args_open = false;
    uint8_t value_types = 0;
    bool value_streams = false, value_first = true, string_open = false;
    std::string value_buf;

    Impl(OutputParserOptions o)
        : opt(std::move(o)), stop(opt.stop_strings),
          channel(opt.starts_in_reasoning ? Channel::ReasoningStart : Channel::ContentStart) {}

    void push(Kind kind, std::string_view text, int index = -1) {
        if (text.empty()) return;
        auto& ev = *events;
        const bool mergeable = kind != Kind::ToolCallStart && kind != Kind::ToolCallEnd && kind != Kind::Finish;
        if (mergeable && ev.size() > first_new_event && ev.back().kind == kind && ev.back().tool_index == index) {
            ev.back().text += text;
            return;
        }
        OutputEvent e;
        e.kind = kind;
        e.text = std::string(text);
        e.tool_index = index;
        ev.push_back(std::move(e));
    }
    void markup(std::string_view t) { push(Kind::Markup, t); }
    void args(std::string_view t) { push(Kind::ToolCallArgumentsDelta, t, calls - 1); }

    // ---- channel stage: reasoning until </think>, then content ----
    void feed_channel(std::string_view text) {
        chan_buf += text;
        for (;;) {
            switch (channel) {
            case Channel::ReasoningStart:
            case Channel::AfterThink: {
                size_t n = 0;
                while (n < chan_buf.size() && chan_buf[n] == '\n') ++n;
                markup(std::string_view(chan_buf).substr(0, n));
                chan_buf.erase(0, n);
                if (chan_buf.empty()) return;
                channel = channel == Channel::ReasoningStart ? Channel::Reasoning : Channel::Content;
                break;
            }
            case Channel::Reasoning: {
                const size_t at = chan_buf.find(kThinkClose);
                if (at != std::string::npos) {
                    size_t text_end = at;
                    while (text_end > 0 && chan_buf[text_end - 1] == '\n') --text_end;
                    push(Kind::ReasoningDelta, std::string_view(chan_buf).substr(0, text_end));
                    markup(std::string_view(chan_buf).substr(text_end, at + kThinkClose.size() - text_end));
                    chan_buf.erase(0, at + kThinkClose.size());
                    channel = Channel::AfterThink;
                    break;
                }
                size_t hold = held_prefix_length(chan_buf, kThinkClose);
                while (hold < chan_buf.size() && chan_buf[chan_buf.size() - hold - 1] == '\n') ++hold;
                push(Kind::ReasoningDelta, std::string_view(chan_buf).substr(0, chan_buf.size() - hold));
                chan_buf.erase(0, chan_buf.size() - hold);
                return;
            }
            case Channel::ContentStart:
                if (starts_with(chan_buf, kThinkOpen)) {
                    markup(kThinkOpen);
                    chan_buf.erase(0, kThinkOpen.size());
                    channel = Channel::ReasoningStart;
                    break;
                }
                if (chan_buf.empty() || may_become(chan_buf, kThinkOpen)) return;
                channel = Channel::Content;
                break;
            case Channel::Content: {
                std::string text_now;
                text_now.swap(chan_buf);
                feed_content(text_now);
                return;
            }
            }
        }
    }

    void feed_content(std::string_view text) {
        if (stopped) return;
        if (stop.empty()) return feed_tools(text);
        feed_tools(stop.feed(text));
        if (stop.matched()) {
            finish_tools();
            markup(stop.matched_string());
            stopped = true;
        }
    }

    // ---- tool stage: content with Qwen XML tool calls ----
    void feed_tools(std::string_view text) {
        if (opt.tools.empty()) return push(Kind::ContentDelta, text);
        tbuf += text;
        run_tools();
    }

    void content_from_tools(std::string_view text) {
        if (!text.empty()) after_call = false;
        push(Kind::ContentDelta, text);
    }

    void consume_markup(size_t n) {
        markup(std::string_view(tbuf).substr(0, n));
        tbuf.erase(0, n);
    }
    size_t leading_ws() const {
        size_t n = 0;
        while (n < tbuf.size() && is_ws(tbuf[n])) ++n;
        return n;
    }

    void run_tools() {
        for (;;) {
            switch (tool) {
            case Tool::Text: if (!step_text()) return; break;
            case Tool::Head: if (!step_head()) return; break;
            case Tool::Params: if (!step_params()) return; break;
            case Tool::Value: if (!step_value()) return; break;
            case Tool::Tail: if (!step_tail()) return; break;
            }
        }
    }

    bool step_text() {
        const size_t at = tbuf.find(kCallOpen);
        if (at == std::string::npos) {
            size_t hold = held_prefix_length(tbuf, kCallOpen);
            while (hold < tbuf.size() && is_ws(tbuf[tbuf.size() - hold - 1])) ++hold;
            content_from_tools(std::string_view(tbuf).substr(0, tbuf.size() - hold));
            tbuf.erase(0, tbuf.size() - hold);
            return false;
        }
        size_t text_end = at;
        while (text_end > 0 && is_ws(tbuf[text_end - 1])) --text_end;
        content_from_tools(std::string_view(tbuf).substr(0, text_end));
        head_raw = tbuf.substr(text_end, at + kCallOpen.size() - text_end);
        head_prefix = head_raw.size();
        head_in_name = false;
        tbuf.erase(0, at + kCallOpen.size());
        tool = Tool::Head;
        return true;
    }

    // Before the name is accepted nothing has been emitted: degrade "<tool_call>" to content and
    // parse what followed it again as text.
    void degrade_head() {
        content_from_tools(std::string_view(head_raw).substr(0, head_prefix));
        tbuf.insert(0, head_raw, head_prefix);
        head_raw.clear();
        tool = Tool::Text;
    }

    bool step_head() {
        if (!head_in_name) {
            const size_t ws = leading_ws();
            head_raw.append(tbuf, 0, ws);
            tbuf.erase(0, ws);
            if (tbuf.empty() || may_become(tbuf, kFunctionOpen)) return false;
            if (!starts_with(tbuf, kFunctionOpen)) return degrade_head(), true;
            head_raw += kFunctionOpen;
            tbuf.erase(0, kFunctionOpen.size());
            head_in_name = true;
        }
        const size_t gt = tbuf.find('>');
        const size_t bad = tbuf.find_first_of("<\n");
        if (bad < gt || std::min(gt, tbuf.size()) > kMaxNameBytes) return degrade_head(), true;
        if (gt == std::string::npos) return false;
        const std::string name = tbuf.substr(0, gt);
        call_tool = nullptr;
        for (const ToolSignature& sig : opt.tools)
            if (sig.name == name) call_tool = &sig;
        if (!call_tool) return degrade_head(), true;
        head_raw.append(tbuf, 0, gt + 1);
        tbuf.erase(0, gt + 1);
        OutputEvent start;
        start.kind = Kind::ToolCallStart;
        start.text = name;
        start.tool_index = calls;
        start.tool_call_id = opt.call_id_prefix + std::to_string(calls);
        events->push_back(std::move(start));
        ++calls;
        markup(head_raw);
        head_raw.clear();
        args_open = false;
        tool = Tool::Params;
        return true;
    }

    void close_args() {
        args(args_open ? "}" : "{}");
        args_open = true;
    }
    void end_call() {
        OutputEvent end;
        end.kind = Kind::ToolCallEnd;
        end.tool_index = calls - 1;
        events->push_back(std::move(end));
        tool = Tool::Text;
    }

    bool step_params() {
        consume_markup(leading_ws());
        if (tbuf.empty()) return false;
        if (starts_with(tbuf, kFunctionClose)) {
            consume_markup(kFunctionClose.size());
            close_args();
            tool = Tool::Tail;
            return true;
        }
        if (starts_with(tbuf, kParamOpen)) {
            const size_t gt = tbuf.find('>', kParamOpen.size());
            const size_t bad = tbuf.find_first_of("<\n", kParamOpen.size());
            const size_t key_end = std::min(gt, tbuf.size());
            if (bad >= gt && key_end - kParamOpen.size() <= kMaxNameBytes) {
                if (gt == std::string::npos) return false;
                const std::string key = tbuf.substr(kParamOpen.size(), gt - kParamOpen.size());
                consume_markup(gt + 1);
                args((args_open ? "," : "{") + json_string_of(key) + ":");
                args_open = true;
                value_types = call_tool->param_types(key);
                value_streams = value_types == 0 || value_types == kParamString;
                value_first = true;
                string_open = false;
                value_buf.clear();
                tool = Tool::Value;
                return true;
            }
        } else if (may_become(tbuf, kFunctionClose) || may_become(tbuf, kParamOpen)) {
            return false;
        }
        close_args(); // malformed: keep the call with what it has, the rest is content
        end_call();
        return true;
    }

    void value_piece(std::string_view piece, bool last) {
        if (value_streams) {
            std::string delta = string_open ? "" : "\"";
            append_json_string_body(delta, piece);
            if (last) delta += '"';
            string_open = true;
            args(delta);
        } else {
            value_buf += piece;
            if (last) args(typed_param_json(value_buf, value_types));
        }
    }

    bool step_value() {
        if (value_first) {
            if (tbuf.empty()) return false;
            if (tbuf[0] == '\n') consume_markup(1);
            value_first = false;
        }
        const size_t at = tbuf.find(kParamClose);
        if (at != std::string::npos) {
            const size_t body = at > 0 && tbuf[at - 1] == '\n' ? at - 1 : at;
            value_piece(std::string_view(tbuf).substr(0, body), true);
            consume_markup(at + kParamClose.size());
            tool = Tool::Params;
            return true;
        }
        size_t hold = held_prefix_length(tbuf, kParamClose);
        if (hold < tbuf.size() && tbuf[tbuf.size() - hold - 1] == '\n') ++hold;
        const size_t n = tbuf.size() - hold;
        if (n > 0) value_piece(std::string_view(tbuf).substr(0, n), false);
        consume_markup(n);
        return false;
    }

    bool step_tail() {
        consume_markup(leading_ws());
        if (tbuf.empty() || may_become(tbuf, kCallClose)) return false;
        if (starts_with(tbuf, kCallClose)) consume_markup(kCallClose.size());
        end_call();
        after_call = true;
        return true;
    }

    // End of the content stream (end of generation or a stop string): close what is open.
    void finish_tools() {
        while (tool == Tool::Head) {
            degrade_head();
            run_tools();
        }
        if (tool == Tool::Value) {
            value_piece(tbuf, true);
            consume_markup(tbuf.size());
            tool = Tool::Params;
        }
        if (tool == Tool::Params) {
            close_args();
            end_call();
        } else if (tool == Tool::Tail) {
            end_call();
        }
        if (after_call && leading_ws() == tbuf.size()) markup(tbuf);
        else content_from_tools(tbuf);
        tbuf.clear();
    }

    void finish(GenerationEnd end) {
        if (!stopped) {
            if (channel == Channel::Reasoning) push(Kind::ReasoningDelta, chan_buf);
            else if (channel == Channel::ContentStart) feed_content(chan_buf);
            chan_buf.clear();
            if (!stopped) {
                if (!stop.empty()) feed_tools(stop.flush());
                finish_tools();
            }
        }
        OutputEvent fin;
        fin.kind = Kind::Finish;
        if (stopped) {
            fin.text = "stop";
            fin.stop_string = stop.matched_string();
        } else {
            fin.text = end == GenerationEnd::Length ? "length" : calls > 0 ? "tool_calls" : "stop";
        }
        events->push_back(std::move(fin));
    }
};

OutputParser::OutputParser(OutputParserOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
OutputParser::~OutputParser() = default;

void OutputParser::feed(std::string_view text, std::vector<OutputEvent>& events) {
    impl_->events = &events;
    impl_->first_new_event = events.size();
    if (!impl_->stopped) impl_->feed_channel(text);
}

void OutputParser::finish(GenerationEnd end, std::vector<OutputEvent>& events) {
    impl_->events = &events;
    impl_->first_new_event = events.size();
    impl_->finish(end);
}

bool OutputParser::stopped() const { return impl_->stopped; }
int OutputParser::tool_calls() const { return impl_->calls; }

} // namespace ninfer::core
