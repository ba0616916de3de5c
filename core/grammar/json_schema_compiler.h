// ninfer::core::grammar - internal: the JSON Schema to GBNF compiler's state, shared by its files
// (json_schema.cpp: dispatch, anyOf/oneOf, references; json_schema_containers.cpp: objects and
// arrays; json_schema_values.cpp: strings, numbers, formats, literals; json_schema_regex.cpp:
// patterns; tool_calls.cpp uses it for parameter values).
//
// Contract: gen(schema, pointer) returns a GBNF expression matching compact JSON texts that
// validate against the schema, or nullopt when no value can (the schema `false`). Rules it needs
// are appended to rules_ (one "name ::= body" line each) and shared by name. Unsupported
// constructs throw ninfer::Error("grammar: <pointer>: ...").
#pragma once

#include "core/grammar/grammar_program.h"

#include <simdjson.h>

#include <map>
#include <optional>
#include <set>
#include <string>

namespace ninfer::core::grammar {

using simdjson::dom::element;
using Gen = std::optional<std::string>;

// The GBNF literal for some bytes: "..." with \", \\ and control characters escaped.
std::string gbnf_literal(std::string_view bytes);
// Alternatives of literal strings factored by common prefixes (a trie, split at UTF-8 character
// boundaries), so a matcher follows one path instead of one stack per value. texts: sorted, unique.
std::string literal_trie(const std::vector<std::string>& texts);
// pointer + "/" + key with ~ and / escaped (RFC 6901).
inline std::string join_pointer(const std::string& pointer, std::string_view key) {
    std::string out = pointer + "/";
    for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
    return out;
}
inline std::string opt(const std::string& body) { return "(" + body + ")?"; } // GBNF optional group
// The compact JSON text of a value (simdjson minify).
std::string json_text(element value);

class SchemaCompiler {
  public:
    SchemaCompiler(element root, const GrammarLimits& limits, const CompileClock& clock)
        : root_(root), limits_(limits), clock_(clock) {}
    std::string compile();
    // For several schemas in one grammar (tool calls): switch the document $refs resolve in, and
    // read the rules defined so far.
    void set_root(element root) { root_ = root; refs_.clear(); }
    const std::string& rules_text() const { return rules_; }

    // json_schema.cpp
    Gen gen(element schema, const std::string& pointer);
    // json_schema_values.cpp
    std::string gen_string(element schema, const std::string& pointer);
    Gen gen_integer(element schema, const std::string& pointer);
    Gen gen_number(element schema, const std::string& pointer);
    // A string's content without the quotes, raw (no JSON escapes: tool-call parameters) when raw.
    std::string gen_string_body(element schema, const std::string& pointer, bool raw);
    // A JSON Schema `pattern` as GBNF over the string's content (json_schema_regex.cpp).
    std::string regex_to_gbnf(std::string_view pattern, const std::string& pointer, bool raw);
    // Common rules by name (json-value, json-string, ...), defined on first use.
    std::string common(const std::string& name);
    // A structural JSON token with the whitespace allowed around it ({ [ after, } ] before, , :
    // both sides; nothing when limits.max_json_whitespace is 0).
    std::string tok(char c);
    // A fresh rule name from a pointer; define(name, body) appends the rule.
    std::string new_rule_name(const std::string& pointer);
    void define(const std::string& name, const std::string& body);
    // An expression that will be written more than once: long ones become a rule (its name is
    // returned), so nested schemas grow the grammar linearly, not exponentially.
    std::string shared(const std::string& expr, const std::string& pointer);
    [[noreturn]] void fail(const std::string& pointer, const std::string& why) const;
    // A non-negative integer keyword (minLength, maxItems, ...), or fallback when absent.
    int64_t count_keyword(element schema, const char* key, int64_t fallback, const std::string& pointer) const;

  private:
    Gen gen_typed(element schema, const std::string& pointer, const std::string& type);
    Gen gen_object(element schema, const std::string& pointer);
    Gen gen_array(element schema, const std::string& pointer);
    Gen gen_ref(std::string_view ref, const std::string& pointer);
    Gen gen_enum(element schema, const std::string& pointer);
    Gen gen_alternatives(element schema, const std::string& pointer, const char* key);
    void check_keywords(element schema, const std::string& pointer);
    std::optional<element> resolve_pointer(std::string_view ref) const; // "#/a/b" in root_
    element resolved(element schema) const;                             // follows $ref chains
    bool branches_disjoint(element a, element b) const;

    element root_;
    const GrammarLimits& limits_;
    const CompileClock& clock_;
    std::string rules_;
    std::set<std::string> names_;
    std::set<std::string> defined_common_;
    std::map<std::string, Gen> refs_; // resolved pointer -> rule name (nullopt: false schema)
    size_t n_gen_ = 0;
};

// The JSON types a schema can produce, as a bitmask over {null, boolean, integer, number, string,
// array, object} (number includes integers); all bits when unknown. For the oneOf check.
enum : uint8_t { kTypeNull = 1, kTypeBoolean = 2, kTypeInteger = 4, kTypeFraction = 8, kTypeString = 16, kTypeArray = 32, kTypeObject = 64 };
uint8_t schema_type_mask(element schema);
uint8_t value_type_mask(element value);

} // namespace ninfer::core::grammar
