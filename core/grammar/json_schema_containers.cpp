// ninfer::core::grammar - JSON Schema to GBNF: objects (properties, maps) and arrays (items, tuples).
#include "core/grammar/json_schema_compiler.h"

#include "core/frontend/output_parser_json.h"

#include <algorithm>

namespace ninfer::core::grammar {

Gen SchemaCompiler::gen_object(element schema, const std::string& pointer) {
    element props, required_list, additional;
    const bool has_props = !schema["properties"].get(props);
    if (has_props && !props.is_object()) fail(pointer + "/properties", "must be an object");
    std::vector<std::string> required;
    if (!schema["required"].get(required_list)) {
        if (!required_list.is_array()) fail(pointer + "/required", "must be an array");
        for (element r : simdjson::dom::array(required_list)) {
            if (!r.is_string()) fail(pointer + "/required", "names must be strings");
            required.emplace_back(std::string_view(r));
        }
    }
    struct Prop { std::string key; Gen value; bool required; };
    std::vector<Prop> list;
    if (has_props)
        for (auto field : simdjson::dom::object(props)) {
            const std::string key(field.key);
            const bool req = std::find(required.begin(), required.end(), key) != required.end();
            list.push_back({key, gen(field.value, join_pointer(pointer + "/properties", key)), req});
        }
    for (const std::string& r : required) // required names without a declared schema: any value
        if (std::none_of(list.begin(), list.end(), [&](const Prop& p) { return p.key == r; }))
            list.push_back({r, common("json-value"), true});
    for (const Prop& p : list)
        if (p.required && !p.value) return std::nullopt;
    std::erase_if(list, [](const Prop& p) { return !p.value; });
    const int64_t min_props = count_keyword(schema, "minProperties", 0, pointer);
    const int64_t max_props = count_keyword(schema, "maxProperties", -1, pointer);
    const bool additional_false = !schema["additionalProperties"].get(additional) && additional.is_bool() && !bool(additional);
    if (list.empty() && !additional_false) {
        // A map: keys are free (no declared key to collide with); duplicate keys only lower the
        // count, so maxProperties bounds the pairs soundly, minProperties above 1 cannot be kept.
        if (min_props > 1) fail(pointer + "/minProperties", "minProperties above 1 is not supported for maps");
        Gen value = common("json-value");
        if (!schema["additionalProperties"].get(additional) && !additional.is_bool())
            value = gen(additional, pointer + "/additionalProperties");
        if (!value || max_props == 0) return min_props > 0 ? Gen() : Gen("\"{}\"");
        const std::string pair = shared(common("json-string") + " " + tok(':') + " " + *value, pointer + "/pair");
        const std::string more = max_props < 0 ? "(" + tok(',') + " " + pair + ")*" : "(" + tok(',') + " " + pair + "){0," + std::to_string(max_props - 1) + "}";
        const std::string inner = pair + " " + more;
        return tok('{') + " " + (min_props > 0 ? inner : opt(inner)) + " " + tok('}');
    }
    // Declared properties in order; extra properties are never generated (sound whatever
    // additionalProperties says). after[i] / first[i]: the properties from i on when one came
    // before (each takes a leading comma) / when none did.
    const int64_t n_required = std::count_if(list.begin(), list.end(), [](const Prop& p) { return p.required; });
    if (min_props > n_required) fail(pointer + "/minProperties", "minProperties above the number of required properties");
    if (max_props >= 0 && max_props < int64_t(list.size())) fail(pointer + "/maxProperties", "maxProperties below the number of properties");
    std::vector<std::string> after(list.size() + 1), first(list.size() + 1);
    auto then = [](const std::string& head, const std::string& rest) { return rest.empty() ? head : head + " " + rest; };
    for (size_t i = list.size(); i-- > 0;) {
        const std::string kv = gbnf_literal(json_string_of(list[i].key)) + " " + tok(':') + " " + shared(*list[i].value, join_pointer(pointer + "/properties", list[i].key));
        std::string body_after = then(tok(',') + " " + kv, after[i + 1]);
        std::string body_first = then(kv, after[i + 1]);
        if (!list[i].required) {
            body_after += " | " + (after[i + 1].empty() ? std::string("\"\"") : after[i + 1]);
            body_first += " | " + (first[i + 1].empty() ? std::string("\"\"") : first[i + 1]);
        }
        after[i] = new_rule_name(pointer + "/a" + std::to_string(i));
        define(after[i], body_after);
        first[i] = new_rule_name(pointer + "/f" + std::to_string(i));
        define(first[i], body_first);
    }
    return tok('{') + " " + then(first[0], tok('}'));
}

Gen SchemaCompiler::gen_array(element schema, const std::string& pointer) {
    const int64_t min_items = count_keyword(schema, "minItems", 0, pointer);
    const int64_t max_items = count_keyword(schema, "maxItems", -1, pointer);
    std::vector<Gen> prefix;
    Gen rest = common("json-value");
    element items, extra;
    const bool has_prefix = !schema["prefixItems"].get(items);
    if (has_prefix || (!schema["items"].get(items) && items.is_array())) {
        const std::string key = has_prefix ? "/prefixItems/" : "/items/";
        size_t i = 0;
        for (element item : simdjson::dom::array(items)) prefix.push_back(gen(item, pointer + key + std::to_string(i++)));
        const char* rest_key = has_prefix ? "items" : "additionalItems";
        if (!schema[rest_key].get(extra)) rest = gen(extra, pointer + "/" + rest_key);
    } else if (!schema["items"].get(items)) {
        rest = gen(items, pointer + "/items");
    }
    if (rest) rest = shared(*rest, pointer + "/items");
    const int64_t n_prefix = int64_t(prefix.size());
    // Elements from index i on, i > 0 meaning a comma goes first.
    std::string tail;
    const int64_t limit = max_items < 0 ? INT64_MAX : max_items;
    if (rest && limit > n_prefix) {
        const std::string item = (n_prefix > 0 ? tok(',') + " " : "") + *rest;
        const int64_t need = std::max<int64_t>(0, min_items - n_prefix);
        if (n_prefix == 0) {
            const std::string comma = " (" + tok(',') + " ";
            if (limit == INT64_MAX) tail = need > 0 ? *rest + comma + *rest + "){" + std::to_string(need - 1) + ",}"
                                                : opt(*rest + comma + *rest + ")*");
            else tail = need > 0 ? *rest + comma + *rest + "){" + std::to_string(need - 1) + "," + std::to_string(limit - 1) + "}"
                                 : opt(*rest + comma + *rest + "){0," + std::to_string(limit - 1) + "}");
        } else {
            tail = "(" + item + "){" + std::to_string(need) + "," + (limit == INT64_MAX ? std::string() : std::to_string(limit - n_prefix)) + "}";
        }
    } else if (min_items > n_prefix) {
        return std::nullopt; // more items needed than the schema allows
    }
    for (int64_t i = std::min(n_prefix, limit); i-- > 0;) {
        if (!prefix[size_t(i)]) { // this element cannot exist: the array stops before it
            if (i < min_items) return std::nullopt;
            tail.clear();
            continue;
        }
        const std::string elem = (i > 0 ? tok(',') + " " : "") + *prefix[size_t(i)] + (tail.empty() ? "" : " " + tail);
        tail = i < min_items ? elem : opt(elem);
    }
    if (n_prefix > limit && min_items > limit) return std::nullopt;
    return tok('[') + " " + (tail.empty() ? std::string() : tail + " ") + tok(']');
}

} // namespace ninfer::core::grammar
