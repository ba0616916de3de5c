// ninfer::daemon - structured-output members of a request body -> ChatRequest::output_format.
#include "daemon/request_json.h"

namespace ninfer::daemon::request_json {

using simdjson::dom::element;
using simdjson::dom::object;

namespace {

void set_format(ChatRequest& r, OutputFormat::Kind kind, std::string source, const std::string& param) {
    if (r.output_format.kind != OutputFormat::Kind::Text && kind != OutputFormat::Kind::Text)
        fail(param, "'" + param + "' and '" + r.output_format.param +
                        "' both constrain the output: give one of them", "");
    if (kind == OutputFormat::Kind::Text) return;
    r.output_format = {kind, std::move(source), param};
}

std::string schema_of(element e, const std::string& param) {
    if (!e.is_object() && !e.is_bool()) fail(param, "'" + param + "' must be a JSON schema (an object)", "");
    return simdjson::minify(e);
}

// The format object of response_format (chat: the schema under json_schema) and of the
// Responses API's text.format (the schema beside the type).
void parse_format(element format, const std::string& param, bool schema_nested, ChatRequest& r) {
    if (!format.is_object()) fail(param, "'" + param + "' must be an object with a 'type'", "");
    const std::string type = string_of(format["type"], param + ".type");
    if (type == "text") return;
    if (type == "json_object") return set_format(r, OutputFormat::Kind::JsonObject, "", param);
    if (type != "json_schema")
        fail(param, param + " type '" + type + "' is not supported (text, json_object or json_schema)",
             "response_format_not_supported");
    element holder = format;
    std::string at = param;
    if (schema_nested) {
        at = param + ".json_schema";
        holder = required(format["json_schema"], at);
        if (!holder.is_object()) fail(at, "'" + at + "' must be an object {name, schema, strict}", "");
    }
    element e;
    if (!holder["strict"].get(e) && !e.is_null()) bool_of(e, at + ".strict"); // enforced either way
    if (!holder["name"].get(e) && !e.is_null()) string_of(e, at + ".name");
    set_format(r, OutputFormat::Kind::JsonSchema, schema_of(required(holder["schema"], at + ".schema"), at + ".schema"),
               at + ".schema");
}

} // namespace

void parse_output_format(object body, ChatRequest& r) {
    element e;
    if (!body["response_format"].get(e) && !e.is_null()) parse_format(e, "response_format", true, r);
    if (!body["json_schema"].get(e) && !e.is_null())
        set_format(r, OutputFormat::Kind::JsonSchema, schema_of(e, "json_schema"), "json_schema");
    if (!body["grammar"].get(e) && !e.is_null()) {
        std::string text = string_of(e, "grammar");
        if (!text.empty()) set_format(r, OutputFormat::Kind::Gbnf, std::move(text), "grammar");
    }
}

void parse_text_format(element format, ChatRequest& r) { parse_format(format, "text.format", false, r); }

} // namespace ninfer::daemon::request_json
