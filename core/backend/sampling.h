// ninfer::core - sampling parameters and the reference sampler (CPU). The CUDA backend's sampler
// must choose the same token for the same logits, parameters and seed.
//
// Contract:
// - temperature <= 0 (or greedy) means exact argmax, ties to the lower id.
// - Order: allowed_tokens (a constraint's bitset: every other id gets -inf) -> logit_bias -> penalties (repetition, presence, frequency over `generated`) ->
//   temperature -> top_k (any size; 0 = all) -> softmax -> top_p -> min_p (relative to the max
//   probability) -> draw with a counter-based RNG seeded by (seed, step).
// - The draw uses Philox-style hashing of (seed, step) so CPU and GPU draw the same uniform.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ninfer::core {

struct SamplingParams {
    float temperature = 0.0f;
    float top_p = 1.0f;
    int32_t top_k = 0;
    float min_p = 0.0f;
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    float repetition_penalty = 1.0f;
    uint64_t seed = 0;
    uint64_t step = 0; // index of the token being drawn, part of the RNG counter
    std::vector<std::pair<int32_t, float>> logit_bias;
    // Empty: every token. Else a bitset over ids (core/backend/token_constraint.h) that allows at
    // least one id below the vocabulary size; a view the caller keeps alive for the call (the
    // scheduler sets it per step; a request never holds one).
    std::span<const uint32_t> allowed_tokens;
    bool is_greedy() const { return temperature <= 0.0f; }
};

// Samples one token from logits (modified in place). Returns the token id.
int32_t sample_token(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> generated);
// The greedy pick of logits: the first index of the largest value (ties to the lower id); a NaN
// never wins unless it is first (then 0). What sample_token returns for greedy params.
int32_t argmax_token(std::span<const float> logits);
// Uniform in [0,1) from (seed, step): splitmix64-based, identical on host and device.
double sampling_uniform(uint64_t seed, uint64_t step);

// The distribution sample_token draws from (speculative acceptance needs it, core/backend/
// speculative.h): after bias, penalties and temperature (logits modified in place like
// sample_token's), the kept candidates in the sampler's order (logit desc, id asc) with their f64
// softmax probabilities over the top_k candidates, cut by top_p and min_p; `total` is the sum of
// the kept ones. sample_token's token is the first candidate i with
// sampling_uniform(seed, step) * total < prob[0] + ... + prob[i] (else the last). Greedy: the
// argmax alone, probability 1. Orders the whole vocabulary: for acceptance, not the decode path.
struct SamplingCandidates {
    std::vector<int32_t> ids;
    std::vector<double> prob;
    double total = 0;
};
SamplingCandidates sampling_candidates(std::span<float> logits, const SamplingParams& params,
                                       std::span<const int32_t> generated);

} // namespace ninfer::core
