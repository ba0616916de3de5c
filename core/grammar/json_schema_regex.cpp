// ninfer::core::grammar - JSON Schema `pattern` (an ECMAScript regex subset) to GBNF over string content.
#include "core/grammar/json_schema_compiler.h"

#include <algorithm>

namespace ninfer::core::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMax = 0x10FFFF;

Ranges complement(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    uint32_t next = 0;
    for (auto [lo, hi] : r) {
        if (hi < next) continue;
        if (lo > next) out.push_back({next, lo - 1});
        next = hi + 1;
    }
    if (next <= kMax) out.push_back({next, kMax});
    return out;
}

Ranges subtract(const Ranges& r, uint32_t c) {
    Ranges out;
    for (auto [lo, hi] : r) {
        if (c < lo || c > hi) { out.push_back({lo, hi}); continue; }
        if (lo < c) out.push_back({lo, c - 1});
        if (c < hi) out.push_back({c + 1, hi});
    }
    return out;
}

bool contains(const Ranges& r, uint32_t c) {
    return std::any_of(r.begin(), r.end(), [&](auto p) { return p.first <= c && c <= p.second; });
}

std::string class_char(uint32_t c) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "\\U";
    for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(c >> shift) & 15];
    return out;
}

class RegexReader {
  public:
    RegexReader(std::string_view pattern, SchemaCompiler& compiler, const std::string& pointer, bool raw)
        : compiler_(compiler), pointer_(pointer), raw_(raw) {
        for (size_t i = 0; i < pattern.size();) { // decode UTF-8 (simdjson validated it)
            const auto c = uint8_t(pattern[i]);
            const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            uint32_t cp = n == 1 ? c : c & (0x7F >> n);
            for (int k = 1; k < n && i + k < pattern.size(); ++k) cp = (cp << 6) | (uint8_t(pattern[i + k]) & 0x3F);
            cps_.push_back(cp);
            i += size_t(n);
        }
    }

    std::string run() {
        const bool anchored_start = !cps_.empty() && cps_[0] == '^';
        if (anchored_start) pos_ = 1;
        std::string body = alternatives();
        bool anchored_end = false;
        if (pos_ < cps_.size() && cps_[pos_] == '$') { anchored_end = true; ++pos_; }
        if (pos_ != cps_.size()) fail("unsupported construct at offset " + std::to_string(pos_));
        const std::string free = raw_ ? compiler_.common("raw-char") + "*" : compiler_.common("json-char") + "*";
        return (anchored_start ? "" : free + " ") + "(" + body + ")" + (anchored_end ? "" : " " + free);
    }

  private:
    [[noreturn]] void fail(const std::string& why) { compiler_.fail(pointer_, "pattern: " + why); }
    bool more() const { return pos_ < cps_.size(); }
    uint32_t peek() const { return cps_[pos_]; }

    std::string alternatives() {
        std::string out = sequence();
        while (more() && peek() == '|') {
            ++pos_;
            out += " | " + sequence();
        }
        return out;
    }

    std::string sequence() {
        std::string out;
        while (more() && peek() != '|' && peek() != ')') {
            if (peek() == '$' && pos_ + 1 == cps_.size()) break;
            std::string atom_text = atom();
            atom_text = quantified(atom_text);
            out += (out.empty() ? "" : " ") + atom_text;
        }
        return out.empty() ? "\"\"" : out;
    }

    std::string quantified(const std::string& atom_text) {
        if (!more()) return atom_text;
        std::string q;
        const uint32_t c = peek();
        if (c == '*' || c == '+' || c == '?') { q = std::string(1, char(c)); ++pos_; }
        else if (c == '{') {
            size_t p = pos_ + 1;
            std::string inner;
            while (p < cps_.size() && ((cps_[p] >= '0' && cps_[p] <= '9') || cps_[p] == ',')) inner += char(cps_[p++]);
            if (p >= cps_.size() || cps_[p] != '}' || inner.empty() || inner[0] == ',') fail("unsupported '{' (write \\{ for a literal brace)");
            q = "{" + inner + "}";
            pos_ = p + 1;
        } else {
            return atom_text;
        }
        if (more() && peek() == '?') ++pos_; // lazy: the same language
        return "(" + atom_text + ")" + q;
    }

