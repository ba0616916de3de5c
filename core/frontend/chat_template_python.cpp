// Python str.strip(), float repr and transformers' tojson, as the chat template sees them.
#include "core/frontend/chat_template_python.h"

#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace ninfer::core {
namespace {

bool is_python_space(char32_t cp) {
    if (cp <= 0x20) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680) return true;
    if (cp >= 0x2000 && cp <= 0x200A) return true;
    return cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Decodes the well-formed UTF-8 sequence starting at text[pos]; returns its length, 0 if none.
size_t decode_at(std::string_view text, size_t pos, char32_t& cp) {
    const auto b0 = static_cast<unsigned char>(text[pos]);
    size_t len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos + len > text.size()) return 0;
    cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (size_t i = 1; i < len; ++i) {
        const auto b = static_cast<unsigned char>(text[pos + i]);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    return len;
}

} // namespace

std::string_view python_strip(std::string_view text) {
    size_t begin = 0;
    while (begin < text.size()) {
        char32_t cp = 0;
        const size_t len = decode_at(text, begin, cp);
        if (len == 0 || !is_python_space(cp)) break;
        begin += len;
    }
    size_t end = text.size();
    while (end > begin) {
        size_t start = end - 1; // back up to the lead byte (at most 3 continuation bytes)
        while (start > begin && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        char32_t cp = 0;
        const size_t len = decode_at(text, start, cp);
        if (len == 0 || start + len != end || !is_python_space(cp)) break;
        end = start;
    }
    return text.substr(begin, end - begin);
}

std::string python_float_repr(double value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
    // Shortest round-trip digits, then Python's layout rule (float_repr_style "short", mode 'r'):
    // scientific when the decimal point position is below -3 or above 16.
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
    std::string out;
    if (sci.front() == '-') {
        out += '-';
        sci.remove_prefix(1);
    }
    const size_t e_pos = sci.find('e');
    std::string digits;
    for (char c : sci.substr(0, e_pos))
        if (c != '.') digits += c;
    const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
    const int decpt = exponent + 1; // value = 0.DIGITS x 10^decpt
    const int ndigits = static_cast<int>(digits.size());
    if (value == 0) return out + "0.0";
    if (decpt > 16 || decpt < -3) {
        out += digits[0];
        if (ndigits > 1) out += '.' + digits.substr(1);
        const int e = decpt - 1;
        out += e < 0 ? "e-" : "e+";
        const int mag = e < 0 ? -e : e;
        if (mag < 10) out += '0';
        out += std::to_string(mag);
    } else if (decpt <= 0) {
        out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (decpt >= ndigits) {
        out += digits + std::string(static_cast<size_t>(decpt - ndigits), '0') + ".0";
    } else {
        out += digits.substr(0, static_cast<size_t>(decpt)) + '.' + digits.substr(static_cast<size_t>(decpt));
    }
    return out;
}

void python_tojson_element(std::string& out, simdjson::dom::element value) {
    using simdjson::dom::element_type;
    switch (value.type()) {
    case element_type::OBJECT: {
        out += '{';
        bool first = true;
        for (auto field : simdjson::dom::object(value.get_object().value_unsafe())) {
            if (!first) out += ", ";
            first = false;
            json_append_quoted(out, field.key);
            out += ": ";
            python_tojson_element(out, field.value);
        }
        out += '}';
        return;
    }
    case element_type::ARRAY: {
        out += '[';
        bool first = true;
        for (auto item : simdjson::dom::array(value.get_array().value_unsafe())) {
            if (!first) out += ", ";
            first = false;
            python_tojson_element(out, item);
        }
        out += ']';
        return;
    }
    case element_type::STRING:
        json_append_quoted(out, value.get_string().value_unsafe());
        return;
    case element_type::DOUBLE: {
        const double d = value.get_double().value_unsafe();
        if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
        else out += python_float_repr(d);
        return;
    }
    case element_type::BOOL:
        out += value.get_bool().value_unsafe() ? "true" : "false";
        return;
    case element_type::NULL_VALUE:
        out += "null";
        return;
    default:
        python_str_element(out, value); // integers print the same in both
        return;
    }
}

void python_str_element(std::string& out, simdjson::dom::element value) {
    using simdjson::dom::element_type;
    switch (value.type()) {
    case element_type::STRING: out += value.get_string().value_unsafe(); return;
    case element_type::INT64: out += std::to_string(value.get_int64().value_unsafe()); return;
    case element_type::UINT64: out += std::to_string(value.get_uint64().value_unsafe()); return;
    case element_type::DOUBLE: out += python_float_repr(value.get_double().value_unsafe()); return;
    case element_type::BOOL: out += value.get_bool().value_unsafe() ? "True" : "False"; return;
    case element_type::NULL_VALUE: out += "None"; return;
    default: python_tojson_element(out, value); return;
    }
}

} // namespace ninfer::core
