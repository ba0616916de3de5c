// ninfer::core::grammar - a tokenizer's vocabulary as a byte trie, built once and shared by all grammars.
//
// Contract:
// - from_tokenizer(tokenizer, end_ids): every id below tokenizer.n_ids() gets its bytes
//   (Tokenizer::token_bytes). Special added tokens (is_special) and ids with no bytes never match
//   grammar bytes; added tokens that are not special ("<tool_call>", "<think>") match their text.
//   end_ids are the tokens that end a generation (allowed exactly when the grammar accepts); empty
//   = "<|im_end|>" and "<|endoftext|>" where the tokenizer has them.
// - from_pieces(bytes_by_id, end_ids): the same from raw per-id byte strings (tests, other
//   tokenizers); an empty string never matches. end_ids must be < bytes_by_id.size().
// - The trie: nodes in depth-first preorder, children in byte order. Node i covers the tokens whose
//   bytes start with the node's path; they are ranks [rank_begin, rank_subtree_end) of
//   sorted_ids() (ids sorted by bytes), those ending exactly at the node first
//   ([rank_begin, rank_here_end)). subtree_end is the index after the node's subtree, so a walk
//   skips a subtree in O(1). Node 0 is the first child of the (implicit) root.
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {
class Tokenizer;
}

namespace ninfer::core::grammar {

struct TrieNode {
    uint32_t subtree_end = 0;
    uint32_t rank_begin = 0;
    uint32_t rank_here_end = 0;
    uint32_t rank_subtree_end = 0;
    uint16_t depth = 0; // 1 for the root's children
    uint8_t byte = 0;
};

class TokenIndex {
  public:
    static std::shared_ptr<const TokenIndex> from_tokenizer(const Tokenizer& tokenizer,
                                                            std::vector<int32_t> end_ids = {});
    static std::shared_ptr<const TokenIndex> from_pieces(std::vector<std::string> bytes_by_id,
                                                         std::vector<int32_t> end_ids);

    size_t n_tokens() const { return bytes_.size(); }     // ids 0..n_tokens()-1
    size_t n_words() const { return (bytes_.size() + 31) / 32; }
    std::string_view bytes(int32_t id) const;            // "" when the id never matches
    bool is_end(int32_t id) const;
    const std::vector<int32_t>& end_ids() const { return end_ids_; }
    const std::vector<TrieNode>& nodes() const { return nodes_; }
    const std::vector<int32_t>& sorted_ids() const { return sorted_ids_; }
    std::string_view bytes_at_rank(uint32_t rank) const { return bytes_[sorted_ids_[rank]]; }

  private:
    TokenIndex(std::vector<std::string> bytes_by_id, std::vector<int32_t> end_ids);
    std::vector<std::string> bytes_;
    std::vector<int32_t> end_ids_;
    std::vector<int32_t> sorted_ids_; // ids with matchable bytes, sorted by bytes
    std::vector<TrieNode> nodes_;
};

} // namespace ninfer::core::grammar
