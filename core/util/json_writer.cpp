// ninfer::core - compact JSON serialisation with exact numbers and raw UTF-8.
#include "core/util/json_writer.h"

#include "core/util/error.h"

#include <charconv>
#include <cmath>

namespace ninfer::core {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not valid (overlong, surrogate,
// beyond U+10FFFF, truncated).
size_t utf8_sequence_length(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if (i + n > s.size())
        return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

} // namespace

void json_append_quoted(std::string& out, std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    out.push_back('"');
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            const size_t n = utf8_sequence_length(s, i);
            if (n == 0)
                throw Error("json: invalid UTF-8 in string at byte " + std::to_string(i));
            out.append(s.substr(i, n));
            i += n;
            continue;
        }
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                out += "\\u00";
                out.push_back(kHex[c >> 4]);
                out.push_back(kHex[c & 0xF]);
            } else {
                out.push_back(char(c));
            }
        }
        ++i;
    }
    out.push_back('"');
}

std::string json_quote(std::string_view s) {
    std::string out;
    json_append_quoted(out, s);
    return out;
}

std::string json_number(double v) {
    if (!std::isfinite(v))
        throw Error("json: cannot write non-finite number " + std::to_string(v));
    // Shortest round-trip digits, laid out like Python's repr (fixed for 1e-4 <= |v| < 1e16) so
    // values written here read the same as those from the upstream Python tools.
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    const std::string sci(buf, end);
    const size_t e_pos = sci.find('e');
    const int exp = std::stoi(sci.substr(e_pos + 1));
    if (exp < -4 || exp >= 16)
        return sci;
    const bool negative = sci[0] == '-';
    std::string digits;
    for (char c : sci.substr(negative, e_pos - negative))
        if (c != '.')
            digits.push_back(c);
    std::string out = negative ? "-" : "";
    if (exp < 0) {
        out += "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else {
        if (digits.size() < size_t(exp) + 1)
            digits.append(size_t(exp) + 1 - digits.size(), '0');
        out += digits.substr(0, size_t(exp) + 1) + ".";
        const std::string frac = digits.substr(size_t(exp) + 1);
        out += frac.empty() ? "0" : frac;
    }
    return out;
}

void JsonWriter::before_value() {
    if (stack_.empty()) {
        if (has_root_)
            throw Error("json: a second top-level value");
        has_root_ = true;
        return;
    }
    if (stack_.back() == Frame::Object) {
        if (expect_key_)
            throw Error("json: a value where an object key is expected");
        expect_key_ = true; // the next thing in this object is a key
        return;
    }
    if (!first_)
        out_.push_back(',');
    first_ = false;
}

JsonWriter& JsonWriter::begin_object() {
    before_value();
    out_.push_back('{');
    stack_.push_back(Frame::Object);
    expect_key_ = true;
    first_ = true;
    return *this;
}

JsonWriter& JsonWriter::end_object() {
    if (stack_.empty() || stack_.back() != Frame::Object || !expect_key_)
        throw Error("json: end_object without a matching open object");
    out_.push_back('}');
    stack_.pop_back();
    first_ = false;
    expect_key_ = !stack_.empty() && stack_.back() == Frame::Object;
    return *this;
}

JsonWriter& JsonWriter::begin_array() {
    before_value();
    out_.push_back('[');
    stack_.push_back(Frame::Array);
    expect_key_ = false;
    first_ = true;
    return *this;
}

JsonWriter& JsonWriter::end_array() {
    if (stack_.empty() || stack_.back() != Frame::Array)
        throw Error("json: end_array without a matching open array");
    out_.push_back(']');
    stack_.pop_back();
    first_ = false;
    expect_key_ = !stack_.empty() && stack_.back() == Frame::Object;
    return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
    if (stack_.empty() || stack_.back() != Frame::Object || !expect_key_)
        throw Error("json: key \"" + std::string(name) + "\" outside an object or after a key");
    if (!first_)
        out_.push_back(',');
    first_ = false;
    json_append_quoted(out_, name);
    out_.push_back(':');
    expect_key_ = false;
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
    before_value();
    json_append_quoted(out_, s);
    return *this;
}

JsonWriter& JsonWriter::value(bool b) {
    before_value();
    out_ += b ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
    before_value();
    out_ += std::to_string(v);
    return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) {
    before_value();
    out_ += std::to_string(v);
    return *this;
}

JsonWriter& JsonWriter::value(double v) {
    std::string text = json_number(v); // throws before the writer state changes
    before_value();
    out_ += text;
    return *this;
}

JsonWriter& JsonWriter::null() {
    before_value();
    out_ += "null";
    return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
    if (json.empty())
        throw Error("json: raw() needs a nonempty JSON value");
    before_value();
    out_.append(json);
    return *this;
}

std::string JsonWriter::take() {
    if (!complete())
        throw Error("json: document is incomplete");
    std::string s = std::move(out_);
    out_.clear();
    has_root_ = false;
    expect_key_ = false;
    first_ = true;
    return s;
}

} // namespace ninfer::core
