// ninfer::core::grammar - the GBNF reader (llama.cpp's grammar syntax) into rule expressions.
#include "core/grammar/grammar_program.h"

#include "core/util/error.h"

#include <unordered_map>

namespace ninfer::core::grammar {
namespace {

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfReader {
  public:
    GbnfReader(std::string_view text, const CompileClock& clock) : text_(text), clock_(clock) {
        rule_id("root"); // the start rule is rule 0
    }

    std::vector<RuleDef> run() {
        skip_space(true);
        while (pos_ < text_.size()) {
            clock_.check("gbnf line " + std::to_string(line_));
            read_rule();
            skip_space(true);
        }
        for (size_t r = 0; r < rules_.size(); ++r)
            if (!defined_[r]) {
                if (r == 0) throw Error("grammar: gbnf: no rule 'root' (the start rule)");
                throw Error("grammar: gbnf line " + std::to_string(first_use_line_[r]) + ": undefined rule '" +
                            rules_[r].name + "'");
            }
        return std::move(rules_);
    }

  private:
    [[noreturn]] void fail(const std::string& why) const {
        throw Error("grammar: gbnf line " + std::to_string(line_) + ": " + why);
    }
    bool at_end() const { return pos_ >= text_.size(); }
    char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
    void advance() {
        if (text_[pos_] == '\n') ++line_;
        ++pos_;
    }

    // Spaces, tabs and comments; newlines too when newline_ok (inside parentheses, after '|').
    void skip_space(bool newline_ok) {
        while (!at_end()) {
            const char c = peek();
            if (c == '#') {
                while (!at_end() && peek() != '\n') advance();
            } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
                advance();
            } else {
                break;
            }
        }
    }

    uint32_t rule_id(const std::string& name) {
        auto [it, fresh] = ids_.try_emplace(name, uint32_t(rules_.size()));
        if (fresh) {
            rules_.push_back({name, Expr::seq({})});
            defined_.push_back(false);
            first_use_line_.push_back(line_);
        }
        return it->second;
    }

    std::string read_name() {
        const size_t start = pos_;
        while (!at_end() && is_word_char(peek())) advance();
        if (pos_ == start) fail(std::string("expected a rule name, found '") + (at_end() ? "end of text" : std::string(1, peek())) + "'");
        return std::string(text_.substr(start, pos_ - start));
    }

    void read_rule() {
        const std::string name = read_name();
        skip_space(false);
        if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
        pos_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(name);
        if (defined_[id]) fail("rule '" + name + "' is defined twice");
        defined_[id] = true;
        rules_[id].body = read_alternatives(false);
        if (!at_end() && peek() != '\n' && peek() != '\r') fail(std::string("unexpected '") + peek() + "'");
    }

    Expr read_alternatives(bool nested) {
        std::vector<Expr> alts{read_sequence(nested)};
        while (peek() == '|') {
            advance();
            skip_space(true);
            alts.push_back(read_sequence(nested));
        }
        return alts.size() == 1 ? std::move(alts[0]) : Expr::alt(std::move(alts));
    }

    Expr read_sequence(bool nested) {
        std::vector<Expr> items;
        while (!at_end()) {
            const char c = peek();
            if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
            if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (items.empty()) fail(std::string("'") + c + "' without an item before it");
                items.back() = read_repetition(std::move(items.back()));
            } else {
                items.push_back(read_item(nested));
            }
            skip_space(nested);
        }
        return Expr::seq(std::move(items));
    }

    Expr read_item(bool nested) {
        const char c = peek();
        if (c == '"') return read_literal();
        if (c == '[') return read_class();
        if (c == '.') { advance(); return Expr::any(); }
        if (c == '(') {
            if (++depth_ > kMaxNesting) fail("parentheses nested deeper than " + std::to_string(kMaxNesting));
            advance();
            skip_space(true);
            Expr inner = read_alternatives(true);
            skip_space(true);
            if (peek() != ')') fail("expected ')'");
            advance();
            --depth_;
            return inner;
        }
        if (is_word_char(c)) {
            const std::string name = read_name();
            skip_space(nested);
            if (text_.substr(pos_, 3) == "::=") fail("expected a newline before rule '" + name + "'");
            return Expr::ref(rule_id(name));
        }
        if (c == '<') fail("token references (<...>) are not supported");
        if (c == '!') fail("negation ('!') is not supported");
        fail(std::string("unexpected '") + c + "'");
    }

