// Test helpers for the grammar area: a byte-level vocabulary and whole-string matching.
#pragma once

#include "core/grammar/grammar.h"
#include "core/grammar/matcher.h"
#include "core/grammar/token_index.h"

#include <memory>
#include <string>
#include <vector>

namespace ninfer::test {

// Ids 0..255 are the single bytes, 256 the end token.
inline std::shared_ptr<const core::grammar::TokenIndex> byte_index() {
    static const auto index = [] {
        std::vector<std::string> pieces;
        for (int b = 0; b < 256; ++b) pieces.emplace_back(1, char(b));
        pieces.emplace_back("<end>");
        return core::grammar::TokenIndex::from_pieces(std::move(pieces), {256});
    }();
    return index;
}

// The whole text is a string of the grammar.
inline bool grammar_matches(const std::shared_ptr<const core::grammar::Grammar>& g, std::string_view text) {
    core::grammar::Matcher m(g, byte_index());
    return m.accept_bytes(text) && m.accepting();
}

// The text is a prefix of some string of the grammar.
inline bool grammar_prefix(const std::shared_ptr<const core::grammar::Grammar>& g, std::string_view text) {
    core::grammar::Matcher m(g, byte_index());
    return m.accept_bytes(text);
}

} // namespace ninfer::test
