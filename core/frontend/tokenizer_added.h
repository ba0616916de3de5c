// ninfer::core - finding added tokens in text the Hugging Face way (internal to the tokenizer).
//
// Contract:
// - add(token, pattern) registers a token under the text to look for (its content, or the
//   normalised content for tokens with normalized=true).
// - split(text, skip_special, out) fills out with consecutive pieces covering text: plain text
//   (id -1) and added tokens. Like HF's AddedVocabulary::find_matches: leftmost-longest,
//   non-overlapping matches; a single_word token not bounded by non-word characters, or a
//   special token when skip_special is set, is dropped and the search resumes after it; lstrip and
//   rstrip widen the token's piece over adjacent Unicode White_Space (so it disappears).
// - Const and thread-safe after construction.
#pragma once

#include "core/frontend/tokenizer.h"

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

class AddedTokenMatcher {
  public:
    struct Piece {
        size_t begin;
        size_t end;
        TokenId id; // -1: plain text
    };
    void add(const AddedToken& token, std::string pattern);
    bool empty() const { return entries_.empty(); }
    void split(std::string_view text, bool skip_special, std::vector<Piece>& out) const;

  private:
    struct Entry {
        std::string pattern;
        AddedToken token;
    };
    // Longest registered pattern that starts at pos, or nullptr.
    const Entry* longest_at(std::string_view text, size_t pos) const;

    std::vector<Entry> entries_;
    std::array<std::vector<size_t>, 256> by_first_byte_; // entry indices, longest pattern first
};

} // namespace ninfer::core
