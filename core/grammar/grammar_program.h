// ninfer::core::grammar - the grammar IR: rules as expressions (what readers build) and the lowered
// program (what matchers walk).
//
// Contract:
// - Rules: a list of RuleDef {name, body}; rule 0 is the start rule. Expressions are byte
//   literals, code-point classes (UTF-8 encoded when lowered), `any` (one UTF-8 character),
//   references to rules by index, sequences, alternatives and repetitions {min,max}
//   (max = kUnbounded for * and +).
// - lower(rules, limits, what) flattens them into a Program whose every alternative is a sequence
//   of byte-set elements and rule references ended by an End element; nested alternatives,
//   repetitions and multi-byte classes become helper rules. It throws ninfer::Error
//   "grammar: <what>: ..." when a limit is hit (max_rules, max_states, max_compile_time), when a
//   rule is left-recursive (a rule reachable from itself without consuming a byte: the matcher
//   expands rules depth-first), or when the start rule derives no finite string. Alternatives that
//   can never finish (they reach only non-terminating rules) are removed, so a matcher never walks
//   into a dead end it cannot leave.
// - Program positions: elements[pos] is a ByteSet (payload = index into byte_sets), a RuleRef
//   (payload = rule) or End. A rule's alternatives start at alt_starts[rule_alts[r] ..
//   rule_alts[r+1]).
#pragma once

#include "core/grammar/grammar.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::core::grammar {

inline constexpr uint32_t kUnbounded = UINT32_MAX;

struct Expr {
    enum class Kind : uint8_t { Bytes, Class, Any, Ref, Seq, Alt, Repeat };
    Kind kind = Kind::Seq;
    std::string bytes;                                // Bytes
    std::vector<std::pair<uint32_t, uint32_t>> ranges; // Class: inclusive code-point ranges
    bool negated = false;                             // Class
    uint32_t rule = 0;                                // Ref
    uint32_t min = 0, max = 0;                        // Repeat
    std::vector<Expr> items;                          // Seq, Alt; Repeat: items[0]

    static Expr literal(std::string b) { Expr e; e.kind = Kind::Bytes; e.bytes = std::move(b); return e; }
    static Expr ref(uint32_t r) { Expr e; e.kind = Kind::Ref; e.rule = r; return e; }
    static Expr any() { Expr e; e.kind = Kind::Any; return e; }
    static Expr seq(std::vector<Expr> v) { Expr e; e.kind = Kind::Seq; e.items = std::move(v); return e; }
    static Expr alt(std::vector<Expr> v) { Expr e; e.kind = Kind::Alt; e.items = std::move(v); return e; }
    static Expr repeat(Expr x, uint32_t mn, uint32_t mx) {
        Expr e; e.kind = Kind::Repeat; e.min = mn; e.max = mx; e.items.push_back(std::move(x)); return e;
    }
};

struct RuleDef {
    std::string name;
    Expr body;
};

struct ByteSet {
    std::array<uint64_t, 4> bits{};
    bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
    void add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
    void add_range(uint8_t lo, uint8_t hi) { for (unsigned b = lo; b <= hi; ++b) add(uint8_t(b)); }
    bool operator==(const ByteSet&) const = default;
};

struct Program {
    enum ElementKind : uint32_t { kByteSet = 0, kRuleRef = 1u << 30, kEnd = 2u << 30 };
    static constexpr uint32_t kKindMask = 3u << 30;

    std::vector<uint32_t> elements;
    std::vector<ByteSet> byte_sets;
    std::vector<uint32_t> rule_alts;  // size n_rules + 1
    std::vector<uint32_t> alt_starts;
    std::vector<std::string> rule_names;
    uint32_t root = 0;

    uint32_t kind(uint32_t pos) const { return elements[pos] & kKindMask; }
    uint32_t payload(uint32_t pos) const { return elements[pos] & ~kKindMask; }
    const ByteSet& byte_set(uint32_t pos) const { return byte_sets[payload(pos)]; }
    size_t n_rules() const { return rule_alts.size() - 1; }
    size_t memory_bytes() const {
        return elements.size() * 4 + byte_sets.size() * sizeof(ByteSet) + alt_starts.size() * 4 + rule_alts.size() * 4;
    }
};

// A deadline for compilation; check() throws "grammar: <what>: compilation took longer than N ms".
class CompileClock {
  public:
    explicit CompileClock(const GrammarLimits& limits);
    void check(const std::string& what) const;

  private:
    std::chrono::steady_clock::time_point deadline_;
    std::chrono::milliseconds budget_;
};

Program lower(const std::vector<RuleDef>& rules, const GrammarLimits& limits, const CompileClock& clock);

// UTF-8 byte-sequence alternatives for a set of code points (surrogates excluded): each entry is
// one sequence of byte ranges. Exposed for tests.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(
    const std::vector<std::pair<uint32_t, uint32_t>>& ranges, bool negated);

// Rules from GBNF text (gbnf_reader.cpp); throws "grammar: gbnf line N: ...".
std::vector<RuleDef> read_gbnf(std::string_view text, const CompileClock& clock);

} // namespace ninfer::core::grammar
