// ninfer::core::grammar - JSON Schema to GBNF: strings (lengths, formats), numbers with bounds,
// literals, the shared JSON rules, and the public entry point.
#include "core/grammar/json_schema_compiler.h"

#include "core/util/error.h"

#include <cmath>

namespace ninfer::core::grammar {
namespace {

// Shared rules. json-char-1 is one code point for length counting: \u escapes of surrogates are
// left out, since a pair of them is one character to a validator but two units here.
const std::map<std::string, std::string> kCommonRules = {
    {"json-value", "json-object | json-array | json-string | json-number | \"true\" | \"false\" | \"null\""},
    {"json-string", "\"\\\"\" json-char* \"\\\"\""},
    {"json-char", "[^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )"},
    {"json-char-1", "[^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )"},
    // At most 16 digits before the point and 2 in an exponent: every number stays a finite double
    // (a validator reads 1e400 as Infinity, and simdjson refuses it).
    {"json-int", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"},
    {"json-number", "json-int ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]{1,2} )?"},
    {"json-digits", "[0-9]+"},
    // Raw parameter text: no "</parameter>" inside (states: how much of it was just seen).
    {"raw-char", "[^<]"},
    {"raw-text", "[^<] raw-text | \"<\" raw-p1 | \"\""},
    {"raw-p1", "\"/\" raw-p2 | \"<\" raw-p1 | [^</] raw-text | \"\""},
    {"raw-p2", "\"p\" raw-p3 | \"<\" raw-p1 | [^<p] raw-text | \"\""},
    {"raw-p3", "\"a\" raw-p4 | \"<\" raw-p1 | [^<a] raw-text | \"\""},
    {"raw-p4", "\"r\" raw-p5 | \"<\" raw-p1 | [^<r] raw-text | \"\""},
    {"raw-p5", "\"a\" raw-p6 | \"<\" raw-p1 | [^<a] raw-text | \"\""},
    {"raw-p6", "\"m\" raw-p7 | \"<\" raw-p1 | [^<m] raw-text | \"\""},
    {"raw-p7", "\"e\" raw-p8 | \"<\" raw-p1 | [^<e] raw-text | \"\""},
    {"raw-p8", "\"t\" raw-p9 | \"<\" raw-p1 | [^<t] raw-text | \"\""},
    {"raw-p9", "\"e\" raw-p10 | \"<\" raw-p1 | [^<e] raw-text | \"\""},
    {"raw-p10", "\"r\" raw-p11 | \"<\" raw-p1 | [^<r] raw-text | \"\""},
    {"raw-p11", "\"<\" raw-p1 | [^<>] raw-text | \"\""},
    {"format-date", "[0-9]{4} \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( date-d30 | \"31\" ) | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" date-d30 | \"02-\" date-d28 )"},
    {"date-d28", "\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]"},
    {"date-d30", "date-d28 | \"29\" | \"30\""},
    {"format-time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]+ )? ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
    {"format-date-time", "format-date \"T\" format-time"},
    {"format-uuid", "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}"},
    {"format-email", "email-word ( \".\" email-word )* \"@\" ( email-label \".\" )+ email-label"},
    {"email-word", "[a-zA-Z0-9_+-]+"},
    {"email-label", "[a-zA-Z0-9] ( [a-zA-Z0-9-]* [a-zA-Z0-9] )?"},
    {"format-ipv4", "ipv4-octet \".\" ipv4-octet \".\" ipv4-octet \".\" ipv4-octet"},
    // At most 3 labels of at most 22 characters: well inside the 253 / 63 limits.
    {"format-hostname", "host-label ( \".\" host-label ){0,2}"},
    {"host-label", "[a-zA-Z0-9] ( [a-zA-Z0-9-]{0,20} [a-zA-Z0-9] )?"},
    {"format-uri", "\"http\" \"s\"? \"://\" format-hostname ( \":\" [0-9]{1,5} )? ( \"/\" [a-zA-Z0-9._~-]* )* ( \"?\" [a-zA-Z0-9._~=&-]* )?"},
    {"ipv4-octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9]"},
};

// Rules each common rule refers to (defined with it).
const std::map<std::string, std::vector<std::string>> kCommonDeps = {
    {"json-value", {"json-object", "json-array", "json-string", "json-number"}},
    {"json-object", {"json-string", "json-value"}},
    {"json-array", {"json-value"}},
    {"json-string", {"json-char"}},
    {"json-number", {"json-int"}},
    {"format-date", {"date-d28", "date-d30"}},
    {"date-d30", {"date-d28"}},
    {"format-date-time", {"format-date", "format-time"}},
    {"format-email", {"email-word", "email-label"}},
    {"format-ipv4", {"ipv4-octet"}},
    {"format-hostname", {"host-label"}},
    {"format-uri", {"format-hostname"}},
    {"raw-text", {"raw-p1", "raw-p2", "raw-p3", "raw-p4", "raw-p5", "raw-p6", "raw-p7", "raw-p8", "raw-p9", "raw-p10", "raw-p11"}},
};

// ---- integer ranges as digit patterns (no leading zeros, no "-0") ----

using Int = long long;
constexpr Int kIntLimit = 1000000000000000LL; // |bounds| above this are not made exact
constexpr size_t kMaxDigits = 16;              // digits of generated integers (as json-int)

std::string digits_class(char lo, char hi) {
    if (lo == hi) return std::string("\"") + lo + "\"";
    return std::string("[") + lo + "-" + hi + "]";
}

// Numbers of exactly lo.size() digits in [lo, hi] (same length, lo <= hi).
std::string same_length_range(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return "";
    const size_t n = lo.size();
    auto rest = [&](const std::string& s) { return s.substr(1); };
    auto all = [](const std::string& s, char c) { return s.find_first_not_of(c) == std::string::npos; };
    auto free_digits = [](size_t k) { return k == 0 ? std::string() : k == 1 ? std::string("[0-9]") : "[0-9]{" + std::to_string(k) + "}"; };
    auto cat = [](const std::string& a, const std::string& b) { return b.empty() ? a : a + " " + b; };
    if (lo[0] == hi[0]) return cat(digits_class(lo[0], lo[0]), same_length_range(rest(lo), rest(hi)));
    if (all(rest(lo), '0') && all(rest(hi), '9')) return cat(digits_class(lo[0], hi[0]), free_digits(n - 1));
    std::vector<std::string> alts;
    alts.push_back(cat(digits_class(lo[0], lo[0]), same_length_range(rest(lo), std::string(n - 1, '9'))));
    if (lo[0] + 1 <= hi[0] - 1) alts.push_back(cat(digits_class(char(lo[0] + 1), char(hi[0] - 1)), free_digits(n - 1)));
    alts.push_back(cat(digits_class(hi[0], hi[0]), same_length_range(std::string(n - 1, '0'), rest(hi))));
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")";
}

Int pow10(size_t k) { Int v = 1; while (k--) v *= 10; return v; }

// Non-negative integers in [lo, hi]; hi < 0 means no upper bound.
std::string natural_range(Int lo, Int hi) {
    std::vector<std::string> alts;
    const size_t lo_len = std::to_string(lo).size();
    const size_t hi_len = hi < 0 ? lo_len : std::to_string(hi).size();
    for (size_t n = lo_len; n <= hi_len; ++n) {
        const Int from = std::max(lo, n == 1 ? 0 : pow10(n - 1));
        const Int to = (hi < 0 || n < hi_len) ? pow10(n) - 1 : hi;
        if (from <= to) alts.push_back(same_length_range(std::to_string(from), std::to_string(to)));
    }
    if (hi < 0 && lo_len < kMaxDigits) alts.push_back("[1-9] [0-9]{" + std::to_string(lo_len) + "," + std::to_string(kMaxDigits - 1) + "}");
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")";
}

// Integers in [lo, hi] (nullopt = unbounded on that side); "" when the range is empty.
std::string integer_range(std::optional<Int> lo, std::optional<Int> hi) {
    if (lo && hi && *lo > *hi) return "";
    std::vector<std::string> alts;
    if (!lo || *lo < 0) { // negative part: -m with m in [max(1, -hi), -lo]
        const Int m_lo = hi ? std::max<Int>(1, -*hi) : 1;
        const Int m_hi = lo ? -*lo : -1;
        if (m_hi < 0 || m_lo <= m_hi) alts.push_back("\"-\" " + natural_range(m_lo, m_hi));
    }
    if (!hi || *hi >= 0) alts.push_back(natural_range(lo ? std::max<Int>(0, *lo) : 0, hi ? *hi : -1));
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")";
}

struct Bounds {
    std::optional<double> min, max;
    bool min_exclusive = false, max_exclusive = false;
};

} // namespace

std::string gbnf_literal(std::string_view bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "\"";
    for (char c : bytes) {
        const auto u = uint8_t(c);
        if (c == '"' || c == '\\') { out += '\\'; out += c; }
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (u < 0x20) { out += "\\x"; out += kHex[u >> 4]; out += kHex[u & 15]; }
        else out += c;
    }
    return out + "\"";
}

namespace {

size_t utf8_char_length(char lead) {
    const auto c = uint8_t(lead);
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

std::string literal_trie_of(const std::vector<std::string_view>& items) {
    bool has_empty = false;
    std::vector<std::string> alts;
    for (size_t i = 0; i < items.size();) {
        if (items[i].empty()) { has_empty = true; ++i; continue; }
        const std::string_view first = items[i].substr(0, utf8_char_length(items[i][0]));
        size_t j = i;
        while (j < items.size() && items[j].substr(0, first.size()) == first) ++j;
        // The group [i, j) shares `first`; extend to the longest common prefix at a character boundary.
        size_t common = first.size();
        for (;;) {
            if (items[i].size() <= common) break;
            const size_t next = common + utf8_char_length(items[i][common]);
            bool all = true;
            for (size_t k = i; k < j && all; ++k) all = items[k].size() >= next && items[k].substr(common, next - common) == items[i].substr(common, next - common);
            if (!all) break;
            common = next;
        }
        std::vector<std::string_view> rest;
        for (size_t k = i; k < j; ++k) rest.push_back(items[k].substr(common));
        const bool only_end = rest.size() == 1 && rest[0].empty();
        alts.push_back(gbnf_literal(items[i].substr(0, common)) + (only_end ? "" : " " + literal_trie_of(rest)));
        i = j;
    }
    std::string out;
    for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")" + (has_empty ? "?" : "");
}

} // namespace

std::string literal_trie(const std::vector<std::string>& texts) {
    return literal_trie_of({texts.begin(), texts.end()});
}

std::string json_text(element value) { return simdjson::minify(value); }

uint8_t value_type_mask(element v) {
    if (v.is_null()) return kTypeNull;
    if (v.is_bool()) return kTypeBoolean;
    if (v.is_int64() || v.is_uint64()) return kTypeInteger;
    if (v.is_double()) { const double d = double(v); return std::floor(d) == d ? kTypeInteger : kTypeFraction; }
    if (v.is_string()) return kTypeString;
    if (v.is_array()) return kTypeArray;
    return kTypeObject;
}

uint8_t schema_type_mask(element schema) {
    if (!schema.is_object()) return 0x7F;
    element type, values;
    auto bit = [](std::string_view t) -> uint8_t {
        if (t == "null") return kTypeNull;
        if (t == "boolean") return kTypeBoolean;
        if (t == "integer") return kTypeInteger;
        if (t == "number") return kTypeInteger | kTypeFraction;
        if (t == "string") return kTypeString;
        if (t == "array") return kTypeArray;
        if (t == "object") return kTypeObject;
        return 0x7F;
    };
    if (!schema["$ref"].get(type)) return 0x7F;
    if (!schema["type"].get(type)) {
        if (type.is_string()) return bit(std::string_view(type));
        uint8_t mask = 0;
        if (type.is_array())
            for (element t : simdjson::dom::array(type)) mask |= t.is_string() ? bit(std::string_view(t)) : 0x7F;
        return mask;
    }
    if (!schema["const"].get(values)) return value_type_mask(values);
    if (!schema["enum"].get(values) && values.is_array()) {
        uint8_t mask = 0;
        for (element v : simdjson::dom::array(values)) mask |= value_type_mask(v);
        return mask;
    }
    for (const char* key : {"anyOf", "oneOf"})
        if (!schema[key].get(values) && values.is_array()) {
            uint8_t mask = 0;
            for (element v : simdjson::dom::array(values)) mask |= schema_type_mask(v);
            return mask;
        }
    return 0x7F;
}

std::string SchemaCompiler::common(const std::string& name) {
    if (defined_common_.insert(name).second) {
        if (name == "json-object")
            define(name, tok('{') + " ( json-string " + tok(':') + " json-value ( " + tok(',') + " json-string " + tok(':') +
                             " json-value )* )? " + tok('}'));
        else if (name == "json-array")
            define(name, tok('[') + " ( json-value ( " + tok(',') + " json-value )* )? " + tok(']'));
        else
            define(name, kCommonRules.at(name));
        names_.insert(name);
        if (auto deps = kCommonDeps.find(name); deps != kCommonDeps.end())
            for (const std::string& dep : deps->second) common(dep);
    }
    return name;
}

std::string SchemaCompiler::gen_string(element schema, const std::string& pointer) {
    return "\"\\\"\" " + gen_string_body(schema, pointer, false) + " \"\\\"\"";
}

// Raw bodies (tool-call parameters) never contain '<' when bounded and never "</parameter>"
// otherwise (the output parser ends the value there).
std::string SchemaCompiler::gen_string_body(element schema, const std::string& pointer, bool raw) {
    const int64_t min_len = count_keyword(schema, "minLength", 0, pointer);
    const int64_t max_len = count_keyword(schema, "maxLength", -1, pointer);
    const bool bounded = min_len > 0 || max_len >= 0;
    std::string_view format, pattern;
    if (!schema["pattern"].get(pattern)) {
        if (bounded) fail(pointer, "pattern together with minLength/maxLength is not supported");
        return regex_to_gbnf(pattern, pointer + "/pattern", raw);
    }
    if (!schema["format"].get(format)) {
        static const std::set<std::string_view> kFormats = {"date", "time", "date-time", "uuid", "email", "ipv4", "hostname", "uri"};
        if (!kFormats.count(format)) fail(pointer + "/format", "unsupported format '" + std::string(format) + "'");
        if (bounded) fail(pointer, "format together with minLength/maxLength is not supported");
        return common("format-" + std::string(format));
    }
    if (!bounded) return raw ? common("raw-text") : common("json-char") + "*";
    if (max_len >= 0 && max_len < min_len) fail(pointer, "maxLength below minLength");
    const std::string unit = raw ? common("raw-char") : common("json-char-1");
    return unit + "{" + std::to_string(min_len) + "," + (max_len < 0 ? std::string() : std::to_string(max_len)) + "}";
}

namespace {

Bounds read_bounds(element schema, SchemaCompiler& c, const std::string& pointer) {
    Bounds b;
    element v;
    auto number = [&](const char* key) -> std::optional<double> {
        if (schema[key].get(v)) return std::nullopt;
        if (v.is_bool()) c.fail(pointer + "/" + key, "boolean exclusiveMinimum/Maximum (draft 4) is not supported");
        if (!v.is_number()) c.fail(pointer + "/" + key, "must be a number");
        return double(v);
    };
    b.min = number("minimum");
    b.max = number("maximum");
    if (auto e = number("exclusiveMinimum"); e && (!b.min || *e >= *b.min)) { b.min = e; b.min_exclusive = true; }
    if (auto e = number("exclusiveMaximum"); e && (!b.max || *e <= *b.max)) { b.max = e; b.max_exclusive = true; }
    for (auto bound : {b.min, b.max})
        if (bound && std::fabs(*bound) > double(kIntLimit)) c.fail(pointer, "numeric bound beyond 1e15 is not supported");
    return b;
}

// The integers inside the bounds.
std::pair<std::optional<Int>, std::optional<Int>> integer_bounds(const Bounds& b) {
    std::optional<Int> lo, hi;
    if (b.min) lo = b.min_exclusive ? Int(std::floor(*b.min)) + 1 : Int(std::ceil(*b.min));
    if (b.max) hi = b.max_exclusive ? Int(std::ceil(*b.max)) - 1 : Int(std::floor(*b.max));
    return {lo, hi};
}

} // namespace

Gen SchemaCompiler::gen_integer(element schema, const std::string& pointer) {
    const Bounds b = read_bounds(schema, *this, pointer);
    if (!b.min && !b.max) return common("json-int");
    auto [lo, hi] = integer_bounds(b);
    const std::string range = integer_range(lo, hi);
    if (range.empty()) return std::nullopt;
    return range;
}

// Bounded numbers: the integers in range, and I.F for whole parts I where every I.F lies in range:
// non-negative I needs I >= min (> for exclusive) and I + 1 <= max; negative -M.F needs
// -(M + 1) >= min and -M <= max (< for exclusive). No exponents. Sound, not complete.
Gen SchemaCompiler::gen_number(element schema, const std::string& pointer) {
    const Bounds b = read_bounds(schema, *this, pointer);
    if (!b.min && !b.max) return common("json-number");
    auto [lo, hi] = integer_bounds(b);
    std::vector<std::string> alts;
    if (std::string ints = integer_range(lo, hi); !ints.empty()) alts.push_back(ints);
    const std::string frac = " \".\" " + common("json-digits");
    { // non-negative whole part I in [plo, phi]
        Int plo = 0;
        if (b.min) plo = std::max<Int>(0, b.min_exclusive ? Int(std::floor(*b.min)) + 1 : Int(std::ceil(*b.min)));
        std::optional<Int> phi;
        if (b.max) phi = Int(std::floor(*b.max)) - 1;
        if (!phi || plo <= *phi) alts.push_back("(" + natural_range(plo, phi ? *phi : -1) + frac + ")");
    }
    { // negative: -M.F with M in [mlo, mhi]
        Int mlo = 0;
        if (b.max) mlo = std::max<Int>(0, b.max_exclusive ? Int(std::floor(-*b.max)) + 1 : Int(std::ceil(-*b.max)));
        std::optional<Int> mhi;
        if (b.min) mhi = Int(std::floor(-*b.min)) - 1;
        if (!mhi || mlo <= *mhi) alts.push_back("(\"-\" " + natural_range(mlo, mhi ? *mhi : -1) + frac + ")");
    }
    // An exclusive integral bound m: m.F with a non-zero digit in F lies strictly beyond m.
    const std::string frac_nonzero = " \".\" [0-9]* [1-9] [0-9]*";
    auto integral = [](double v) { return std::floor(v) == v; };
    if (b.min && b.min_exclusive && integral(*b.min) && *b.min >= 0 && (!b.max || *b.min + 1 <= *b.max))
        alts.push_back("(" + natural_range(Int(*b.min), Int(*b.min)) + frac_nonzero + ")");
    if (b.max && b.max_exclusive && integral(*b.max) && *b.max <= 0 && (!b.min || *b.max - 1 >= *b.min))
        alts.push_back("(\"-\" " + natural_range(Int(-*b.max), Int(-*b.max)) + frac_nonzero + ")");
    if (alts.empty()) {
        const bool empty_range = b.min && b.max && (*b.min > *b.max || (*b.min == *b.max && (b.min_exclusive || b.max_exclusive)));
        if (empty_range) return std::nullopt;
        fail(pointer, "number range too narrow for the approximation (integers and I.F fractions with whole I inside)");
    }
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")";
}

std::string json_schema_to_gbnf(std::string_view schema_json, const GrammarLimits& limits) {
    simdjson::dom::parser parser;
    element root;
    if (parser.parse(schema_json.data(), schema_json.size()).get(root))
        throw Error("grammar: /: the schema is not valid JSON");
    const CompileClock clock(limits);
    return SchemaCompiler(root, limits, clock).compile();
}

} // namespace ninfer::core::grammar
