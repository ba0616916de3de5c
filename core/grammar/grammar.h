// ninfer::core::grammar - a compiled grammar: the byte language a constrained generation must stay in.
//
// Contract:
// - A Grammar is immutable once compiled and shared (shared_ptr<const Grammar>) by any number of
//   requests and threads. It holds the lowered program (grammar_program.h) the Matcher walks, and
//   a lazily filled per-tokenizer cache of token masks (token_masks.h), internally locked.
// - Factories (all throw ninfer::Error "grammar: <json pointer | gbnf line | rule name>: reason"
//   naming the unsupported construct or the bound that was hit; never crash on bad input):
//   from_gbnf(text)          llama.cpp GBNF (docs/GRAMMAR.md lists the accepted syntax); the
//                            start rule is `root`.
//   from_json_schema(schema) a JSON Schema (draft 7 / 2020-12 subset, docs/GRAMMAR.md) to compact
//                            JSON text (no whitespace between tokens, properties in declared
//                            order). Every string the grammar accepts validates against the
//                            schema (approximations only ever narrow the language).
//   json_object()            any JSON object (response_format json_object).
//   tool_calls(tools, choice) the model's own tool-call syntax (Qwen XML, as
//                            core/frontend/output_parser reads it):
//                            <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n
//                            </function>\n</tool_call>, calls separated by "\n". With strict, V is
//                            the parameter's schema in the form the output parser types it back
//                            (strings raw, other types JSON) and required parameters appear in
//                            declared order; without strict, declared parameter names in any order
//                            with free values. ToolChoice::Auto: free text (never containing
//                            "<tool_call>") then zero or more calls; Required: one or more calls;
//                            Named: exactly the calls of that one function (one or more).
// - GrammarLimits bound compilation: rules, program states (positions), and wall time; each is
//   checked while compiling and a hit throws "grammar: ...: more than N rules (max_rules)" etc.
// - gbnf() returns the GBNF text the grammar was compiled from (schemas and tool calls are
//   compiled through GBNF), for diagnostics and `ninferctl` output.
// Thread safety: all const members may be called concurrently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core::grammar {

struct GrammarLimits {
    size_t max_rules = 20000;    // rules after lowering (repetition and char classes add rules)
    size_t max_states = 400000;  // program positions (elements) after lowering
    std::chrono::milliseconds max_compile_time{2000};
    // JSON Schema / json_object grammars: whitespace (space, tab, newline) allowed around each
    // structural token ({ } [ ] , :), at most this many bytes per place; 0 = compact JSON.
    size_t max_json_whitespace = 0;
};

struct ToolSpec {
    std::string name;
    std::string parameters_schema_json; // JSON schema of the arguments object ("" = no parameters)
    bool strict = false;
};

struct ToolChoice {
    enum class Kind { Auto, Required, Named };
    Kind kind = Kind::Auto;
    std::string name; // Named only
};

struct Program;
class TokenMaskCache;
class TokenIndex;

class Grammar {
  public:
    static std::shared_ptr<const Grammar> from_gbnf(std::string_view text, const GrammarLimits& limits = {});
    static std::shared_ptr<const Grammar> from_json_schema(std::string_view schema_json,
                                                           const GrammarLimits& limits = {});
    static std::shared_ptr<const Grammar> json_object(const GrammarLimits& limits = {});
    static std::shared_ptr<const Grammar> tool_calls(const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                                                     const GrammarLimits& limits = {});

    ~Grammar();
    Grammar(const Grammar&) = delete;
    Grammar& operator=(const Grammar&) = delete;

    const Program& program() const { return *program_; }
    const std::string& gbnf() const { return gbnf_; }
    // The mask tables of this grammar over one tokenizer's vocabulary (created on first use).
    std::shared_ptr<TokenMaskCache> masks_for(const std::shared_ptr<const TokenIndex>& index) const;
    size_t memory_bytes() const; // program, source and the token tables computed so far

    struct Impl;

  private:
    Grammar(std::string gbnf, std::unique_ptr<Program> program);
    std::string gbnf_;
    std::unique_ptr<Program> program_;
    std::unique_ptr<Impl> impl_;
};

// The GBNF a JSON schema / tool set compiles to (what the factories above parse).
std::string json_schema_to_gbnf(std::string_view schema_json, const GrammarLimits& limits = {});
std::string tool_calls_to_gbnf(const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                               const GrammarLimits& limits = {});

} // namespace ninfer::core::grammar
