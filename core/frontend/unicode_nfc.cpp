// ninfer::core - NFC normalisation over generated UCD tables (decompose, reorder, compose).
#include "core/frontend/unicode_nfc.h"

#include "core/frontend/unicode_utf8.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ninfer::core {

namespace {

struct CccRange {
    uint32_t lo, hi;
    uint8_t ccc;
};
struct DecompEntry {
    uint32_t cp;
    uint16_t offset;
    uint8_t length;
};
struct ComposePair {
    uint64_t key; // first << 21 | second
    uint32_t composite;
};
struct CodeRange {
    uint32_t lo, hi;
};

#include "core/frontend/unicode_nfc_tables.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr char32_t kSCount = kLCount * kNCount;

template <typename T, size_t N>
const T* find_range(const T (&table)[N], char32_t cp) {
    const T* it = std::upper_bound(table, table + N, cp,
                                   [](char32_t v, const T& r) { return v < r.lo; });
    if (it == table) return nullptr;
    --it;
    return cp <= it->hi ? it : nullptr;
}

// Code points that are NFC-inert and ccc 0 without a table lookup: the bulk of CJK and Hangul.
bool is_fast_inert(char32_t cp) {
    return cp < 0x300 || (cp >= 0x3400 && cp <= 0x9FFF) || (cp >= kSBase && cp < kSBase + kSCount);
}

void decompose_into(char32_t cp, std::vector<char32_t>& out) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
        char32_t s = cp - kSBase;
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount) out.push_back(kTBase + s % kTCount);
        return;
    }
    const DecompEntry* end = kDecomp + std::size(kDecomp);
    const DecompEntry* it = std::lower_bound(kDecomp, end, cp,
                                             [](const DecompEntry& e, char32_t v) { return e.cp < v; });
    if (it == end || it->cp != cp) {
        out.push_back(cp);
        return;
    }
    out.insert(out.end(), kDecompPool + it->offset, kDecompPool + it->offset + it->length);
}

char32_t compose_pair(char32_t first, char32_t second) {
    if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
        return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
    if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
        second > kTBase && second < kTBase + kTCount)
        return first + (second - kTBase);
    uint64_t key = (uint64_t(first) << 21) | second;
    const ComposePair* end = kCompose + std::size(kCompose);
    const ComposePair* it = std::lower_bound(kCompose, end, key,
                                             [](const ComposePair& p, uint64_t k) { return p.key < k; });
    return it != end && it->key == key ? it->composite : 0;
}

void reorder_canonically(std::vector<char32_t>& cps) {
    // Stable sort each run of non-starters by combining class (runs are short: insertion sort).
    for (size_t i = 1; i < cps.size(); ++i) {
        unsigned c = canonical_combining_class(cps[i]);
        if (c == 0) continue;
        size_t j = i;
        while (j > 0) {
            unsigned prev = canonical_combining_class(cps[j - 1]);
            if (prev <= c) break;
            std::swap(cps[j - 1], cps[j]);
            --j;
        }
    }
}

void compose_canonically(std::vector<char32_t>& cps) {
    size_t n_out = 0;
    long starter = -1;
    for (size_t i = 0; i < cps.size(); ++i) {
        char32_t cp = cps[i];
        unsigned cc = canonical_combining_class(cp);
        if (starter >= 0) {
            size_t last = n_out - 1;
            unsigned last_cc = canonical_combining_class(cps[last]);
            bool blocked = !(last == size_t(starter) || (last_cc != 0 && last_cc < cc));
            if (!blocked) {
                if (char32_t composite = compose_pair(cps[starter], cp)) {
                    cps[starter] = composite;
                    continue;
                }
            }
        }
        if (cc == 0) starter = long(n_out);
        cps[n_out++] = cp;
    }
    cps.resize(n_out);
}

} // namespace

unsigned canonical_combining_class(char32_t cp) {
    if (is_fast_inert(cp)) return 0;
    const CccRange* r = find_range(kCccRanges, cp);
    return r ? r->ccc : 0;
}

const char* nfc_unicode_version() { return kUnicodeVersion; }

bool nfc_quick_check(std::string_view text) {
    unsigned last_cc = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        if (static_cast<unsigned char>(text[pos]) < 0x80) {
            ++pos;
            last_cc = 0;
            continue;
        }
        char32_t cp = utf8_next(text, pos);
        if (is_fast_inert(cp)) {
            last_cc = 0;
            continue;
        }
        unsigned cc = canonical_combining_class(cp);
        if ((cc != 0 && last_cc > cc) || find_range(kNfcQuickCheckNotYes, cp)) return false;
        last_cc = cc;
    }
    return true;
}

std::string nfc_normalize(std::string_view text) {
    if (nfc_quick_check(text)) return std::string(text);
    std::vector<char32_t> cps;
    cps.reserve(text.size() + 8);
    size_t pos = 0;
    while (pos < text.size())
        decompose_into(utf8_next(text, pos), cps);
    reorder_canonically(cps);
    compose_canonically(cps);
    std::string out;
    out.reserve(text.size() + 8);
    for (char32_t cp : cps)
        append_utf8(out, cp);
    return out;
}

} // namespace ninfer::core
