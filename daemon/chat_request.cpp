// ninfer::daemon - OpenAI chat request JSON -> ChatRequest, with field-level 400 errors.
#include "daemon/chat_request.h"

#include "daemon/api_error.h"
#include "daemon/request_json.h"

#include <simdjson.h>

#include <cmath>

namespace ninfer::daemon {
namespace request_json { // field readers shared with the other APIs' parsers (request_json.h)

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

[[noreturn]] void fail(const std::string& param, const std::string& message, const std::string& code = "") {
    throw bad_request(message, param, code);
}

element required(Field field, const std::string& param) {
    element e;
    if (field.get(e)) fail(param, "'" + param + "' is required");
    return e;
}

double number_of(element e, const std::string& param) {
    if (e.is_double()) return double(e.get_double());
    if (e.is_int64()) return double(int64_t(e.get_int64()));
    if (e.is_uint64()) return double(uint64_t(e.get_uint64()));
    fail(param, "'" + param + "' must be a number");
}

double number_in(element e, const std::string& param, double lo, double hi) {
    double v = number_of(e, param);
    if (!(v >= lo && v <= hi))
        fail(param, "'" + param + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return v;
}

int64_t integer_of(element e, const std::string& param) {
    if (e.is_int64()) return int64_t(e.get_int64());
    if (e.is_uint64()) fail(param, "'" + param + "' is too large");
    if (e.is_double()) {
        double d = double(e.get_double());
        if (std::floor(d) == d && std::fabs(d) < 9e15) return int64_t(d);
    }
    fail(param, "'" + param + "' must be an integer");
}

bool bool_of(element e, const std::string& param) {
    if (!e.is_bool()) fail(param, "'" + param + "' must be a boolean");
    return bool(e.get_bool());
}

std::string string_of(element e, const std::string& param) {
    if (!e.is_string()) fail(param, "'" + param + "' must be a string");
    return std::string(std::string_view(e.get_string()));
}

std::string string_of(Field field, const std::string& param) { return string_of(required(field, param), param); }

std::vector<core::ContentPart> parse_content(element content, const std::string& param) {
    std::vector<core::ContentPart> parts;
    if (content.is_null()) return parts;
    if (content.is_string()) {
        parts.push_back(core::ContentPart::of_text(string_of(content, param)));
        return parts;
    }
    if (!content.is_array()) fail(param, "'" + param + "' must be a string or an array of content parts");
    for (element part : content.get_array()) {
        if (!part.is_object()) fail(param, "content parts must be objects");
        std::string type = part["type"].error() ? "" : string_of(part["type"], param + ".type");
        if (type == "text") {
            parts.push_back(core::ContentPart::of_text(string_of(part["text"], param + ".text")));
        } else if (type == "image_url" || type == "video_url") {
            // {"type":"image_url","image_url":{"url":"data:..."}} (OpenAI), or the URL as a string.
            const std::string p = param + "." + type;
            element src;
            if (part[type].get(src)) fail(p, "'" + p + "' is required");
            std::string url = src.is_string() ? string_of(src, p) : string_of(src["url"], p + ".url");
            parts.push_back(media_part(type == "image_url" ? core::ContentPart::Kind::Image : core::ContentPart::Kind::Video,
                                       std::move(url), p));
        } else if (type == "input_audio" || type == "file") {
            fail(param, "content part type '" + type + "' is not supported by this server", "modality_not_supported");
        } else {
            fail(param, "unknown content part type '" + type + "'");
        }
    }
    return parts;
}

core::ToolCall parse_tool_call(element call, const std::string& param) {
    if (!call.is_object()) fail(param, "tool calls must be objects");
    core::ToolCall out;
    if (!call["id"].error()) out.id = string_of(call["id"], param + ".id");
    element fn;
    if (call["function"].get(fn) || !fn.is_object()) fail(param + ".function", "tool call needs a 'function' object");
    out.name = string_of(fn["name"], param + ".function.name");
    element args;
    if (!fn["arguments"].get(args)) out.arguments_json = simdjson::minify(args);
    return out;
}

core::ChatMessage parse_message(element m, size_t index) {
    std::string param = "messages[" + std::to_string(index) + "]";
    if (!m.is_object()) fail(param, "each message must be an object");
    element role_el;
    if (m["role"].get(role_el)) fail(param + ".role", "message " + std::to_string(index) + " has no role");
    std::string role = string_of(role_el, param + ".role");
    auto parsed_role = core::chat_role_from_name(role);
    if (!parsed_role) fail(param + ".role", "unsupported role '" + role + "'", "unsupported_role");
    core::ChatMessage msg;
    msg.role = *parsed_role;
    element content;
    if (!m["content"].get(content)) msg.content = parse_content(content, param + ".content");
    element reasoning;
    if (!m["reasoning_content"].get(reasoning) && !reasoning.is_null())
        msg.reasoning_content = string_of(reasoning, param + ".reasoning_content");
    element calls;
    if (!m["tool_calls"].get(calls) && !calls.is_null()) {
        if (!calls.is_array()) fail(param + ".tool_calls", "'tool_calls' must be an array");
        size_t k = 0;
        for (element c : calls.get_array())
            msg.tool_calls.push_back(parse_tool_call(c, param + ".tool_calls[" + std::to_string(k++) + "]"));
    }
    element call_id;
    if (!m["tool_call_id"].get(call_id) && !call_id.is_null())
        msg.tool_call_id = string_of(call_id, param + ".tool_call_id");
    return msg;
}

std::string tool_name_of(Field field, const std::string& param) {
    std::string name = string_of(field, param);
    if (name.empty() || name.size() > 64) fail(param, "tool names must be 1 to 64 characters");
    for (char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
            fail(param, "tool name '" + name + "' may hold only letters, digits, '_', '-' and '.'");
    return name;
}

void parse_tools(element tools, ChatRequest& r) {
    if (tools.is_null()) return;
    if (!tools.is_array()) fail("tools", "'tools' must be an array");
    size_t k = 0;
    for (element t : tools.get_array()) {
        std::string p = "tools[" + std::to_string(k++) + "]";
        if (!t.is_object()) fail(p, "each tool must be an object");
        std::string type = t["type"].error() ? "function" : string_of(t["type"], p + ".type");
        if (type != "function") {
            r.ignored_tools.push_back(type);
            continue;
        }
        element fn;
        if (t["function"].get(fn) || !fn.is_object()) fail(p + ".function", "each tool needs a 'function' object");
        tool_name_of(fn["name"], p + ".function.name");
        r.conversation.tools_json.push_back(simdjson::minify(t));
    }
}

void parse_tool_choice(element choice, ChatRequest& r) {
    if (choice.is_null()) return;
    if (choice.is_string()) {
        std::string v = string_of(choice, "tool_choice");
        if (v == "auto") r.tool_choice = ToolChoice::Auto;
        else if (v == "none") r.tool_choice = ToolChoice::None;
        else if (v == "required") r.tool_choice = ToolChoice::Required;
        else fail("tool_choice", "'tool_choice' must be none, auto, required or a named function");
        return;
    }
    element fn;
    if (!choice.is_object() || choice["function"].get(fn) || !fn.is_object())
        fail("tool_choice", "'tool_choice' must be none, auto, required or {\"type\":\"function\",\"function\":{\"name\":...}}");
    r.tool_choice = ToolChoice::Named;
    r.tool_choice_name = string_of(fn["name"], "tool_choice.function.name");
}

void parse_stop(element stop, const std::string& param, ChatRequest& r) {
    if (stop.is_null()) return;
    if (stop.is_string()) {
        r.stop.push_back(string_of(stop, param));
        return;
    }
    if (!stop.is_array()) fail(param, "'" + param + "' must be a string or an array of strings");
    for (element s : stop.get_array()) r.stop.push_back(string_of(s, param));
    if (r.stop.size() > 16) fail(param, "at most 16 stop strings");
}

void parse_logit_bias(element bias, ChatRequest& r) {
    if (bias.is_null()) return;
    if (!bias.is_object()) fail("logit_bias", "'logit_bias' must be an object of token id -> bias");
    for (auto [key, value] : object(bias)) {
        int64_t id = -1;
        try {
            size_t used = 0;
            id = std::stoll(std::string(key), &used);
            if (used != key.size()) id = -1;
        } catch (const std::exception&) {
        }
        if (id < 0 || id > INT32_MAX) fail("logit_bias", "logit_bias keys must be token ids");
        r.sampling.logit_bias.emplace_back(int32_t(id), float(number_in(value, "logit_bias", -100, 100)));
    }
}

// "off", "mtp:K", "ngram:K", or {"type": "off" | "mtp" | "ngram", "k": 1..5} (k required but with off).
core::SpeculativeConfig parse_speculative_member(element e) {
    const std::string usage = "'speculative' must be \"off\", \"mtp:K\", \"ngram:K\" or {\"type\": \"mtp\" | "
                              "\"ngram\" | \"off\", \"k\": K} with K in 1.." +
                              std::to_string(core::kMaxSpeculativeK);
    std::string text;
    if (e.is_string()) {
        text = std::string(std::string_view(e));
    } else if (e.is_object()) {
        element type, k;
        if (e["type"].get(type) || !type.is_string()) fail("speculative", usage);
        text = std::string(std::string_view(type));
        if (text != "off") {
            if (e["k"].get(k) || !k.is_int64()) fail("speculative", usage);
            const int64_t n = int64_t(k);
            if (n < 1 || n > core::kMaxSpeculativeK) fail("speculative", usage);
            text += ":" + std::to_string(n);
        }
    } else {
        fail("speculative", usage);
    }
    try {
        return core::parse_speculative(text);
    } catch (const Error&) {
        fail("speculative", usage);
    }
}

void parse_sampling(object body, ChatRequest& r) {
    element e;
    core::SamplingDefaults& given = r.sampling_given;
    if (!body["temperature"].get(e) && !e.is_null()) given.temperature = float(number_in(e, "temperature", 0, 2));
    if (!body["top_p"].get(e) && !e.is_null()) given.top_p = float(number_in(e, "top_p", 0, 1));
    if (!body["top_k"].get(e) && !e.is_null()) {
        int64_t k = integer_of(e, "top_k");
        if (k < -1 || k > INT32_MAX) fail("top_k", "'top_k' must be -1, 0 (all) or a positive count");
        given.top_k = k < 0 ? 0 : int32_t(k);
    }
    if (!body["min_p"].get(e) && !e.is_null()) given.min_p = float(number_in(e, "min_p", 0, 1));
    if (!body["presence_penalty"].get(e) && !e.is_null())
        given.presence_penalty = float(number_in(e, "presence_penalty", -2, 2));
    if (!body["frequency_penalty"].get(e) && !e.is_null())
        given.frequency_penalty = float(number_in(e, "frequency_penalty", -2, 2));
    if (!body["repetition_penalty"].get(e) && !e.is_null())
        given.repetition_penalty = float(number_in(e, "repetition_penalty", 0.01, 10));
    if (!body["seed"].get(e) && !e.is_null())
        given.seed = e.is_uint64() ? uint64_t(e.get_uint64()) : uint64_t(integer_of(e, "seed"));
    r.has_seed = given.seed.has_value();
    r.sampling = core::resolve_sampling({}, {}, given); // the session resolves again with the server's defaults
    if (!body["logit_bias"].get(e)) parse_logit_bias(e, r);
    if (!body["speculative"].get(e) && !e.is_null()) r.speculative = parse_speculative_member(e);
}

void parse_limits_and_flags(object body, ChatRequest& r) {
    element e;
    for (const char* name : {"max_tokens", "max_completion_tokens"}) {
        if (body[name].get(e) || e.is_null()) continue;
        r.max_tokens = positive_count(e, name);
    }
    if (!body["stream"].get(e) && !e.is_null()) r.stream = bool_of(e, "stream");
    if (!body["stream_options"].get(e) && !e.is_null()) {
        element u;
        if (!e.is_object()) fail("stream_options", "'stream_options' must be an object");
        if (!e["include_usage"].get(u) && !u.is_null()) r.include_usage = bool_of(u, "stream_options.include_usage");
    }
    if (!body["n"].get(e) && !e.is_null() && integer_of(e, "n") != 1)
        fail("n", "only n = 1 is supported", "n_not_supported");
    parse_output_format(body, r);
    if (!body["functions"].error() || !body["function_call"].error())
        fail("functions", "'functions'/'function_call' are not supported: use 'tools'", "tools_not_supported");
    if (!body["logprobs"].get(e) && !e.is_null()) r.logprobs = bool_of(e, "logprobs");
    if (!body["top_logprobs"].get(e) && !e.is_null()) {
        int64_t n = integer_of(e, "top_logprobs");
        if (n < 0 || n > 20) fail("top_logprobs", "'top_logprobs' must be 0..20");
        if (n > 0 && !r.logprobs) fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.top_logprobs = int(n);
    }
    if (!body["enable_thinking"].get(e) && !e.is_null()) r.enable_thinking = bool_of(e, "enable_thinking");
    if (!body["chat_template_kwargs"].get(e) && !e.is_null()) {
        if (!e.is_object()) fail("chat_template_kwargs", "'chat_template_kwargs' must be an object");
        element v;
        if (!e["enable_thinking"].get(v) && !v.is_null())
            r.enable_thinking = bool_of(v, "chat_template_kwargs.enable_thinking");
        if (!e["preserve_thinking"].get(v) && !v.is_null())
            r.preserve_thinking = bool_of(v, "chat_template_kwargs.preserve_thinking");
    }
    if (!body["reasoning_effort"].get(e) && !e.is_null() && string_of(e, "reasoning_effort") == "none")
        r.enable_thinking = false;
}

} // namespace request_json

using namespace request_json;

ChatRequest parse_chat_request(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(body);
    object body_obj = parse_json_object(parser, padded);
    ChatRequest r;
    element e;
    if (!body_obj["model"].get(e) && !e.is_null()) r.model = string_of(e, "model");
    if (body_obj["messages"].get(e) || !e.is_array()) fail("messages", "'messages' must be an array of messages");
    size_t index = 0;
    for (element m : e.get_array()) r.conversation.messages.push_back(parse_message(m, index++));
    if (r.conversation.messages.empty()) fail("messages", "'messages' must not be empty");
    if (!body_obj["tools"].get(e)) parse_tools(e, r);
    if (!body_obj["tool_choice"].get(e)) parse_tool_choice(e, r);
    if (!body_obj["stop"].get(e)) parse_stop(e, "stop", r);
    parse_sampling(body_obj, r);
    parse_limits_and_flags(body_obj, r);
    return r;
}

} // namespace ninfer::daemon
