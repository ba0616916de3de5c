// ninfer::daemon - request -> grammar (structured output or tool calls) -> the engine's ConstraintSpec.
#include "daemon/output_constraint.h"

#include "core/engine/grammar_constraint.h"
#include "daemon/api_error.h"

#include <simdjson.h>

#include <cctype>

namespace ninfer::daemon {
namespace {

using core::grammar::Grammar;
using core::grammar::GrammarKind;

struct ToolsOfRequest {
    std::vector<core::grammar::ToolSpec> specs;
    bool any_strict = false;
};

// The function tools as the request holds them (OpenAI-shaped JSON, validated by the parser).
ToolsOfRequest tools_of(const ChatRequest& request) {
    ToolsOfRequest out;
    simdjson::dom::parser parser;
    for (const std::string& json : request.conversation.tools_json) {
        simdjson::dom::element tool, fn, e;
        core::grammar::ToolSpec spec; // one per tool, in order: the compiler's errors count them
        spec.strict = request.force_tool_schemas;
        if (!parser.parse(json).get(tool) && !tool["function"].get(fn) && fn.is_object()) {
            std::string_view name;
            if (!fn["name"].get(name)) spec.name = std::string(name);
            if (!fn["parameters"].get(e) && e.is_object()) spec.parameters_schema_json = simdjson::minify(e);
            if (!fn["strict"].get(e) && e.is_bool() && bool(e)) spec.strict = true;
        }
        out.any_strict = out.any_strict || spec.strict;
        out.specs.push_back(std::move(spec));
    }
    return out;
}

// The cache key of a tool grammar: the choice, then each tool's name, strictness and schema.
std::string tool_source(const std::vector<core::grammar::ToolSpec>& specs, const core::grammar::ToolChoice& choice) {
    std::string key = std::to_string(int(choice.kind)) + ":" + choice.name + "\n";
    for (const auto& t : specs) key += t.name + (t.strict ? "!" : "?") + t.parameters_schema_json + "\n";
    return key;
}

// The member a tool grammar's error names: the compiler's "/tools/N/parameters" pointer (N counts
// the tools as tools_of lists them: the request's function tools, in order), else "tools".
std::string tool_param(const std::string& message) {
    const size_t at = message.find("/tools/");
    if (at == std::string::npos) return "tools";
    size_t end = at + 7;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    if (end == at + 7) return "tools";
    return "tools[" + message.substr(at + 7, end - at - 7) + "].function.parameters";
}

std::shared_ptr<const Grammar> compile(core::grammar::GrammarCache& cache, GrammarKind kind, const std::string& source,
                                       const std::function<std::shared_ptr<const Grammar>()>& make,
                                       const std::string& param) {
    try {
        return cache.get_or_compile(kind, source, make);
    } catch (const std::exception& e) {
        throw ApiError{400, "invalid " + param + ": " + std::string(e.what()), "invalid_grammar", param, ""};
    }
}

} // namespace

std::optional<core::ConstraintSpec> compile_output_constraint(const ChatRequest& request, const ModelFrontend& frontend,
                                                              core::grammar::GrammarCache& cache, bool after_reasoning) {
    const bool tools_given = request.tool_choice != ToolChoice::None && !request.conversation.tools_json.empty();
    ToolsOfRequest tools = tools_given ? tools_of(request) : ToolsOfRequest{};
    const bool forced = request.tool_choice == ToolChoice::Required || request.tool_choice == ToolChoice::Named;
    const bool tool_grammar = tools_given && (forced || tools.any_strict);
    const OutputFormat& format = request.output_format;
    std::shared_ptr<const Grammar> grammar;
    if (tool_grammar) {
        if (!forced && format.kind != OutputFormat::Kind::Text)
            throw ApiError{400, "'" + format.param + "' and strict tools with tool_choice auto cannot both be "
                                "enforced on one reply: give one of them, or force the tool call with tool_choice",
                           "invalid_request", format.param, ""};
        core::grammar::ToolChoice choice;
        choice.kind = request.tool_choice == ToolChoice::Required ? core::grammar::ToolChoice::Kind::Required
                      : request.tool_choice == ToolChoice::Named  ? core::grammar::ToolChoice::Kind::Named
                                                                  : core::grammar::ToolChoice::Kind::Auto;
        if (request.tool_choice == ToolChoice::Named) choice.name = request.tool_choice_name;
        const std::string source = tool_source(tools.specs, choice);
        try {
            grammar = cache.get_or_compile(GrammarKind::ToolCalls, source,
                                           [&] { return Grammar::tool_calls(tools.specs, choice); });
        } catch (const std::exception& e) {
            const std::string param = tool_param(e.what());
            throw ApiError{400, "invalid " + param + ": " + std::string(e.what()), "invalid_grammar", param, ""};
        }
    } else if (format.kind == OutputFormat::Kind::JsonObject) {
        grammar = compile(cache, GrammarKind::JsonObject, "", [] { return Grammar::json_object(); }, format.param);
    } else if (format.kind == OutputFormat::Kind::JsonSchema) {
        grammar = compile(cache, GrammarKind::JsonSchema, format.source,
                          [&] { return Grammar::from_json_schema(format.source); }, format.param);
    } else if (format.kind == OutputFormat::Kind::Gbnf) {
        grammar = compile(cache, GrammarKind::Gbnf, format.source, [&] { return Grammar::from_gbnf(format.source); },
                          format.param);
    } else {
        return std::nullopt;
    }
    core::ReplyShape reply;
    try {
        reply = core::reply_shape(frontend.tokenizer(), after_reasoning, frontend.stop_token_ids());
    } catch (const Error& e) {
        throw ApiError{400, e.what(), "invalid_request", "", ""};
    }
    return core::grammar_constraint_spec(std::move(grammar), frontend.token_index(), std::move(reply));
}

} // namespace ninfer::daemon
