// ninfer::daemon - request JSON helpers shared by the Responses, Anthropic and completions parsers.
#include "daemon/request_json.h"

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

void parse_flat_tools(simdjson::dom::element tools, std::string_view schema_key, ChatRequest& r,
                      const std::function<void(simdjson::dom::element tool)>& check_type) {
    if (tools.is_null()) return;
    if (!tools.is_array()) fail("tools", "'tools' must be an array", "");
    core::JsonWriter w;
    w.begin_array();
    size_t k = 0;
    for (simdjson::dom::element t : tools.get_array()) {
        std::string p = "tools[" + std::to_string(k++) + "]";
        if (!t.is_object()) fail(p, "each tool must be an object", "");
        check_type(t);
        w.begin_object().member("type", "function").key("function").begin_object();
        w.member("name", tool_name_of(t["name"], p + ".name"));
        simdjson::dom::element e;
        if (!t["description"].get(e) && !e.is_null()) w.member("description", string_of(e, p + ".description"));
        if (!t[schema_key].get(e) && e.is_object()) w.key("parameters").raw(simdjson::minify(e));
        w.end_object().end_object();
    }
    w.end_array();
    simdjson::dom::parser parser;
    simdjson::padded_string converted(w.take());
    parse_tools(parser.parse(converted).value(), r);
}

} // namespace ninfer::daemon::request_json
