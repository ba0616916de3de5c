// ninfer::core::grammar - lowering rule expressions into the flat program, with its checks.
#include "core/grammar/grammar_program.h"

#include "core/util/error.h"

#include <map>

namespace ninfer::core::grammar {
namespace {

using Seq = std::vector<uint32_t>;

class Lowerer {
  public:
    Lowerer(const std::vector<RuleDef>& defs, const GrammarLimits& limits, const CompileClock& clock)
        : defs_(defs), limits_(limits), clock_(clock) {
        for (const RuleDef& def : defs) new_rule(def.name);
    }

    Program run() {
        for (size_t r = 0; r < defs_.size(); ++r) {
            current_ = defs_[r].name;
            clock_.check("rule '" + current_ + "'");
            add_alternatives(uint32_t(r), defs_[r].body);
        }
        return build();
    }

  private:
    uint32_t new_rule(const std::string& name) {
        if (alts_.size() >= limits_.max_rules)
            throw Error("grammar: rule '" + current_ + "': more than " + std::to_string(limits_.max_rules) +
                        " rules (max_rules)");
        alts_.emplace_back();
        names_.push_back(name);
        return uint32_t(alts_.size() - 1);
    }
    uint32_t helper_rule() { return new_rule(current_ + "_" + std::to_string(alts_.size())); }

    void add_states(size_t n) {
        n_states_ += n;
        if (n_states_ > limits_.max_states)
            throw Error("grammar: rule '" + current_ + "': more than " + std::to_string(limits_.max_states) +
                        " states (max_states)");
    }

    void add_alt(uint32_t rule, Seq seq) {
        add_states(seq.size() + 1);
        alts_[rule].push_back(std::move(seq));
    }

    void add_alternatives(uint32_t rule, const Expr& body) {
        if (body.kind == Expr::Kind::Alt) {
            for (const Expr& item : body.items) {
                Seq seq;
                lower_into(item, seq);
                add_alt(rule, std::move(seq));
            }
            return;
        }
        Seq seq;
        lower_into(body, seq);
        add_alt(rule, std::move(seq));
    }

    uint32_t byte_set_element(const ByteSet& set) {
        auto [it, fresh] = byte_set_ids_.try_emplace(set.bits, uint32_t(byte_sets_.size()));
        if (fresh) byte_sets_.push_back(set);
        return Program::kByteSet | it->second;
    }

    void emit(Seq& seq, uint32_t element) {
        seq.push_back(element);
        if (seq.size() > limits_.max_states)
            throw Error("grammar: rule '" + current_ + "': more than " + std::to_string(limits_.max_states) +
                        " states (max_states)");
    }

    void lower_class(const Expr& e, Seq& seq) {
        auto seqs = utf8_sequences(e.ranges, e.negated || e.kind == Expr::Kind::Any);
        if (seqs.empty()) throw Error("grammar: rule '" + current_ + "': empty character class");
        bool single_byte = true;
        for (const auto& s : seqs) single_byte = single_byte && s.size() == 1;
        if (single_byte) {
            ByteSet set;
            for (const auto& s : seqs) set.add_range(s[0].first, s[0].second);
            emit(seq, byte_set_element(set));
            return;
        }
        // One alternative per distinct tail, the lead bytes of all sequences with that tail in
        // one byte set: the lead byte then decides the alternative (fewer stacks to carry).
        std::map<std::vector<std::pair<uint8_t, uint8_t>>, ByteSet> by_tail;
        for (const auto& s : seqs) by_tail[{s.begin() + 1, s.end()}].add_range(s[0].first, s[0].second);
        std::string key;
        for (const auto& [tail, lead] : by_tail) {
            for (uint64_t w : lead.bits) key.append(reinterpret_cast<const char*>(&w), sizeof w);
            for (auto [lo, hi] : tail) { key += char(lo); key += char(hi); }
            key += '|';
        }
        auto found = class_rules_.find(key);
        if (found == class_rules_.end()) {
            const uint32_t rule = helper_rule();
            for (const auto& [tail, lead] : by_tail) {
                Seq alt{byte_set_element(lead)};
                for (auto [lo, hi] : tail) {
                    ByteSet set;
                    set.add_range(lo, hi);
                    alt.push_back(byte_set_element(set));
                }
                add_alt(rule, std::move(alt));
            }
            found = class_rules_.emplace(key, rule).first;
        }
        emit(seq, Program::kRuleRef | found->second);
    }

    void lower_into(const Expr& e, Seq& seq) {
        switch (e.kind) {
        case Expr::Kind::Bytes:
            for (char c : e.bytes) {
                ByteSet set;
                set.add(uint8_t(c));
                emit(seq, byte_set_element(set));
            }
            return;
        case Expr::Kind::Class:
        case Expr::Kind::Any: lower_class(e, seq); return;
        case Expr::Kind::Ref: emit(seq, Program::kRuleRef | e.rule); return;
        case Expr::Kind::Seq:
            for (const Expr& item : e.items) lower_into(item, seq);
            return;
        case Expr::Kind::Alt: {
            if (e.items.size() == 1) return lower_into(e.items[0], seq);
            const uint32_t rule = helper_rule();
            add_alternatives(rule, e);
            emit(seq, Program::kRuleRef | rule);
            return;
        }
        case Expr::Kind::Repeat: lower_repeat(e, seq); return;
        }
    }

