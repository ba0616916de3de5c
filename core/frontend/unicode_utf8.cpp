// ninfer::core - UTF-8 decoding with maximal-subpart replacement, encoding, White_Space.
#include "core/frontend/unicode_utf8.h"

namespace ninfer::core {

namespace {

// Length of the sequence a lead byte announces, and the valid range of its second byte
// (Unicode Table 3-7); 0 for bytes that cannot start a sequence.
struct LeadInfo {
    uint8_t length;
    uint8_t second_lo;
    uint8_t second_hi;
};

LeadInfo lead_info(uint8_t b) {
    if (b < 0x80) return {1, 0, 0};
    if (b < 0xC2) return {0, 0, 0};
    if (b < 0xE0) return {2, 0x80, 0xBF};
    if (b == 0xE0) return {3, 0xA0, 0xBF};
    if (b == 0xED) return {3, 0x80, 0x9F};
    if (b < 0xF0) return {3, 0x80, 0xBF};
    if (b == 0xF0) return {4, 0x90, 0xBF};
    if (b < 0xF4) return {4, 0x80, 0xBF};
    if (b == 0xF4) return {4, 0x80, 0x8F};
    return {0, 0, 0};
}

enum class Step { Complete, Invalid, Truncated };

// Examines the sequence at pos: Complete (cp set, n = its length), Invalid (n = length of the
// maximal subpart to replace) or Truncated (n bytes available, all a valid prefix).
Step examine(std::string_view s, size_t pos, char32_t& cp, size_t& n) {
    uint8_t b0 = static_cast<uint8_t>(s[pos]);
    LeadInfo info = lead_info(b0);
    if (info.length == 1) {
        cp = b0;
        n = 1;
        return Step::Complete;
    }
    if (info.length == 0) {
        n = 1;
        return Step::Invalid;
    }
    char32_t value = b0 & (0xFF >> (info.length + 1));
    for (size_t i = 1; i < info.length; ++i) {
        if (pos + i >= s.size()) {
            n = i;
            return Step::Truncated;
        }
        uint8_t b = static_cast<uint8_t>(s[pos + i]);
        uint8_t lo = i == 1 ? info.second_lo : 0x80;
        uint8_t hi = i == 1 ? info.second_hi : 0xBF;
        if (b < lo || b > hi) {
            n = i;
            return Step::Invalid;
        }
        value = (value << 6) | (b & 0x3F);
    }
    cp = value;
    n = info.length;
    return Step::Complete;
}

} // namespace

char32_t utf8_next(std::string_view text, size_t& pos) {
    char32_t cp = 0;
    size_t n = 0;
    Step step = examine(text, pos, cp, n);
    pos += n;
    return step == Step::Complete ? cp : kReplacementChar;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

void append_utf8_lossy(std::string& out, std::string_view bytes) {
    size_t pos = 0;
    while (pos < bytes.size()) {
        size_t start = pos;
        // Well-formed sequences are copied as they are; a real U+FFFD reads the same either way.
        if (utf8_next(bytes, pos) == kReplacementChar)
            append_utf8(out, kReplacementChar);
        else
            out.append(bytes.substr(start, pos - start));
    }
}

std::string utf8_lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    append_utf8_lossy(out, bytes);
    return out;
}

bool is_valid_utf8(std::string_view bytes) {
    size_t pos = 0;
    while (pos < bytes.size()) {
        char32_t cp = 0;
        size_t n = 0;
        if (examine(bytes, pos, cp, n) != Step::Complete) return false;
        pos += n;
    }
    return true;
}

size_t utf8_scan_stable(std::string_view bytes) {
    size_t pos = 0;
    while (pos < bytes.size()) {
        char32_t cp = 0;
        size_t n = 0;
        if (examine(bytes, pos, cp, n) == Step::Truncated) return pos;
        pos += n;
    }
    return pos;
}

bool is_unicode_white_space(char32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

} // namespace ninfer::core
