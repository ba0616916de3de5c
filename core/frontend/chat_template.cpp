// Our C++ rendering of the official Qwen3.5 chat template (plus Qwen3.6's preserve_thinking).
#include "core/frontend/chat_template.h"

#include "core/frontend/chat_template_python.h"
#include "core/util/error.h"

#include <simdjson.h>

namespace ninfer::core {
namespace {

constexpr std::string_view kToolsHeader =
    "# Tools\n\nYou have access to the following functions:\n\n<tools>";
constexpr std::string_view kToolsInstructions =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> "
    "block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be "
    "specified\n- You may provide optional reasoning for your function call in natural language "
    "BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
    "question like normal with your current knowledge and do not tell the user about function "
    "calls\n</IMPORTANT>";

[[noreturn]] void template_error(const std::string& message) {
    throw Error("chat template: " + message);
}

bool is_system(ChatRole role) { return role == ChatRole::System || role == ChatRole::Developer; }

// The template's render_content macro; image/video counters persist across calls like its
// namespace() counters.
class ContentRenderer {
  public:
    explicit ContentRenderer(bool add_vision_id) : add_vision_id_(add_vision_id) {}

    std::string render(const std::vector<ContentPart>& parts, bool count, bool is_system_content) {
        std::string out;
        for (const ContentPart& part : parts) {
            if (part.kind == ContentPart::Kind::Text) {
                out += part.text;
                continue;
            }
            const bool image = part.kind == ContentPart::Kind::Image;
            if (is_system_content)
                template_error(image ? "System message cannot contain images." : "System message cannot contain videos.");
            int& counter = image ? images_ : videos_;
            if (count) ++counter;
            if (add_vision_id_) out += (image ? "Picture " : "Video ") + std::to_string(counter) + ": ";
            out += image ? "<|vision_start|><|image_pad|><|vision_end|>" : "<|vision_start|><|video_pad|><|vision_end|>";
        }
        return out;
    }

  private:
    bool add_vision_id_;
    int images_ = 0;
    int videos_ = 0;
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string_view lstrip_newlines(std::string_view s) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    return s;
}
std::string_view rstrip_newlines(std::string_view s) {
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
}

// Index of the last user turn that is a real query (not wholly a <tool_response> block).
size_t last_query_index(const ChatConversation& conv, ContentRenderer& content) {
    for (size_t i = conv.messages.size(); i-- > 0;) {
        const ChatMessage& m = conv.messages[i];
        if (m.role != ChatRole::User) continue;
        const std::string text = content.render(m.content, false, false);
        const std::string_view trimmed = python_strip(text);
        if (!(starts_with(trimmed, "<tool_response>") && ends_with(trimmed, "</tool_response>"))) return i;
    }
    template_error("No user query found in messages.");
}

// Number of messages in the leading run of system/developer messages (merged into one turn).
size_t leading_system_count(const ChatConversation& conv) {
    size_t n = 0;
    while (n < conv.messages.size() && is_system(conv.messages[n].role)) ++n;
    return n;
}

// The leading run's texts, each stripped, joined by a blank line in their order (Codex sends two
// developer messages, Claude Code a system field plus a system message).
std::string leading_system_text(const ChatConversation& conv, size_t n_leading, ContentRenderer& content) {
    std::string joined;
    for (size_t i = 0; i < n_leading; ++i) {
        const std::string text = content.render(conv.messages[i].content, false, true);
        const std::string_view stripped = python_strip(text);
        if (stripped.empty()) continue;
        if (!joined.empty()) joined += "\n\n";
        joined += stripped;
    }
    return joined;
}

void render_system_turn(std::string& out, const ChatConversation& conv, size_t n_leading, ContentRenderer& content) {
    const bool has_system = n_leading > 0;
    const std::string system_text = leading_system_text(conv, n_leading, content);
    const std::string_view system = system_text;
    if (!conv.tools_json.empty()) {
        out += "<|im_start|>system\n";
        out += kToolsHeader;
        for (const std::string& tool : conv.tools_json) {
            out += '\n';
            out += python_tojson(tool);
        }
        out += "\n</tools>";
        out += kToolsInstructions;
        if (!system.empty()) {
            out += "\n\n";
            out += system;
        }
        out += "<|im_end|>\n";
    } else if (has_system) {
        out += "<|im_start|>system\n";
        out += system;
        out += "<|im_end|>\n";
    }
}

void render_tool_call(std::string& out, const ToolCall& call, simdjson::dom::parser& parser) {
    out += "<function=" + call.name + ">\n";
    if (call.arguments_json.empty()) {
        out += "</function>\n</tool_call>";
        return;
    }
    auto fail = [&](const std::string& why) {
        template_error("tool call " + call.name + ": arguments are not a JSON object: " + why);
    };
    simdjson::dom::element args;
    std::string inner; // the object text when the arguments came as a JSON string
    if (parser.parse(call.arguments_json).get(args)) fail("invalid JSON");
    if (args.is_string()) {
        inner = std::string(args.get_string().value_unsafe());
        if (parser.parse(inner).get(args)) fail("invalid JSON inside the string: " + inner);
    }
    if (!args.is_null()) {
        if (!args.is_object()) fail(simdjson::to_string(args));
        for (auto field : simdjson::dom::object(args.get_object().value_unsafe())) {
            out += "<parameter=";
            out += field.key;
            out += ">\n";
            if (field.value.is_object() || field.value.is_array()) python_tojson_element(out, field.value);
            else python_str_element(out, field.value);
            out += "\n</parameter>\n";
        }
    }
    out += "</function>\n</tool_call>";
}

void render_assistant(std::string& out, const ChatMessage& m, std::string content, bool keep_reasoning,
                      simdjson::dom::parser& parser) {
    std::string reasoning;
    if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
    } else if (content.find("</think>") != std::string::npos) {
        const std::string_view before = rstrip_newlines(std::string_view(content).substr(0, content.find("</think>")));
        const size_t open = before.rfind("<think>");
        reasoning = std::string(lstrip_newlines(open == std::string_view::npos ? before : before.substr(open + 7)));
        content = std::string(lstrip_newlines(std::string_view(content).substr(content.rfind("</think>") + 8)));
    }
    const std::string_view kept = python_strip(reasoning);
    out += assistant_turn_opener();
    if (keep_reasoning) {
        out += "<think>\n";
        out += kept;
        out += "\n</think>\n\n";
    }
    out += content;
    for (size_t c = 0; c < m.tool_calls.size(); ++c) {
        if (c > 0) out += "\n<tool_call>\n";
        else out += python_strip(content).empty() ? "<tool_call>\n" : "\n\n<tool_call>\n";
        render_tool_call(out, m.tool_calls[c], parser);
    }
    out += "<|im_end|>\n";
}

} // namespace

