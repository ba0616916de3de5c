// ninfer::core::grammar - per-request incremental matcher: which tokens may come next, and advancing.
//
// Contract:
// - Matcher(grammar, index): starts at the beginning of the grammar's root rule. Both are shared
//   and never modified; the matcher keeps its own state (a set of parse stacks plus the history of
//   accepted tokens for rollback).
// - fill_mask(words): words.size() must be >= index->n_words() (extra words are zeroed). Sets
//   bit t of words[t/32] (bit t%32) exactly when accept(t) would return true now: the token's bytes
//   continue a prefix of some string of the grammar, or t is an end token and the text so far is
//   a complete string of the grammar. Special tokens and ids beyond the index are never set.
// - accept(token): advances over the token's bytes and returns true, or returns false and keeps
//   the state when the token is not allowed. After an end token is accepted the matcher is done:
//   finished() is true, fill_mask sets no bit and accept returns false (rollback still works).
// - rollback(n): undoes the last n accepted tokens (n <= n_accepted(); more throws); for
//   speculative drafts rejected after they were accepted.
// - accepting(): the text so far is a complete string of the grammar (an end token may come).
// - finished(): nothing but an end token can follow.
// Cost: fill_mask is a few microseconds plus the tokens the per-position tables leave uncertain
// (token_masks.h); the first visit of a stack context computes its table (a memoized trie walk,
// typically 1-30 ms) and caches it in the grammar for every later request.
// Thread safety: one matcher per request, used from one thread at a time (fill_mask is const but
// uses internal scratch space).
#pragma once

#include "core/grammar/grammar.h"
#include "core/grammar/token_index.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace ninfer::core::grammar {

struct Frame {
    uint32_t pos = 0;    // program position: a byte-set element (stack tops) or a continuation
    uint32_t parent = 0; // index into the frame pool; kRootFrame = the bottom of the stack
};

class Matcher {
  public:
    Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenIndex> index);
    ~Matcher();
    Matcher(const Matcher&);
    Matcher& operator=(const Matcher&) = delete;

    void fill_mask(std::span<uint32_t> words) const;
    bool accept(int32_t token);
    void rollback(size_t n_tokens);
    bool accepting() const;
    bool finished() const;
    size_t n_accepted() const { return steps_.size() - 1; }
    // Advance over raw bytes (no token); false keeps the state. For tests and prompts.
    bool accept_bytes(std::string_view bytes);

  private:
    struct Step {
        uint32_t tops_begin, tops_end; // this step's stack tops in tops_
        uint32_t pool_size;            // frames_ size after the step
        bool accepting;
        bool ended; // an end token was accepted
    };
    bool advance_bytes(std::string_view bytes, bool& accepting);
    std::span<const Frame> tops() const;

    std::shared_ptr<const Grammar> grammar_;
    std::shared_ptr<const TokenIndex> index_;
    std::shared_ptr<TokenMaskCache> masks_;
    mutable std::vector<Frame> frames_; // continuation frames (persistent stacks share them); fill_mask
                                        // extends it while it works and restores its size
    std::vector<Frame> tops_;   // every step's tops, back to back
    std::vector<Step> steps_;
    struct Scratch;
    mutable std::unique_ptr<Scratch> scratch_;
};

// The tokens a mask allows, split: grammar tokens appended to `tokens`; returns whether an end
// token is allowed.
bool allowed_tokens(std::span<const uint32_t> words, const TokenIndex& index, std::vector<int32_t>& tokens);

// Fills a grammar's token tables ahead of the first request (on a worker thread, after compiling):
// random walks through the grammar over `index` (the shorter of two random allowed tokens; an
// allowed end token with probability 1/4, then a new walk) until `budget` has passed. Coverage is whatever the
// walks reach; contexts they miss are computed on first use as usual. Returns the steps walked.
size_t warm_up(const std::shared_ptr<const Grammar>& grammar, const std::shared_ptr<const TokenIndex>& index,
               std::chrono::milliseconds budget, uint32_t seed = 1);

} // namespace ninfer::core::grammar
