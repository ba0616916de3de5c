// ninfer::core - n-gram drafts for speculative decoding (prompt lookup): the tokens that followed the
// most recent earlier occurrence of the longest recurring suffix of the sequence. Needs no model
// head, so it drafts for artifacts without an MTP component (issue 28 item 4).
//
// Contract:
// - A drafter holds one sequence (a lane's prompt, then every token committed after it): append()
//   adds tokens, reset() starts a new sequence. Append-only: a scheduler appends accepted tokens
//   only (drafts never enter), so nothing is ever taken back.
// - draft(k) finds the longest suffix of the sequence, between options.max_ngram and
//   options.min_ngram tokens long, that also ends at an earlier position; among those earlier
//   occurrences it takes the most recent, and returns up to k tokens that followed it (fewer where
//   the sequence ends first; none when no suffix of min_ngram tokens recurs or k <= 0).
// - may_draft_after_next() says whether draft(k > 0) could return anything once one more token,
//   whatever it is, is appended: false only when no suffix of min_ngram tokens can recur then (the
//   last min_ngram - 1 tokens never occurred earlier with a token after them). The scheduler asks
//   it before ending a pipelined step for a round whose next token is still on the device.
// - Cost: append is O(max_ngram - min_ngram + 2) hash-map inserts per token (each n-gram is indexed
//   once it has a following token); draft is O(max_ngram^2 + k). Hash hits are checked against the
//   tokens, so collisions never produce a wrong match.
// - Options: 1 <= min_ngram <= max_ngram <= 16, else ninfer::Error("ngram: ...").
// Thread safety: none (one drafter per lane, engine thread).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace ninfer::core {

struct NgramOptions {
    uint32_t min_ngram = 2;
    uint32_t max_ngram = 4;
};

class NgramDrafter {
  public:
    explicit NgramDrafter(NgramOptions options = {});

    void reset();
    void append(std::span<const int32_t> tokens);
    std::vector<int32_t> draft(int k) const;
    bool may_draft_after_next() const;
    const std::vector<int32_t>& tokens() const { return tokens_; }

  private:
    uint64_t key(size_t end, uint32_t length) const; // n-gram tokens[end - length + 1 .. end]
    bool same(size_t end_a, size_t end_b, uint32_t length) const;

    NgramOptions options_;
    std::vector<int32_t> tokens_;
    // (length, hash) -> the latest end position of such an n-gram that has a following token;
    // lengths min_ngram - 1 (when >= 1) .. max_ngram.
    std::unordered_map<uint64_t, uint32_t> latest_end_;
};

} // namespace ninfer::core
