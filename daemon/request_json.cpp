// ninfer::daemon - request JSON helpers shared by the Responses, Anthropic and completions parsers.
#include "daemon/request_json.h"

#include "core/media/media_source.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

namespace ninfer::daemon::request_json {

simdjson::dom::object parse_json_object(simdjson::dom::parser& parser, const simdjson::padded_string& body) {
    simdjson::dom::element root;
    if (auto error = parser.parse(body).get(root))
        fail("", std::string("request body is not valid JSON: ") + simdjson::error_message(error), "");
    if (!root.is_object()) fail("", "request body must be a JSON object", "");
    return root.get_object();
}

uint32_t positive_count(simdjson::dom::element e, const std::string& param) {
    int64_t n = integer_of(e, param);
    if (n < 1 || n > INT32_MAX) fail(param, "'" + param + "' must be between 1 and " + std::to_string(INT32_MAX), "");
    return uint32_t(n);
}

core::ContentPart media_part(core::ContentPart::Kind kind, std::string url, const std::string& param) {
    try {
        core::media_url_check(url);
    } catch (const Error& e) {
        fail(param, e.what(), "invalid_media_url");
    }
    return {kind, {}, std::move(url)};
}

namespace {

struct FlatTools {
    std::string_view schema_key;
    const std::function<bool(simdjson::dom::element tool)>& is_callable;
    core::JsonWriter& out;
    ChatRequest& r;
};

// "type" or "type:name", as the x-ninfer-ignored-tools header lists a dropped tool.
std::string ignored_name(simdjson::dom::element t, const std::string& type) {
    std::string_view name;
    return t["name"].get(name) ? type : type + ":" + std::string(name);
}

void add_flat_tools(simdjson::dom::element tools, const std::string& param, FlatTools& f) {
    if (!tools.is_array()) fail(param, "'" + param + "' must be an array", "");
    size_t k = 0;
    for (simdjson::dom::element t : tools.get_array()) {
        std::string p = param + "[" + std::to_string(k++) + "]";
        if (!t.is_object()) fail(p, "each tool must be an object", "");
        simdjson::dom::element e;
        std::string type = t["type"].get(e) || e.is_null() ? "" : string_of(e, p + ".type");
        if (type == "namespace") { // Codex groups MCP tools: its functions are the model's tools
            add_flat_tools(required(t["tools"], p + ".tools"), p + ".tools", f);
            continue;
        }
        if (!f.is_callable(t)) {
            f.r.ignored_tools.push_back(ignored_name(t, type));
            continue;
        }
        f.out.begin_object().member("type", "function").key("function").begin_object();
        f.out.member("name", tool_name_of(t["name"], p + ".name"));
        if (!t["description"].get(e) && !e.is_null()) f.out.member("description", string_of(e, p + ".description"));
        if (!t[f.schema_key].get(e) && e.is_object()) f.out.key("parameters").raw(simdjson::minify(e));
        if (!t["strict"].get(e) && e.is_bool()) f.out.member("strict", bool(e));
        f.out.end_object().end_object();
    }
}

} // namespace

void parse_flat_tools(simdjson::dom::element tools, std::string_view schema_key, ChatRequest& r,
                      const std::function<bool(simdjson::dom::element tool)>& is_callable) {
    if (tools.is_null()) return;
    core::JsonWriter w;
    w.begin_array();
    FlatTools flat{schema_key, is_callable, w, r};
    add_flat_tools(tools, "tools", flat);
    w.end_array();
    simdjson::dom::parser parser;
    simdjson::padded_string converted(w.take());
    parse_tools(parser.parse(converted).value(), r);
}

} // namespace ninfer::daemon::request_json