std::string python_tojson(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(json.data(), json.size()).get(root)) throw Error("chat template: invalid JSON: " + std::string(json.substr(0, 80)));
    std::string out;
    python_tojson_element(out, root);
    return out;
}

std::string assistant_turn_opener() { return "<|im_start|>assistant\n"; }

std::string generation_opener(const ChatRenderOptions& options) {
    return assistant_turn_opener() + (options.enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
}

std::string render_chat_prompt(const ChatConversation& conv, const ChatRenderOptions& options) {
    if (conv.messages.empty()) template_error("No messages provided.");
    ContentRenderer content(options.add_vision_id);
    std::string out;
    const size_t n_leading = leading_system_count(conv);
    render_system_turn(out, conv, n_leading, content);
    const size_t last_query = last_query_index(conv, content);
    simdjson::dom::parser parser;
    const auto& msgs = conv.messages;
    for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        std::string text(python_strip(content.render(m.content, true, false)));
        switch (m.role) {
        case ChatRole::System:
        case ChatRole::Developer:
            // The leading run is the system turn above; a later one keeps its place as a ChatML
            // system turn (the official template raises here), so earlier turns stay a stable prefix.
            if (i >= n_leading) out += "<|im_start|>system\n" + text + "<|im_end|>\n";
            break;
        case ChatRole::User:
            out += "<|im_start|>user\n" + text + "<|im_end|>\n";
            break;
        case ChatRole::Assistant:
            render_assistant(out, m, std::move(text), options.preserve_thinking || i > last_query, parser);
            break;
        case ChatRole::Tool:
            if (i > 0 && msgs[i - 1].role != ChatRole::Tool) out += "<|im_start|>user";
            out += "\n<tool_response>\n" + text + "\n</tool_response>";
            if (i + 1 == msgs.size() || msgs[i + 1].role != ChatRole::Tool) out += "<|im_end|>\n";
            break;
        }
    }
    if (options.add_generation_prompt) out += generation_opener(options);
    return out;
}

} // namespace ninfer::core
