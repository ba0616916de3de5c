// ninfer::core::grammar - tool-call grammars in the model's own syntax (Qwen XML, as core/frontend's
// output parser reads it back).
#include "core/grammar/json_schema_compiler.h"

#include "core/frontend/output_parser.h"
#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core::grammar {
namespace {

// What the output parser turns a parameter's text into (typed_param_json) as a schema type mask.
uint8_t parser_mask(uint8_t bits) {
    uint8_t m = 0;
    if (bits & kParamNull) m |= kTypeNull;
    if (bits & kParamBoolean) m |= kTypeBoolean;
    if (bits & kParamInteger) m |= kTypeInteger;
    if (bits & kParamNumber) m |= kTypeInteger | kTypeFraction;
    if (bits & kParamString) m |= kTypeString;
    if (bits & kParamArray) m |= kTypeArray;
    if (bits & kParamObject) m |= kTypeObject;
    return m;
}

class ToolGrammar {
  public:
    ToolGrammar(const GrammarLimits& limits, const CompileClock& clock) : compiler_(element(), limits, clock) {}

    // "<function=NAME>\n" params "</function>"
    std::string function(const ToolSpec& tool, size_t index) {
        const std::string where = "tool '" + tool.name + "'";
        if (tool.name.empty() || tool.name.find_first_of(">\n") != std::string::npos)
            throw Error("grammar: tool #" + std::to_string(index) + ": a tool name must be non-empty without '>' or newlines");
        std::string head = gbnf_literal("<function=" + tool.name + ">\n");
        if (tool.parameters_schema_json.empty()) return head + " " + gbnf_literal("</function>");
        docs_.emplace_back(tool.parameters_schema_json);
        element schema;
        if (parser_.parse(docs_.back()).get(schema) || !schema.is_object())
            throw Error("grammar: " + where + ": parameters are not a JSON object schema");
        const std::string pointer = "/tools/" + std::to_string(index) + "/parameters";
        element props;
        std::vector<std::string> names;
        if (!schema["properties"].get(props) && props.is_object())
            for (auto field : simdjson::dom::object(props)) names.emplace_back(field.key);
        if (!tool.strict) {
            std::string any_name;
            for (const std::string& n : names) any_name += (any_name.empty() ? "" : " | ") + gbnf_literal(n);
            if (any_name.empty()) any_name = "[a-zA-Z0-9_.-]+";
            return head + " (" + gbnf_literal("<parameter=") + " (" + any_name + ") " + gbnf_literal(">\n") + " " +
                   compiler_.common("raw-text") + " " + gbnf_literal("\n</parameter>\n") + ")* " + gbnf_literal("</function>");
        }
        compiler_.set_root(schema);
        // The output parser's own reading of each parameter's type decides the value's form.
        const ToolSignature signature = tool_signatures_from_json({"{\"name\":\"x\",\"parameters\":" + tool.parameters_schema_json + "}"})[0];
        std::vector<std::string> required;
        element list;
        if (!schema["required"].get(list) && list.is_array())
            for (element r : simdjson::dom::array(list))
                if (r.is_string()) required.emplace_back(std::string_view(r));
        for (const std::string& r : required)
            if (std::find(names.begin(), names.end(), r) == names.end())
                throw Error("grammar: " + pointer + "/required: '" + r + "' has no schema under properties");
        std::string body;
        for (const std::string& name : names) {
            element value_schema = simdjson::dom::object(props)[name];
            const Gen value = param_value(value_schema, signature.param_types(name), pointer + "/properties/" + name);
            const bool is_required = std::find(required.begin(), required.end(), name) != required.end();
            if (!value) {
                if (is_required) throw Error("grammar: " + pointer + "/properties/" + name + ": a required parameter accepts no value");
                continue;
            }
            const std::string part = gbnf_literal("<parameter=" + name + ">\n") + " " + *value + " " + gbnf_literal("\n</parameter>\n");
            body += (is_required ? part : "(" + part + ")?") + " ";
        }
        return head + " " + body + gbnf_literal("</function>");
    }

    std::string rules() const { return compiler_.rules_text(); }
    std::string common(const std::string& name) { return compiler_.common(name); }

