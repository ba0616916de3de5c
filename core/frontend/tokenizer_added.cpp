// ninfer::core - added-token matching in text: leftmost-longest with HF's strip/word rules.
#include "core/frontend/tokenizer_added.h"

#include "core/frontend/tokenizer_pretokenize.h"
#include "core/frontend/unicode_utf8.h"

#include <algorithm>

namespace ninfer::core {

namespace {

// Rust regex `\w` (which HF's single_word check uses) on one code point, via PCRE2 UCP `\w`.
bool is_word_char(std::string_view one_char) {
    static const Pcre2Regex word("^\\w");
    size_t begin = 0, end = 0;
    return word.find(one_char, 0, begin, end);
}

std::string_view last_char(std::string_view text) {
    size_t pos = text.size();
    while (pos > 0 && (static_cast<unsigned char>(text[pos - 1]) & 0xC0) == 0x80)
        --pos;
    return text.substr(pos > 0 ? pos - 1 : 0);
}

std::string_view first_char(std::string_view text) {
    size_t pos = 0;
    utf8_next(text, pos);
    return text.substr(0, pos);
}

// Start of the White_Space run that ends text.
size_t white_space_run_start(std::string_view text) {
    size_t end = text.size();
    while (end > 0) {
        std::string_view c = last_char(text.substr(0, end));
        size_t pos = 0;
        if (!is_unicode_white_space(utf8_next(c, pos))) break;
        end -= c.size();
    }
    return end;
}

// Length of the White_Space run that starts text.
size_t white_space_run_length(std::string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
        size_t next = pos;
        if (!is_unicode_white_space(utf8_next(text, next))) break;
        pos = next;
    }
    return pos;
}

} // namespace

void AddedTokenMatcher::add(const AddedToken& token, std::string pattern) {
    if (pattern.empty()) return;
    entries_.push_back(Entry{std::move(pattern), token});
    auto& bucket = by_first_byte_[static_cast<unsigned char>(entries_.back().pattern[0])];
    bucket.push_back(entries_.size() - 1);
    std::stable_sort(bucket.begin(), bucket.end(), [&](size_t a, size_t b) {
        return entries_[a].pattern.size() > entries_[b].pattern.size();
    });
}

const AddedTokenMatcher::Entry* AddedTokenMatcher::longest_at(std::string_view text,
                                                              size_t pos) const {
    for (size_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
        const std::string& p = entries_[index].pattern;
        if (text.compare(pos, p.size(), p) == 0) return &entries_[index];
    }
    return nullptr;
}

void AddedTokenMatcher::split(std::string_view text, bool skip_special,
                              std::vector<Piece>& out) const {
    out.clear();
    size_t emitted = 0; // end of what out covers
    size_t pos = 0;
    while (pos < text.size()) {
        const Entry* match = empty() ? nullptr : longest_at(text, pos);
        if (!match) {
            ++pos;
            continue;
        }
        size_t start = pos, stop = pos + match->pattern.size();
        pos = stop;
        const AddedToken& token = match->token;
        if (skip_special && token.special) continue;
        if (token.single_word) {
            bool word_before = start > 0 && is_word_char(last_char(text.substr(0, start)));
            bool word_after = stop < text.size() && is_word_char(first_char(text.substr(stop)));
            if (word_before || word_after) continue;
        }
        if (token.lstrip) start = std::max(white_space_run_start(text.substr(0, start)), emitted);
        if (token.rstrip) stop += white_space_run_length(text.substr(stop));
        if (start > emitted) out.push_back(Piece{emitted, start, -1});
        out.push_back(Piece{start, stop, token.id});
        emitted = stop;
        pos = stop;
    }
    if (emitted < text.size()) out.push_back(Piece{emitted, text.size(), -1});
}

} // namespace ninfer::core
