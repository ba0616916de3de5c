// ninfer::core::grammar - JSON Schema to GBNF: keyword dispatch, objects, arrays, anyOf/oneOf and $ref.
#include "core/grammar/json_schema_compiler.h"

#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core::grammar {
namespace {

// Standard keywords this compiler does not implement: refused, never silently ignored.
constexpr const char* kRefused[] = {
    "not", "if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas", "patternProperties",
    "propertyNames", "contains", "minContains", "maxContains", "multipleOf", "unevaluatedProperties",
    "unevaluatedItems", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"};

bool has(element schema, const char* key) {
    element unused;
    return !schema[key].get(unused);
}


} // namespace

void SchemaCompiler::fail(const std::string& pointer, const std::string& why) const {
    throw Error("grammar: " + (pointer.empty() ? std::string("/") : pointer) + ": " + why);
}

int64_t SchemaCompiler::count_keyword(element schema, const char* key, int64_t fallback, const std::string& pointer) const {
    element v;
    if (schema[key].get(v)) return fallback;
    double d = -1;
    if (v.is_int64()) d = double(int64_t(v));
    else if (v.is_uint64()) d = double(uint64_t(v));
    else if (v.is_double()) d = double(v);
    if (d < 0 || d != double(int64_t(d)) || d > 1e9) fail(pointer + "/" + key, "must be a non-negative integer (at most 1e9)");
    return int64_t(d);
}

std::string SchemaCompiler::new_rule_name(const std::string& pointer) {
    std::string base;
    for (char c : pointer) {
        const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        base += word ? c : '-';
    }
    while (base.find("--") != std::string::npos) base.erase(base.find("--"), 1);
    if (base.size() > 40) base = base.substr(base.size() - 40);
    base = "s" + base;
    std::string name = base;
    for (size_t n = 1; names_.count(name); ++n) name = base + "-" + std::to_string(n);
    names_.insert(name);
    if (names_.size() > limits_.max_rules) fail(pointer, "more than " + std::to_string(limits_.max_rules) + " rules (max_rules)");
    return name;
}

void SchemaCompiler::define(const std::string& name, const std::string& body) {
    rules_ += name + " ::= " + body + "\n";
    if (rules_.size() > limits_.max_states * 8) fail("", "grammar text over " + std::to_string(limits_.max_states * 8) + " bytes (max_states)");
}

std::string SchemaCompiler::tok(char c) {
    const std::string literal = gbnf_literal(std::string(1, c));
    if (limits_.max_json_whitespace == 0) return literal;
    if (defined_common_.insert("json-ws").second) {
        names_.insert("json-ws");
        define("json-ws", "[ \\t\\n]{0," + std::to_string(limits_.max_json_whitespace) + "}");
    }
    if (c == '{' || c == '[') return literal + " json-ws";
    if (c == '}' || c == ']') return "json-ws " + literal;
    return "json-ws " + literal + " json-ws";
}

std::string SchemaCompiler::shared(const std::string& expr, const std::string& pointer) {
    if (expr.size() <= 32) return expr;
    const std::string name = new_rule_name(pointer);
    define(name, expr);
    return name;
}

void SchemaCompiler::check_keywords(element schema, const std::string& pointer) {
    for (const char* key : kRefused)
        if (has(schema, key)) fail(pointer, std::string("unsupported keyword '") + key + "'");
    bool unique = false;
    if (!schema["uniqueItems"].get(unique) && unique) {
        int64_t max_items = -1;
        if (schema["maxItems"].get(max_items) || max_items > 1) fail(pointer, "unsupported keyword 'uniqueItems' (true)");
    }
    element all;
    if (!schema["allOf"].get(all) && (!all.is_array() || simdjson::dom::array(all).size() != 1))
        fail(pointer, "unsupported keyword 'allOf' (only a single subschema is supported)");
    std::string_view id;
    if (!pointer.empty() && !schema["$id"].get(id)) fail(pointer, "unsupported keyword '$id' below the root");
}

std::string SchemaCompiler::compile() {
    const Gen root = gen(root_, "");
    if (!root) fail("", "the schema accepts no value");
    return "root ::= " + *root + "\n" + rules_;
}

Gen SchemaCompiler::gen(element schema, const std::string& pointer) {
    if (++n_gen_ % 64 == 0) clock_.check(pointer.empty() ? "/" : pointer);
    if (schema.is_bool()) return bool(schema) ? Gen(common("json-value")) : std::nullopt;
    if (!schema.is_object()) fail(pointer, "a schema must be an object or a boolean");
    std::string_view ref;
    if (!schema["$ref"].get(ref)) return gen_ref(ref, pointer); // draft 7: siblings of $ref are ignored
    check_keywords(schema, pointer);
    element all;
    if (!schema["allOf"].get(all)) {
        for (const char* key : {"type", "properties", "items", "enum", "const", "anyOf", "oneOf", "minimum", "maximum",
                                "minLength", "maxLength", "pattern", "format", "required", "minItems", "maxItems"})
            if (has(schema, key)) fail(pointer, std::string("unsupported keyword 'allOf' beside '") + key + "'");
        return gen(simdjson::dom::array(all).at(0), pointer + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"})
        if (has(schema, key)) return gen_alternatives(schema, pointer, key);
    if (has(schema, "enum") || has(schema, "const")) return gen_enum(schema, pointer);
    element type;
    std::vector<std::string> types;
    if (!schema["type"].get(type)) {
        if (type.is_string()) types.emplace_back(std::string_view(type));
        else if (type.is_array())
            for (element t : simdjson::dom::array(type)) {
                if (!t.is_string()) fail(pointer + "/type", "type names must be strings");
                types.emplace_back(std::string_view(t));
            }
        else fail(pointer + "/type", "type must be a string or an array");
    } else {
        types = {"null", "boolean", "number", "string", "array", "object"};
    }
    if (std::find(types.begin(), types.end(), "number") != types.end()) std::erase(types, std::string("integer"));
    std::vector<std::string> alts;
    for (const std::string& t : types)
        if (Gen g = gen_typed(schema, pointer, t)) alts.push_back(*g);
    if (alts.empty()) return std::nullopt;
    if (alts.size() == 1) return alts[0];
    std::string body;
    for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
    return "(" + body + ")";
}

Gen SchemaCompiler::gen_typed(element schema, const std::string& pointer, const std::string& type) {
    if (type == "null") return "\"null\"";
    if (type == "boolean") return "(\"true\" | \"false\")";
    if (type == "integer") return gen_integer(schema, pointer);
    if (type == "number") return gen_number(schema, pointer);
    if (type == "string") return gen_string(schema, pointer);
    if (type == "array") return gen_array(schema, pointer);
    if (type == "object") return gen_object(schema, pointer);
    fail(pointer + "/type", "unknown type '" + type + "'");
}

// anyOf: any branch. oneOf: the same, only when no value can validate against two branches - the
// branches' possible JSON types must be disjoint (checked per branch), so a value matching one
// branch's grammar fails every other branch.
namespace {

// The const/enum strings a discriminating property allows; empty when it is not such a property.
std::set<std::string> discriminator_values(element property) {
    std::set<std::string> out;
    element v;
    if (!property.is_object()) return out;
    if (!property["const"].get(v)) {
        if (v.is_string()) out.insert(std::string(std::string_view(v)));
        return out;
    }
    if (!property["enum"].get(v) && v.is_array()) {
        for (element e : simdjson::dom::array(v)) {
            if (!e.is_string()) return {};
            out.insert(std::string(std::string_view(e)));
        }
    }
    return out;
}

} // namespace

// No value validates against both: their JSON types differ, or both are objects (type "object")
// requiring one property whose allowed strings (const/enum) do not meet.
bool SchemaCompiler::branches_disjoint(element a, element b) const {
    a = resolved(a);
    b = resolved(b);
    const uint8_t ma = schema_type_mask(a), mb = schema_type_mask(b);
    if ((ma & mb) == 0) return true;
    if (ma != kTypeObject || mb != kTypeObject) return false;
    element props_a, props_b, req_a, req_b;
    if (a["properties"].get(props_a) || b["properties"].get(props_b) || a["required"].get(req_a) || b["required"].get(req_b) ||
        !props_a.is_object() || !props_b.is_object() || !req_a.is_array() || !req_b.is_array())
        return false;
    for (element name_a : simdjson::dom::array(req_a)) {
        if (!name_a.is_string()) continue;
        const std::string_view name = name_a;
        bool in_b = false;
        for (element name_b : simdjson::dom::array(req_b)) in_b = in_b || (name_b.is_string() && std::string_view(name_b) == name);
        element pa, pb;
        if (!in_b || simdjson::dom::object(props_a)[name].get(pa) || simdjson::dom::object(props_b)[name].get(pb)) continue;
        const auto va = discriminator_values(resolved(pa)), vb = discriminator_values(resolved(pb));
        if (va.empty() || vb.empty()) continue;
        bool meet = false;
        for (const std::string& v : va) meet = meet || vb.count(v);
        if (!meet) return true;
    }
    return false;
}

Gen SchemaCompiler::gen_alternatives(element schema, const std::string& pointer, const char* key) {
    for (const char* sibling : {"type", "properties", "items", "enum", "const", "minimum", "maximum", "minLength",
                                "maxLength", "pattern", "format", "required", "minItems", "maxItems",
                                "additionalProperties", "anyOf", "oneOf"})
        if (std::string_view(sibling) != key && has(schema, sibling))
            fail(pointer, std::string("unsupported keyword '") + sibling + "' beside '" + key + "'");
    element branches;
    if (schema[key].get(branches) || !branches.is_array() || simdjson::dom::array(branches).size() == 0)
        fail(pointer + "/" + key, "must be a non-empty array");
    std::vector<std::string> alts;
    size_t i = 0;
    for (element branch : simdjson::dom::array(branches)) {
        const std::string at = pointer + "/" + key + "/" + std::to_string(i++);
        if (std::string_view(key) == "oneOf")
            for (size_t j = 0; j + 1 < i; ++j)
                if (!branches_disjoint(simdjson::dom::array(branches).at(j), branch))
                    fail(at, "oneOf branches that may overlap with branch " + std::to_string(j) +
                                 " (their JSON types must differ, or both be objects with a required property of different const/enum strings)");
        if (Gen g = gen(branch, at)) alts.push_back(*g);
    }
    if (alts.empty()) return std::nullopt;
    std::string body;
    for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
    return "(" + body + ")";
}

std::optional<element> SchemaCompiler::resolve_pointer(std::string_view ref) const {
    if (ref.empty() || ref[0] != '#') return std::nullopt;
    element target = root_;
    std::string_view rest = ref.substr(1);
    if (!rest.empty() && rest[0] != '/') return std::nullopt;
    auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
    while (!rest.empty()) {
        rest.remove_prefix(1);
        const size_t slash = std::min(rest.find('/'), rest.size());
        std::string token;
        for (size_t i = 0; i < slash; ++i) {
            if (rest[i] == '~' && i + 1 < slash) { token += rest[i + 1] == '1' ? '/' : '~'; ++i; }
            else if (rest[i] == '%' && i + 2 < slash && hex(rest[i + 1]) >= 0 && hex(rest[i + 2]) >= 0) {
                token += char(hex(rest[i + 1]) * 16 + hex(rest[i + 2]));
                i += 2;
            } else token += rest[i];
        }
        rest.remove_prefix(slash);
        element next;
        if (target.is_object() && !target[token].get(next)) target = next;
        else if (target.is_array() && !token.empty() && token.size() < 10 && std::all_of(token.begin(), token.end(), ::isdigit) &&
                 !simdjson::dom::array(target).at(std::stoul(token)).get(next)) target = next;
        else return std::nullopt;
    }
    return target;
}

element SchemaCompiler::resolved(element schema) const {
    std::string_view ref;
    for (int hops = 0; hops < 16 && schema.is_object() && !schema["$ref"].get(ref); ++hops) {
        const auto target = resolve_pointer(ref);
        if (!target) break;
        schema = *target;
    }
    return schema;
}

Gen SchemaCompiler::gen_ref(std::string_view ref, const std::string& pointer) {
    if (ref.empty() || ref[0] != '#') fail(pointer + "/$ref", "only local references (#/...) are supported: " + std::string(ref));
    const std::string key(ref);
    if (auto found = refs_.find(key); found != refs_.end()) return found->second;
    if (ref.size() > 1 && ref[1] != '/') fail(pointer + "/$ref", "anchor references are not supported: " + key);
    const auto target_found = resolve_pointer(ref);
    if (!target_found) fail(pointer + "/$ref", "reference target not found: " + key);
    const element target = *target_found;
    const std::string name = new_rule_name(std::string(ref.substr(1)));
    refs_[key] = name; // before the body: recursive references resolve to the rule
    const Gen body = gen(target, std::string(ref.substr(1)));
    if (!body) {
        refs_[key] = std::nullopt;
        return std::nullopt;
    }
    define(name, *body);
    return name;
}

Gen SchemaCompiler::gen_enum(element schema, const std::string& pointer) {
    for (const char* sibling : {"properties", "items", "minimum", "maximum", "minLength", "maxLength", "pattern",
                                "format", "required", "minItems", "maxItems"})
        if (has(schema, sibling)) fail(pointer, std::string("unsupported keyword '") + sibling + "' beside enum/const");
    std::vector<element> values;
    element value;
    if (!schema["const"].get(value)) values.push_back(value);
    else if (!schema["enum"].get(value) && value.is_array())
        for (element v : simdjson::dom::array(value)) values.push_back(v);
    else fail(pointer + "/enum", "must be an array");
    const uint8_t allowed = has(schema, "type") ? schema_type_mask(schema) : 0xFF;
    std::set<std::string> texts; // alternatives, deduplicated; only values of an allowed type
    for (element v : values) {
        if (value_type_mask(v) & allowed) texts.insert(json_text(v));
    }
    if (texts.empty()) return std::nullopt;
    return literal_trie({texts.begin(), texts.end()});
}

} // namespace ninfer::core::grammar
