// ninfer::core - BPE merging by rank over byte-level symbols (internal to the tokenizer).
//
// Contract:
// - Build: set_byte_token(byte, id) for each of the 256 byte-level characters present in the
//   vocabulary, then add_merge(left, right, merged) in the file's order (rank = order; a repeated
//   pair keeps its last rank, as Hugging Face's map does).
// - encode_word(bytes, out) appends the ids of one pre-token: each byte starts as its own
//   symbol (bytes without a vocab entry are dropped, as HF does without an unk token), then the
//   lowest-ranked adjacent pair is merged repeatedly, leftmost first on ties (HF's heap order).
//   O(n log n) in the word length; const and thread-safe.
#pragma once

#include "core/frontend/tokenizer.h"

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ninfer::core {

class BpeMerger {
  public:
    BpeMerger();
    void set_byte_token(uint8_t byte, TokenId id) { byte_token_[byte] = id; }
    void add_merge(TokenId left, TokenId right, TokenId merged);
    size_t n_merges() const { return n_merges_; }
    void encode_word(std::string_view bytes, std::vector<TokenId>& out) const;

  private:
    struct Slot {
        uint64_t key = kEmpty;
        uint32_t rank = 0;
        TokenId merged = -1;
    };
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    const Slot* lookup(TokenId left, TokenId right) const;
    void grow();

    std::array<TokenId, 256> byte_token_;
    std::vector<Slot> slots_; // open addressing, power-of-two size, load <= 1/2
    size_t n_merges_ = 0;
};

} // namespace ninfer::core
