// ninfer::core - accept drafts: greedy prefix match, or speculative (rejection) sampling.
#include "core/backend/speculative.h"

#include "core/util/error.h"

#include <string>
#include <vector>

namespace ninfer::core {

namespace {

// The candidate whose cumulative probability first exceeds u * total (else the last), skipping
// `skip` (a rejected draft): sample_token's draw over the same candidates.
int32_t draw(const SamplingCandidates& c, double u, int32_t skip, double total) {
    const double at = u * total;
    double cum = 0;
    int32_t last = c.ids.empty() ? 0 : c.ids.back();
    for (size_t i = 0; i < c.ids.size(); ++i) {
        if (c.ids[i] == skip)
            continue;
        last = c.ids[i];
        cum += c.prob[i];
        if (at < cum)
            return c.ids[i];
    }
    return last;
}

} // namespace

DraftAcceptance accept_drafts(std::span<float> rows, size_t vocab, std::span<const int32_t> drafts,
                              const SamplingParams& params, std::span<const int32_t> generated) {
    if (vocab == 0 || rows.size() != (drafts.size() + 1) * vocab)
        throw Error("speculative: " + std::to_string(rows.size()) + " logits for " +
                    std::to_string(drafts.size()) + " drafts of vocabulary " + std::to_string(vocab));
    std::vector<int32_t> seen(generated.begin(), generated.end());
    SamplingParams p = params;
    for (size_t j = 0;; ++j) {
        p.step = params.step + j;
        const std::span<float> row = rows.subspan(j * vocab, vocab);
        if (j == drafts.size()) // every draft accepted: the bonus, drawn as plain decoding would
            return {uint32_t(j), sample_token(row, p, seen)};
        const SamplingCandidates c = sampling_candidates(row, p, seen);
        const int32_t d = drafts[j];
        double pd = 0;
        for (size_t i = 0; i < c.ids.size(); ++i)
            if (c.ids[i] == d)
                pd = c.prob[i];
        if (p.is_greedy()) {
            if (c.ids[0] != d)
                return {uint32_t(j), c.ids[0]};
        } else if (!(sampling_uniform(accept_seed(p.seed), p.step) * c.total < pd)) {
            return {uint32_t(j), draw(c, sampling_uniform(p.seed, p.step), d, c.total - pd)};
        }
        seen.push_back(d);
    }
}

std::vector<int32_t> greedy_argmax_rows(std::span<const float> rows, size_t vocab) {
    if (vocab == 0 || rows.size() % vocab != 0)
        throw Error("speculative: " + std::to_string(rows.size()) + " logits are not rows of vocabulary " +
                    std::to_string(vocab));
    std::vector<int32_t> ids(rows.size() / vocab);
    for (size_t r = 0; r < ids.size(); ++r) ids[r] = argmax_token(rows.subspan(r * vocab, vocab));
    return ids;
}

bool greedy_fast_path(const SamplingParams& p, bool constrained, bool logprobs, int n_top) {
    return p.is_greedy() && p.logit_bias.empty() && p.allowed_tokens.empty() && p.presence_penalty == 0.f &&
           p.frequency_penalty == 0.f && p.repetition_penalty == 1.f && !constrained && !logprobs && n_top == 0;
}

DraftAcceptance accept_greedy_ids(std::span<const int32_t> ids, std::span<const int32_t> drafts) {
    if (ids.size() != drafts.size() + 1)
        throw Error("speculative: " + std::to_string(ids.size()) + " greedy ids for " + std::to_string(drafts.size()) +
                    " drafts");
    uint32_t m = 0;
    while (m < drafts.size() && drafts[m] == ids[m]) ++m;
    return {m, ids[m]};
}

} // namespace ninfer::core
