// ninfer::core::grammar - per-position token tables of one grammar over one vocabulary (XGrammar's
// adaptive token mask), and the runtime check of the tokens they leave open.
//
// Contract:
// - For a byte-set position p, PositionMask classifies every matchable token by simulating it from
//   the stack [p] with the context below unknown: accepted (its bytes are all consumed inside p's
//   rule: allowed whatever the stack below), uncertain (the rule may end before the token does:
//   the stack below decides), or rejected (neither: never allowed). accepted is a dense bitset
//   by id when large, else a sorted id list; uncertain is a list of trie ranks in ascending order
//   with each one's common prefix length with the previous (for sharing work at runtime).
// - TokenMaskCache::get(pos) computes a position's table on first use (a walk over the vocabulary
//   trie, pruned where the grammar rejects) and keeps it; later calls are one atomic load.
//   precompute(positions) fills several at once (e.g. on a worker thread before decoding).
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
#include <span>
#include <vector>

namespace ninfer::core::grammar {

struct PositionMask {
    std::vector<uint32_t> accepted_words; // dense form (n_words), or empty
    std::vector<int32_t> accepted_ids;    // sparse form when accepted_words is empty
    std::vector<uint32_t> uncertain_ranks;
    std::vector<uint16_t> uncertain_lcp;
    void add_accepted(std::span<uint32_t> words) const;
};

class TokenMaskCache {
  public:
    TokenMaskCache(const Program& program, std::shared_ptr<const TokenIndex> index);
    ~TokenMaskCache();
    const PositionMask& get(uint32_t pos);
    void precompute(std::span<const uint32_t> positions);
    const TokenIndex& index() const { return *index_; }

  private:
    PositionMask compute(uint32_t pos);
    const Program& program_;
    std::shared_ptr<const TokenIndex> index_;
    std::mutex mutex_;
    std::vector<std::atomic<const PositionMask*>> by_pos_;
    std::vector<std::unique_ptr<PositionMask>> owned_;
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