    Expr read_repetition(Expr item) {
        const char c = peek();
        advance();
        if (c == '*') return Expr::repeat(std::move(item), 0, kUnbounded);
        if (c == '+') return Expr::repeat(std::move(item), 1, kUnbounded);
        if (c == '?') return Expr::repeat(std::move(item), 0, 1);
        skip_space(true);
        const uint32_t min = read_number();
        uint32_t max = min;
        skip_space(true);
        if (peek() == ',') {
            advance();
            skip_space(true);
            max = (peek() == '}') ? kUnbounded : read_number();
            skip_space(true);
        }
        if (peek() != '}') fail("expected '}' to close a repetition");
        advance();
        if (max < min) fail("repetition {" + std::to_string(min) + "," + std::to_string(max) + "} has max < min");
        return Expr::repeat(std::move(item), min, max);
    }

    uint32_t read_number() {
        uint64_t n = 0;
        const size_t start = pos_;
        while (peek() >= '0' && peek() <= '9') {
            n = n * 10 + uint64_t(peek() - '0');
            if (n > 1000000) fail("repetition count over 1000000");
            advance();
        }
        if (pos_ == start) fail("expected a number in a repetition");
        return uint32_t(n);
    }

    uint32_t read_hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            const char c = peek();
            int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
            if (d < 0) fail("expected " + std::to_string(digits) + " hex digits in an escape");
            v = v * 16 + uint32_t(d);
            advance();
        }
        return v;
    }

    // One character of a literal or class (UTF-8 decoded, escapes resolved) as a code point.
    uint32_t read_char() {
        if (at_end()) fail("unterminated literal or class");
        const unsigned char c = uint8_t(peek());
        if (c == '\\') {
            advance();
            const char e = peek();
            if (at_end()) fail("unterminated escape");
            advance();
            switch (e) {
            case 'x': return read_hex(2);
            case 'u': return read_hex(4);
            case 'U': return read_hex(8);
            case 't': return '\t';
            case 'r': return '\r';
            case 'n': return '\n';
            case '\\': case '"': case '[': case ']': case '-': case '^': return uint8_t(e);
            default: fail(std::string("unknown escape '\\") + e + "'");
            }
        }
        if (c == '\n' || c == '\r') fail("newline inside a literal or class");
        const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0) fail("invalid UTF-8 in the grammar text");
        uint32_t cp = n == 1 ? c : c & (0x7F >> n);
        advance();
        for (int i = 1; i < n; ++i) {
            const unsigned char k = uint8_t(peek());
            if ((k & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar text");
            cp = (cp << 6) | (k & 0x3F);
            advance();
        }
        return cp;
    }

    Expr read_literal() {
        advance(); // "
        std::string bytes;
        while (peek() != '"') {
            const uint32_t cp = read_char();
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("literal character U+" + std::to_string(cp) + " is not a scalar value");
            append_utf8(bytes, cp);
        }
        advance();
        return Expr::literal(std::move(bytes));
    }

    Expr read_class() {
        advance(); // [
        Expr e;
        e.kind = Expr::Kind::Class;
        if (peek() == '^') { e.negated = true; advance(); }
        while (peek() != ']') {
            const uint32_t lo = read_char();
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']') {
                advance();
                hi = read_char();
                if (hi < lo) fail("class range with its end before its start");
            }
            e.ranges.push_back({lo, hi});
        }
        advance();
        if (e.ranges.empty() && !e.negated) fail("empty character class '[]'");
        return e;
    }

    static void append_utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) { out += char(cp); return; }
        if (cp < 0x800) { out += char(0xC0 | (cp >> 6)); out += char(0x80 | (cp & 0x3F)); return; }
        if (cp < 0x10000) {
            out += char(0xE0 | (cp >> 12)); out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F));
            return;
        }
        out += char(0xF0 | (cp >> 18)); out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F));
    }

    std::string_view text_;
    const CompileClock& clock_;
    size_t pos_ = 0;
    size_t line_ = 1;
    size_t depth_ = 0;
    static constexpr size_t kMaxNesting = 1000; // the reader and the lowering recurse per level
    std::vector<RuleDef> rules_;
    std::vector<bool> defined_;
    std::vector<size_t> first_use_line_;
    std::unordered_map<std::string, uint32_t> ids_;
};

} // namespace

std::vector<RuleDef> read_gbnf(std::string_view text, const CompileClock& clock) {
    return GbnfReader(text, clock).run();
}

} // namespace ninfer::core::grammar
