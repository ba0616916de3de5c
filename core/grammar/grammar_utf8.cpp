// ninfer::core::grammar - code-point classes as UTF-8 byte-range sequences (surrogates excluded).
#include "core/grammar/grammar_program.h"

#include <algorithm>

namespace ninfer::core::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
using Sequence = std::vector<std::pair<uint8_t, uint8_t>>;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* out) {
    switch (utf8_length(cp)) {
    case 1: out[0] = uint8_t(cp); break;
    case 2: out[0] = uint8_t(0xC0 | (cp >> 6)); out[1] = uint8_t(0x80 | (cp & 0x3F)); break;
    case 3:
        out[0] = uint8_t(0xE0 | (cp >> 12)); out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
        out[2] = uint8_t(0x80 | (cp & 0x3F));
        break;
    default:
        out[0] = uint8_t(0xF0 | (cp >> 18)); out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
        out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F)); out[3] = uint8_t(0x80 | (cp & 0x3F));
    }
}

// The classic split (as in RE2 / Rust's utf8-ranges): cut [lo, hi] until every piece encodes as
// a sequence of independent byte ranges.
void split(uint32_t lo, uint32_t hi, std::vector<Sequence>& out) {
    if (lo > hi) return;
    for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu})
        if (lo <= boundary && hi > boundary) {
            split(lo, boundary, out);
            split(boundary + 1, hi, out);
            return;
        }
    const int n = utf8_length(lo);
    for (int i = 1; i < n; ++i) {
        const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                split(lo, lo | m, out);
                split((lo | m) + 1, hi, out);
                return;
            }
            if ((hi & m) != m) {
                split(lo, (hi & ~m) - 1, out);
                split(hi & ~m, hi, out);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    encode(lo, a);
    encode(hi, b);
    Sequence seq;
    for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
    out.push_back(std::move(seq));
}

Ranges normalise(Ranges ranges, bool negated) {
    for (auto& [lo, hi] : ranges) hi = std::min(hi, kMaxCodePoint);
    std::erase_if(ranges, [](const auto& r) { return r.first > r.second; });
    std::sort(ranges.begin(), ranges.end());
    Ranges merged;
    for (const auto& r : ranges) {
        if (!merged.empty() && r.first <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, r.second);
        else merged.push_back(r);
    }
    if (negated) {
        Ranges complement;
        uint32_t next = 0;
        for (const auto& [lo, hi] : merged) {
            if (lo > next) complement.push_back({next, lo - 1});
            next = hi + 1;
        }
        if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
        merged = std::move(complement);
    }
    Ranges out; // without surrogates: they have no UTF-8 encoding
    for (const auto& [lo, hi] : merged) {
        if (hi < 0xD800 || lo > 0xDFFF) { out.push_back({lo, hi}); continue; }
        if (lo < 0xD800) out.push_back({lo, 0xD7FF});
        if (hi > 0xDFFF) out.push_back({0xE000, hi});
    }
    return out;
}

} // namespace

std::vector<Sequence> utf8_sequences(const Ranges& ranges, bool negated) {
    std::vector<Sequence> out;
    for (const auto& [lo, hi] : normalise(ranges, negated)) split(lo, hi, out);
    return out;
}

} // namespace ninfer::core::grammar
