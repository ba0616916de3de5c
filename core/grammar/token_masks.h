// ninfer::core::grammar - per-position token tables of one grammar over one vocabulary (XGrammar's
// adaptive token mask), and the runtime check of the tokens they leave open.
//
// Contract:
// - A table is keyed by a stack's context: the top's position and the positions of its nearest
//   kContextFrames continuation frames (fewer when the stack is shallower, then the bottom is
//   the root). PositionMask classifies every matchable token by simulating it from that partial
//   stack with what lies below it unknown: accepted (all its bytes are consumed without popping
//   past the partial stack: allowed whatever lies below), uncertain (the partial stack may empty
//   before the token ends: the real stack decides), or rejected (never allowed). A deeper context
//   leaves fewer tokens uncertain (a string's characters see its closing quote) but makes more
//   distinct tables. accepted is a dense bitset by id when large, else a sorted id list; uncertain
//   is a list of trie ranks in ascending order with each one's common prefix length with the
//   previous (for sharing work at runtime).
// - TokenMaskCache::get(top, pool) computes a context's table on first use (a walk over the
//   vocabulary trie, pruned where the grammar rejects) and keeps it; later calls are a hash lookup
//   under a shared lock.
// - MaskWalker::add_uncertain(mask, top, pool, words) sets the bits of the uncertain tokens that the
//   real stack `top` accepts; tokens that share a prefix which already failed are skipped in O(1).
//   It extends pool while it works and restores its size before returning.
// Thread safety: TokenMaskCache is safe to share; a MaskWalker is per thread.
#pragma once

#include "core/grammar/grammar_program.h"
#include "core/grammar/pda.h"
#include "core/grammar/token_index.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <span>
#include <vector>

namespace ninfer::core::grammar {

struct PositionMask {
    std::vector<uint32_t> accepted_words; // dense form (n_words), or empty
    std::vector<int32_t> accepted_ids;    // sparse form when accepted_words is empty
    std::vector<uint32_t> uncertain_ranks;
    std::vector<uint16_t> uncertain_lcp;
    void add_accepted(std::span<uint32_t> words) const;
    size_t memory_bytes() const {
        return accepted_words.size() * 4 + accepted_ids.size() * 4 + uncertain_ranks.size() * 4 + uncertain_lcp.size() * 2;
    }
};

class TokenMaskCache {
  public:
    TokenMaskCache(const Program& program, std::shared_ptr<const TokenIndex> index);
    ~TokenMaskCache();
    static constexpr size_t kContextFrames = 4;
    const PositionMask& get(Frame top, const std::vector<Frame>& pool);
    const TokenIndex& index() const { return *index_; }
    size_t n_tables() const;
    size_t memory_bytes() const; // the tables computed so far

  private:
    PositionMask compute(const std::vector<uint32_t>& context, bool reaches_root);
    const Program& program_;
    std::shared_ptr<const TokenIndex> index_;
    mutable std::shared_mutex mutex_;
    std::unordered_map<std::string, std::unique_ptr<PositionMask>> tables_;
};

// Depth-indexed stack sets for walking token bytes with prefix sharing.
class MaskWalker {
  public:
    explicit MaskWalker(const Program& program) : program_(program), stepper_(program) {}
    void add_uncertain(const TokenIndex& index, const PositionMask& mask, Frame top, std::vector<Frame>& pool,
                       std::span<uint32_t> words);

    // Levels: level k holds the tops after k bytes. reset(top) makes level 0 = {top}.
    void reset(Frame top, std::vector<Frame>& pool);
    void truncate(size_t n_levels, std::vector<Frame>& pool);
    // Advances the last level by byte into a new level; returns the step's result.
    CloseResult push(uint8_t byte, std::vector<Frame>& pool);
    size_t n_levels() const { return level_end_.size(); }
    bool last_level_empty() const { return level_end_.back() == level_begin(level_end_.size() - 1); }

  private:
    size_t level_begin(size_t k) const { return k == 0 ? 0 : level_end_[k - 1]; }
    const Program& program_;
    Stepper stepper_;
    std::vector<Frame> tops_;
    std::vector<uint32_t> level_end_;  // tops_ end of each level
    std::vector<uint32_t> level_pool_; // pool size after each level
    std::vector<Frame> out_;
};

} // namespace ninfer::core::grammar
