// ninfer tests - the sampler as first written (full sort of the vocabulary), kept verbatim as the
// oracle that core::sample_token must agree with token for token.
// Contract: reference_sample_token(logits, params, generated) == core::sample_token(...) for any
// input without NaN; it modifies logits in place exactly like the real sampler.
#pragma once

#include "core/backend/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace ninfer::test {

inline int32_t reference_argmax(std::span<const float> logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
        if (logits[i] > logits[size_t(best)])
            best = int32_t(i);
    return best;
}

inline void reference_apply_penalties(std::span<float> logits, const core::SamplingParams& p,
                                      std::span<const int32_t> generated) {
    for (const auto& [id, bias] : p.logit_bias)
        if (id >= 0 && size_t(id) < logits.size())
            logits[size_t(id)] += bias;
    if (generated.empty() || (p.presence_penalty == 0 && p.frequency_penalty == 0 &&
                              p.repetition_penalty == 1.0f))
        return;
    std::unordered_map<int32_t, int> counts;
    for (int32_t id : generated)
        if (id >= 0 && size_t(id) < logits.size())
            ++counts[id];
    for (const auto& [id, n] : counts) {
        float& l = logits[size_t(id)];
        if (p.repetition_penalty != 1.0f && p.repetition_penalty > 0)
            l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
        l -= p.presence_penalty + p.frequency_penalty * float(n);
    }
}

inline int32_t reference_sample_token(std::span<float> logits, const core::SamplingParams& p,
                                      std::span<const int32_t> generated) {
    reference_apply_penalties(logits, p, generated);
    if (p.is_greedy())
        return reference_argmax(logits);
    const float inv_t = 1.0f / p.temperature;
    for (float& l : logits)
        l *= inv_t;
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    auto higher = [&](int32_t a, int32_t b) {
        return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    };
    size_t n = ids.size();
    if (p.top_k > 0 && size_t(p.top_k) < n) {
        n = size_t(p.top_k);
        std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), higher);
        ids.resize(n);
    } else {
        std::sort(ids.begin(), ids.end(), higher);
    }
    // Softmax over the candidates (f64), then top-p and min-p cut the sorted list.
    std::vector<double> prob(n);
    const double top = logits[size_t(ids[0])];
    double sum = 0;
    for (size_t i = 0; i < n; ++i)
        sum += prob[i] = std::exp(double(logits[size_t(ids[i])]) - top);
    for (double& q : prob)
        q /= sum;
    size_t keep = n;
    if (p.top_p < 1.0f) {
        double cum = 0;
        for (size_t i = 0; i < n; ++i) {
            cum += prob[i];
            if (cum >= double(p.top_p)) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p.min_p > 0.0f) {
        const double floor = double(p.min_p) * prob[0];
        size_t i = 1;
        while (i < keep && prob[i] >= floor)
            ++i;
        keep = i;
    }
    double total = 0;
    for (size_t i = 0; i < keep; ++i)
        total += prob[i];
    const double u = core::sampling_uniform(p.seed, p.step) * total;
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
        cum += prob[i];
        if (u < cum)
            return ids[i];
    }
    return ids[keep - 1];
}

} // namespace ninfer::test
