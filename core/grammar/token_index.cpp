// ninfer::core::grammar - the vocabulary byte trie (depth-first node array) built from a tokenizer.
#include "core/grammar/token_index.h"

#include "core/frontend/tokenizer.h"
#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core::grammar {

std::shared_ptr<const TokenIndex> TokenIndex::from_tokenizer(const Tokenizer& tokenizer, std::vector<int32_t> end_ids) {
    std::vector<std::string> bytes(tokenizer.n_ids());
    for (size_t id = 0; id < bytes.size(); ++id) {
        const auto t = TokenId(id);
        if (tokenizer.is_known(t) && !tokenizer.is_special(t)) bytes[id] = std::string(tokenizer.token_bytes(t));
    }
    if (end_ids.empty())
        for (const char* text : {"<|im_end|>", "<|endoftext|>"})
            if (auto id = tokenizer.find_token(text)) end_ids.push_back(*id);
    return from_pieces(std::move(bytes), std::move(end_ids));
}

std::shared_ptr<const TokenIndex> TokenIndex::from_pieces(std::vector<std::string> bytes_by_id, std::vector<int32_t> end_ids) {
    for (int32_t id : end_ids)
        if (id < 0 || size_t(id) >= bytes_by_id.size())
            throw Error("grammar: token index: end token id " + std::to_string(id) + " is out of range");
    return std::shared_ptr<const TokenIndex>(new TokenIndex(std::move(bytes_by_id), std::move(end_ids)));
}

TokenIndex::TokenIndex(std::vector<std::string> bytes_by_id, std::vector<int32_t> end_ids)
    : bytes_(std::move(bytes_by_id)), end_ids_(std::move(end_ids)) {
    for (int32_t id : end_ids_) bytes_[size_t(id)].clear(); // an end token is never grammar text
    for (size_t id = 0; id < bytes_.size(); ++id)
        if (!bytes_[id].empty()) sorted_ids_.push_back(int32_t(id));
    std::sort(sorted_ids_.begin(), sorted_ids_.end(),
              [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)] || (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b); });
    // Preorder nodes: each token adds the nodes of its bytes beyond the common prefix with the
    // previous token (sorted order visits a trie depth-first). open[d] = node at depth d+1 on
    // the current path.
    std::vector<uint32_t> open;
    std::string_view previous;
    auto close_to = [&](size_t depth, uint32_t rank) {
        while (open.size() > depth) {
            TrieNode& node = nodes_[open.back()];
            node.subtree_end = uint32_t(nodes_.size());
            node.rank_subtree_end = rank;
            open.pop_back();
        }
    };
    for (uint32_t rank = 0; rank < sorted_ids_.size(); ++rank) {
        const std::string_view b = bytes_[size_t(sorted_ids_[rank])];
        size_t common = 0;
        while (common < previous.size() && common < b.size() && previous[common] == b[common]) ++common;
        close_to(common, rank);
        for (size_t d = common; d < b.size(); ++d) {
            TrieNode node;
            node.byte = uint8_t(b[d]);
            node.depth = uint16_t(std::min<size_t>(d + 1, UINT16_MAX));
            node.rank_begin = node.rank_here_end = rank;
            open.push_back(uint32_t(nodes_.size()));
            nodes_.push_back(node);
        }
        nodes_[open.back()].rank_here_end = rank + 1;
        previous = b;
    }
    close_to(0, uint32_t(sorted_ids_.size()));
}

std::string_view TokenIndex::bytes(int32_t id) const {
    if (id < 0 || size_t(id) >= bytes_.size()) return {};
    return bytes_[size_t(id)];
}

bool TokenIndex::is_end(int32_t id) const {
    return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

} // namespace ninfer::core::grammar