    void lower_repeat(const Expr& e, Seq& seq) {
        if (e.max == 0) return;
        Seq item;
        lower_into(e.items[0], item);
        if (item.size() > 2) { // repeat a reference, not the whole body
            const uint32_t rule = helper_rule();
            add_alt(rule, std::move(item));
            item = {Program::kRuleRef | rule};
        }
        for (uint32_t i = 0; i < e.min; ++i) {
            if (i % 1024 == 0) clock_.check("rule '" + current_ + "'");
            for (uint32_t element : item) emit(seq, element);
        }
        if (e.max == e.min) return;
        if (e.max == kUnbounded) { // star ::= item star | ε (a tail call: the stack does not grow)
            const uint32_t star = helper_rule();
            Seq more = item;
            more.push_back(Program::kRuleRef | star);
            add_alt(star, std::move(more));
            add_alt(star, {});
            emit(seq, Program::kRuleRef | star);
            return;
        }
        uint32_t previous = UINT32_MAX; // optional_k ::= item optional_{k-1} | ε
        for (uint32_t k = e.min; k < e.max; ++k) {
            if (k % 1024 == 0) clock_.check("rule '" + current_ + "'");
            const uint32_t rule = helper_rule();
            Seq more = item;
            if (previous != UINT32_MAX) more.push_back(Program::kRuleRef | previous);
            add_alt(rule, std::move(more));
            add_alt(rule, {});
            previous = rule;
        }
        emit(seq, Program::kRuleRef | previous);
    }

    Program build();

    const std::vector<RuleDef>& defs_;
    const GrammarLimits& limits_;
    const CompileClock& clock_;
    std::string current_;
    std::vector<std::vector<Seq>> alts_;
    std::vector<std::string> names_;
    std::vector<ByteSet> byte_sets_;
    std::map<std::array<uint64_t, 4>, uint32_t> byte_set_ids_;
    std::map<std::string, uint32_t> class_rules_;
    size_t n_states_ = 0;
};

bool is_ref(uint32_t element) { return (element & Program::kKindMask) == Program::kRuleRef; }
uint32_t ref_rule(uint32_t element) { return element & ~Program::kKindMask; }

// Fixpoint: rules for which some alternative has every element satisfying `element_ok`.
template <class ElementOk>
std::vector<bool> fixpoint(const std::vector<std::vector<Seq>>& alts, ElementOk element_ok) {
    std::vector<bool> ok(alts.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < alts.size(); ++r) {
            if (ok[r]) continue;
            for (const Seq& seq : alts[r]) {
                bool all = true;
                for (uint32_t element : seq) all = all && element_ok(element, ok);
                if (all) { ok[r] = changed = true; break; }
            }
        }
    }
    return ok;
}

// A rule that reaches itself through references preceded only by nullable elements.
void check_left_recursion(const std::vector<std::vector<Seq>>& alts, const std::vector<std::string>& names,
                          const std::vector<bool>& nullable) {
    const size_t n = alts.size();
    std::vector<std::vector<uint32_t>> edges(n);
    for (size_t r = 0; r < n; ++r)
        for (const Seq& seq : alts[r])
            for (uint32_t element : seq) {
                if (!is_ref(element)) break;
                edges[r].push_back(ref_rule(element));
                if (!nullable[ref_rule(element)]) break;
            }
    std::vector<uint8_t> color(n, 0); // 0 new, 1 on the path, 2 done
    for (size_t start = 0; start < n; ++start) {
        if (color[start]) continue;
        std::vector<std::pair<uint32_t, size_t>> stack{{uint32_t(start), 0}};
        color[start] = 1;
        while (!stack.empty()) {
            auto& [r, next] = stack.back();
            if (next == edges[r].size()) { color[r] = 2; stack.pop_back(); continue; }
            const uint32_t s = edges[r][next++];
            if (color[s] == 1)
                throw Error("grammar: rule '" + names[s] +
                            "': left recursion (the rule can reach itself without consuming input)");
            if (color[s] == 0) { color[s] = 1; stack.push_back({s, 0}); }
        }
    }
}

Program Lowerer::build() {
    const auto nullable = fixpoint(alts_, [](uint32_t el, const std::vector<bool>& ok) { return is_ref(el) && ok[ref_rule(el)]; });
    const auto productive = fixpoint(alts_, [](uint32_t el, const std::vector<bool>& ok) { return !is_ref(el) || ok[ref_rule(el)]; });
    if (!productive[0]) throw Error("grammar: rule '" + names_[0] + "': derives no finite string");
    for (auto& rule_alts : alts_) // a dead alternative could only trap a generation
        std::erase_if(rule_alts, [&](const Seq& seq) {
            for (uint32_t el : seq) if (is_ref(el) && !productive[ref_rule(el)]) return true;
            return false;
        });
    check_left_recursion(alts_, names_, nullable);
    Program p;
    p.byte_sets = std::move(byte_sets_);
    p.rule_names = std::move(names_);
    p.rule_alts.push_back(0);
    for (const auto& rule_alts : alts_) {
        for (const Seq& seq : rule_alts) {
            p.alt_starts.push_back(uint32_t(p.elements.size()));
            p.elements.insert(p.elements.end(), seq.begin(), seq.end());
            p.elements.push_back(Program::kEnd);
        }
        p.rule_alts.push_back(uint32_t(p.alt_starts.size()));
    }
    return p;
}

} // namespace

CompileClock::CompileClock(const GrammarLimits& limits)
    : deadline_(std::chrono::steady_clock::now() + limits.max_compile_time), budget_(limits.max_compile_time) {}

void CompileClock::check(const std::string& what) const {
    if (std::chrono::steady_clock::now() > deadline_)
        throw Error("grammar: " + what + ": compilation took longer than " + std::to_string(budget_.count()) +
                    " ms (max_compile_time)");
}

Program lower(const std::vector<RuleDef>& rules, const GrammarLimits& limits, const CompileClock& clock) {
    if (rules.empty()) throw Error("grammar: no rules");
    return Lowerer(rules, limits, clock).run();
}

} // namespace ninfer::core::grammar
