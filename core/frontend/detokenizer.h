// ninfer::core - incremental detokenization for streaming output.
//
// Contract:
// - A Detokenizer turns generated ids into text deltas: push(id) returns the text that became
//   final with this id (possibly ""). Bytes that may still be the start of a UTF-8 character are
//   held back, so a delta never contains a broken sequence; an ill-formed sequence becomes U+FFFD
//   as soon as it is known to be ill-formed.
// - finish() returns the held-back bytes as text (an incomplete trailing sequence becomes one
//   U+FFFD, as Hugging Face's decode does) and resets for a new generation. Hence
//   concat(push(...)..., finish()) == Tokenizer::decode(all ids) exactly, for any ids.
// - Ids the tokenizer does not know (embedding padding rows) contribute no text and never throw;
//   with skip_special_tokens, special added tokens contribute none either (as decode's flag).
// - The Tokenizer must outlive the Detokenizer. One Detokenizer per sequence; not thread-safe.
#pragma once

#include "core/frontend/tokenizer.h"

#include <string>

namespace ninfer::core {

class Detokenizer {
  public:
    explicit Detokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false)
        : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

    std::string push(TokenId id);
    std::string finish();
    size_t n_pending_bytes() const { return pending_.size(); }

  private:
    const Tokenizer* tokenizer_;
    bool skip_special_tokens_;
    std::string pending_; // bytes that may be the first part of a UTF-8 sequence
};

} // namespace ninfer::core