  private:
    Gen param_value(element schema, uint8_t parser_bits, const std::string& pointer) {
        const uint8_t typed = parser_bits == 0 ? uint8_t(kTypeString) : parser_mask(parser_bits);
        const uint8_t mask = schema_type_mask(schema);
        if (typed & kTypeString) {
            if (typed & ~(kTypeString | kTypeNull))
                throw Error("grammar: " + pointer + ": a parameter typed both as a string and as another non-null type is not supported");
            if ((mask & kTypeString) == 0) throw Error("grammar: " + pointer + ": the output parser reads this parameter as a string but the schema allows no string");
            std::string raw = raw_string(schema, pointer);
            return (typed & kTypeNull) ? "(\"null\" | " + raw + ")" : raw;
        }
        if (mask & ~typed) throw Error("grammar: " + pointer + ": the schema allows types the output parser would read as a string");
        return compiler_.gen(schema, pointer);
    }

    // The raw text of a string parameter: enum/const strings literally, else the string body.
    std::string raw_string(element schema, const std::string& pointer) {
        element values;
        std::vector<std::string> literals;
        if (!schema["const"].get(values) && values.is_string()) literals.emplace_back(std::string_view(values));
        if (!schema["enum"].get(values) && values.is_array())
            for (element v : simdjson::dom::array(values))
                if (v.is_string()) literals.emplace_back(std::string_view(v));
        if (!literals.empty()) {
            std::string out;
            for (const std::string& l : literals) {
                if (l.find("</parameter>") != std::string::npos) throw Error("grammar: " + pointer + ": an enum value contains </parameter>");
                out += (out.empty() ? "" : " | ") + gbnf_literal(l);
            }
            return "(" + out + ")";
        }
        for (const char* key : {"anyOf", "oneOf", "allOf", "$ref"}) {
            element unused;
            if (!schema[key].get(unused)) throw Error("grammar: " + pointer + ": '" + key + "' in a string parameter is not supported");
        }
        return "(" + compiler_.gen_string_body(schema, pointer, true) + ")";
    }

    simdjson::dom::parser parser_; // one tool at a time: each parse replaces the previous document
    SchemaCompiler compiler_;
    std::vector<simdjson::padded_string> docs_;
};

} // namespace

std::string tool_calls_to_gbnf(const std::vector<ToolSpec>& tools, const ToolChoice& choice, const GrammarLimits& limits) {
    const CompileClock clock(limits);
    ToolGrammar grammar(limits, clock);
    std::string functions;
    for (size_t i = 0; i < tools.size(); ++i) {
        if (choice.kind == ToolChoice::Kind::Named && tools[i].name != choice.name) continue;
        functions += (functions.empty() ? "" : " | ") + grammar.function(tools[i], i);
    }
    if (functions.empty())
        throw Error(choice.kind == ToolChoice::Kind::Named ? "grammar: tool_choice names '" + choice.name + "', which is not among the tools"
                                                           : "grammar: no tools to call");
    std::string out = "root ::= ";
    const std::string calls = "tool-call ( \"\\n\" tool-call )*";
    if (choice.kind == ToolChoice::Kind::Auto) out += "free-text ( " + calls + " )?\n";
    else out += calls + "\n";
    out += "tool-call ::= " + gbnf_literal("<tool_call>\n") + " ( " + functions + " ) " + gbnf_literal("\n</tool_call>") + "\n";
    if (choice.kind == ToolChoice::Kind::Auto) { // text never containing "<tool_call>"
        const std::string s = "<tool_call>";
        out += "free-text ::= [^<] free-text | \"<\" free-1 | \"\"\n";
        for (size_t k = 1; k < s.size(); ++k) {
            const std::string next = k + 1 < s.size() ? gbnf_literal(std::string(1, s[k])) + " free-" + std::to_string(k + 1) + " | " : "";
            out += "free-" + std::to_string(k) + " ::= " + next + "\"<\" free-1 | [^<" + std::string(1, s[k]) + "] free-text | \"\"\n";
        }
    }
    return out + grammar.rules();
}

} // namespace ninfer::core::grammar