    std::string atom() {
        const uint32_t c = peek();
        ++pos_;
        switch (c) {
        case '(': {
            if (more() && peek() == '?') {
                if (pos_ + 1 < cps_.size() && cps_[pos_ + 1] == ':') pos_ += 2;
                else fail("lookaround and named groups are not supported");
            }
            std::string inner = alternatives();
            if (!more() || peek() != ')') fail("unbalanced parenthesis");
            ++pos_;
            return "(" + inner + ")";
        }
        case '[': return char_class();
        case '.': return emit(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
        case '\\': return emit(escape(false));
        case '^': case '$': fail("anchors are only supported at the start and end");
        case '*': case '+': case '?': case '{': fail("quantifier without an atom");
        default: return emit({{c, c}});
        }
    }

    uint32_t hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            if (!more()) fail("truncated hex escape");
            const uint32_t c = peek();
            const int d = (c >= '0' && c <= '9') ? int(c - '0') : (c >= 'a' && c <= 'f') ? int(c - 'a' + 10) : (c >= 'A' && c <= 'F') ? int(c - 'A' + 10) : -1;
            if (d < 0) fail("bad hex escape");
            v = v * 16 + uint32_t(d);
            ++pos_;
        }
        return v;
    }

    // After a backslash: a class escape or a literal character.
    Ranges escape(bool in_class) {
        if (!more()) fail("trailing backslash");
        const uint32_t c = peek();
        ++pos_;
        const Ranges digit{{'0', '9'}}, word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
            space{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                  {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
        switch (c) {
        case 'd': return digit;
        case 'D': return complement(digit);
        case 'w': return word;
        case 'W': return complement(word);
        case 's': return space;
        case 'S': return complement(space);
        case 'n': return {{'\n', '\n'}};
        case 't': return {{'\t', '\t'}};
        case 'r': return {{'\r', '\r'}};
        case 'f': return {{'\f', '\f'}};
        case 'v': return {{'\v', '\v'}};
        case 'b': if (in_class) return {{'\b', '\b'}}; fail("\\b is not supported");
        case 'x': { const uint32_t v = hex(2); return {{v, v}}; }
        case 'u': {
            if (more() && peek() == '{') {
                ++pos_;
                uint32_t v = 0;
                for (int n = 0; more() && peek() != '}'; ++n) { if (n == 6) fail("\\u{...} too long"); v = v * 16 + hex(1); }
                if (!more() || v > kMax) fail("bad \\u{...} escape");
                ++pos_;
                return {{v, v}};
            }
            const uint32_t v = hex(4);
            if (v >= 0xD800 && v <= 0xDFFF) fail("surrogate escapes are not supported");
            return {{v, v}};
        }
        default:
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                fail(std::string("unsupported escape \\") + char(c));
            return {{c, c}};
        }
    }

    std::string char_class() {
        bool negated = false;
        if (more() && peek() == '^') { negated = true; ++pos_; }
        Ranges r;
        while (more() && peek() != ']') {
            Ranges lo_set;
            if (peek() == '\\') { ++pos_; lo_set = escape(true); }
            else { lo_set = {{peek(), peek()}}; ++pos_; }
            if (lo_set.size() == 1 && lo_set[0].first == lo_set[0].second && pos_ + 1 < cps_.size() && peek() == '-' && cps_[pos_ + 1] != ']') {
                ++pos_;
                uint32_t hi;
                if (peek() == '\\') {
                    ++pos_;
                    Ranges h = escape(true);
                    if (h.size() != 1 || h[0].first != h[0].second) fail("class range ending in a class escape");
                    hi = h[0].first;
                } else { hi = peek(); ++pos_; }
                if (hi < lo_set[0].first) fail("class range out of order");
                r.push_back({lo_set[0].first, hi});
            } else {
                r.insert(r.end(), lo_set.begin(), lo_set.end());
            }
        }
        if (!more()) fail("unterminated character class");
        ++pos_;
        return emit(negated ? complement(r) : r);
    }

    // Characters as they appear inside the JSON string: specials escaped; in raw mode '<' is left
    // out (the output parser ends a parameter at "</parameter>").
    std::string emit(Ranges r) {
        std::vector<std::string> alts;
        if (raw_) {
            r = subtract(r, '<');
        } else {
            for (uint32_t c = 0; c < 0x20; ++c)
                if (contains(r, c)) {
                    static constexpr char kHex[] = "0123456789abcdef";
                    const char* shortcut = c == '\n' ? "\\\\n" : c == '\r' ? "\\\\r" : c == '\t' ? "\\\\t" : c == '\b' ? "\\\\b" : c == '\f' ? "\\\\f" : nullptr;
                    alts.push_back(shortcut ? std::string("\"") + shortcut + "\"" : std::string("\"\\\\u00") + kHex[c >> 4] + kHex[c & 15] + "\"");
                    r = subtract(r, c);
                }
            if (contains(r, '"')) { alts.push_back("\"\\\\\\\"\""); r = subtract(r, '"'); }
            if (contains(r, '\\')) { alts.push_back("\"\\\\\\\\\""); r = subtract(r, '\\'); }
        }
        if (!r.empty()) {
            std::string cls = "[";
            for (auto [lo, hi] : r) cls += lo == hi ? class_char(lo) : class_char(lo) + "-" + class_char(hi);
            alts.push_back(cls + "]");
        }
        if (alts.empty()) fail("a character class that matches nothing usable");
        std::string out;
        for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
        return alts.size() == 1 ? out : "(" + out + ")";
    }

    SchemaCompiler& compiler_;
    std::string pointer_;
    bool raw_;
    std::vector<uint32_t> cps_;
    size_t pos_ = 0;
};

} // namespace

std::string SchemaCompiler::regex_to_gbnf(std::string_view pattern, const std::string& pointer, bool raw) {
    return RegexReader(pattern, *this, pointer, raw).run();
}

} // namespace ninfer::core::grammar
