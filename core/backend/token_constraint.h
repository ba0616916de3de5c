// ninfer::core - the per-lane token constraint seam (constrained decoding, issue 32): what a
// grammar matcher offers the scheduler and the samplers, and the allowed-token bitset they share.
//
// Contract:
// - A TokenConstraint is one request's parser state over token ids (a grammar matcher, or the
//   reply gate of core/engine/reply_constraint.h around one). It is owned by the request and used
//   on the engine thread only.
//   * fill_mask(words) writes EVERY word of `words`: bit (t % 32) of words[t / 32] set = token t
//     may come next. Ids beyond what the constraint knows (a model vocabulary padded past the
//     tokenizer's) are cleared. An end token (end of turn, EOS) is set iff the constraint is
//     accepting.
//   * accept(t) advances by one token and returns true, or returns false and changes nothing when
//     t is not allowed.
//   * rollback(n) undoes the last n accepted tokens (n <= the number accepted).
//   * accepting(): what has been accepted is a complete sentence (an end token may come next).
//   * finished(): nothing but an end token may come next (or one was accepted): the reply is done.
// - The bitset is the sampler's input: SamplingParams::allowed_tokens (core/backend/sampling.h)
//   views it for one call; the sampler sets every disallowed logit to -inf before logit_bias,
//   penalties, temperature and top-k/top-p/min-p (so they compose). A bitset that allows no id
//   below the vocabulary size must not reach the sampler: callers check with
//   token_mask_count first (the scheduler ends such a request with FinishReason::ConstraintFailed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ninfer::core {

class TokenConstraint {
  public:
    virtual ~TokenConstraint() = default;
    virtual void fill_mask(std::span<uint32_t> words) const = 0;
    virtual bool accept(int32_t token) = 0;
    virtual void rollback(size_t n) = 0;
    virtual bool accepting() const = 0;
    virtual bool finished() const = 0;
};

// 32-bit words a bitset over `vocab` ids takes.
inline size_t token_mask_words(uint32_t vocab) { return (size_t(vocab) + 31) / 32; }

inline bool token_mask_test(std::span<const uint32_t> words, int32_t id) {
    return id >= 0 && size_t(id) / 32 < words.size() && ((words[size_t(id) / 32] >> (uint32_t(id) % 32)) & 1u);
}

inline void token_mask_set(std::span<uint32_t> words, int32_t id, bool allowed) {
    if (id < 0 || size_t(id) / 32 >= words.size()) return;
    const uint32_t bit = 1u << (uint32_t(id) % 32);
    words[size_t(id) / 32] = allowed ? (words[size_t(id) / 32] | bit) : (words[size_t(id) / 32] & ~bit);
}

// How many ids below `vocab` the bitset allows.
size_t token_mask_count(std::span<const uint32_t> words, uint32_t vocab);

// logits[t] = -inf for every t the bitset does not allow (ids past the bitset included).
void apply_token_mask(std::span<float> logits, std::span<const uint32_t> words);

} // namespace ninfer::core
