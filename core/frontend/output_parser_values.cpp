// Tool signatures from JSON tool definitions, and parameter text typed by their JSON schema.
#include "core/frontend/output_parser.h"

#include "core/frontend/output_parser_json.h"
#include "core/util/error.h"

#include <simdjson.h>

namespace ninfer::core {
namespace {

using simdjson::dom::element;

uint8_t type_bit(std::string_view name) {
    if (name == "string") return kParamString;
    if (name == "integer") return kParamInteger;
    if (name == "number") return kParamNumber;
    if (name == "boolean") return kParamBoolean;
    if (name == "object") return kParamObject;
    if (name == "array") return kParamArray;
    if (name == "null") return kParamNull;
    return 0;
}

uint8_t schema_types(element schema, int depth = 0) {
    if (depth > 8 || !schema.is_object()) return 0;
    element type;
    if (!schema["type"].get(type)) {
        if (type.is_string()) return type_bit(type.get_string().value_unsafe());
        uint8_t bits = 0;
        if (type.is_array())
            for (element t : simdjson::dom::array(type.get_array().value_unsafe()))
                if (t.is_string()) bits |= type_bit(t.get_string().value_unsafe());
        return bits;
    }
    uint8_t bits = 0;
    for (const char* key : {"anyOf", "oneOf"}) {
        element alts;
        if (!schema[key].get(alts) && alts.is_array())
            for (element alt : simdjson::dom::array(alts.get_array().value_unsafe())) bits |= schema_types(alt, depth + 1);
    }
    element values;
    if (!bits && !schema["enum"].get(values) && values.is_array())
        for (element v : simdjson::dom::array(values.get_array().value_unsafe()))
            bits |= v.is_string() ? kParamString : v.is_bool() ? kParamBoolean : v.is_null() ? kParamNull
                  : v.is_int64() || v.is_uint64() ? kParamInteger : v.is_number() ? kParamNumber : 0;
    return bits;
}

bool is_digits(std::string_view s, size_t& i) {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
}

// JSON number grammar; integer_only rejects fraction and exponent.
bool is_json_number(std::string_view s, bool integer_only) {
    size_t i = 0;
    if (i < s.size() && s[i] == '-') ++i;
    if (i < s.size() && s[i] == '0') ++i;
    else if (i >= s.size() || s[i] < '1' || s[i] > '9' || !is_digits(s, i)) return false;
    if (integer_only) return i == s.size();
    if (i < s.size() && s[i] == '.' && !is_digits(s, ++i)) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
        if (!is_digits(s, i)) return false;
    }
    return i == s.size();
}

std::string_view trim_ascii(std::string_view s) {
    auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
    while (!s.empty() && ws(s.front())) s.remove_prefix(1);
    while (!s.empty() && ws(s.back())) s.remove_suffix(1);
    return s;
}

} // namespace

void append_json_string_body(std::string& out, std::string_view bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : bytes) {
        const auto u = static_cast<unsigned char>(c);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
            if (u < 0x20) {
                out += "\\u00";
                out += kHex[u >> 4];
                out += kHex[u & 15];
            } else {
                out += c;
            }
        }
    }
}

std::string json_string_of(std::string_view bytes) {
    std::string out = "\"";
    append_json_string_body(out, bytes);
    out += '"';
    return out;
}

uint8_t ToolSignature::param_types(std::string_view param) const {
    for (const ToolParam& p : params)
        if (p.name == param) return p.types;
    return 0;
}

std::vector<ToolSignature> tool_signatures_from_json(const std::vector<std::string>& tools_json) {
    std::vector<ToolSignature> out;
    simdjson::dom::parser parser;
    for (const std::string& text : tools_json) {
        element tool;
        if (parser.parse(text).get(tool) || !tool.is_object()) throw Error("output parser: a tool is not a JSON object");
        element function = tool;
        element wrapped;
        if (!tool["function"].get(wrapped) && wrapped.is_object()) function = wrapped;
        ToolSignature sig;
        std::string_view name;
        if (function["name"].get(name) || name.empty()) throw Error("output parser: a tool has no name");
        sig.name = std::string(name);
        element schema, props;
        if ((!function["parameters"].get(schema) || !function["input_schema"].get(schema)) &&
            !schema["properties"].get(props) && props.is_object())
            for (auto field : simdjson::dom::object(props.get_object().value_unsafe()))
                sig.params.push_back({std::string(field.key), schema_types(field.value)});
        out.push_back(std::move(sig));
    }
    return out;
}

std::string typed_param_json(std::string_view text, uint8_t types) {
    if (types == 0 || types == kParamString) return json_string_of(text);
    const std::string_view t = trim_ascii(text);
    if ((types & kParamNull) && (t == "null" || t == "None")) return "null";
    if (types & kParamBoolean) {
        if (t == "true" || t == "True") return "true";
        if (t == "false" || t == "False") return "false";
    }
    if ((types & kParamInteger) && is_json_number(t, true)) return std::string(t);
    if ((types & kParamNumber) && is_json_number(t, false)) return std::string(t);
    if (types & (kParamObject | kParamArray)) {
        simdjson::dom::parser parser;
        element value;
        if (!parser.parse(t.data(), t.size()).get(value) &&
            (((types & kParamObject) && value.is_object()) || ((types & kParamArray) && value.is_array())))
            return std::string(t);
    }
    return json_string_of(text);
}

} // namespace ninfer::core
