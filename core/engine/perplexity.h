// ninfer::core - perplexity of a token sequence on any Backend (sliding windows, like the
// Hugging Face recipe).
//
// Contract:
// - Windows of `context` tokens start every `stride` tokens (stride 0 or > context means
//   stride = context: disjoint windows). Each window is prefilled from an empty lane in chunks of
//   `chunk` tokens with every position's logits; a position is scored once, by the first window
//   that predicts it after the previous window's end, as in transformers' perplexity guide.
//   With context >= ids.size() it is one window scoring positions 1..n-1.
// - Returns the per-position NLL (-log softmax(logits[i-1])[ids[i]], f64 log-sum-exp) and their
//   mean; ppl = exp(mean). Uses lane 0 and leaves it reset.
// - Errors: ninfer::Error("perplexity: ...") for fewer than 2 tokens or context < 2.
#pragma once

#include "core/backend/backend.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core {

struct PerplexityResult {
    std::vector<double> nll; // one per scored position
    double mean_nll = 0;
    double ppl = 0;
    size_t n_windows = 0;
};

PerplexityResult perplexity(Backend& backend, std::span<const int32_t> ids, uint32_t context,
                            uint32_t stride, uint32_t chunk = 256);

} // namespace ninfer::core
