// ninfer::core - sliding-window perplexity over a Backend.
#include "core/engine/perplexity.h"

#include "core/util/error.h"

#include <algorithm>
#include <cmath>

namespace ninfer::core {

static double log_softmax_at(std::span<const float> logits, int32_t id) {
    const float m = *std::max_element(logits.begin(), logits.end());
    double s = 0;
    for (float x : logits)
        s += std::exp(double(x) - double(m));
    return double(logits[size_t(id)]) - (double(m) + std::log(s));
}

PerplexityResult perplexity(Backend& backend, std::span<const int32_t> ids, uint32_t context,
                            uint32_t stride, uint32_t chunk) {
    if (ids.size() < 2)
        throw Error("perplexity: need at least 2 tokens, got " + std::to_string(ids.size()));
    if (context < 2)
        throw Error("perplexity: context must be at least 2");
    context = std::min<uint32_t>(context, backend.max_context());
    if (stride == 0 || stride > context)
        stride = context;
    chunk = std::max<uint32_t>(1, chunk);
    const size_t V = backend.vocab_size();
    PerplexityResult r;
    size_t prev_end = 0;
    std::vector<float> logits;
    for (size_t begin = 0; prev_end < ids.size(); begin += stride) {
        const size_t end = std::min(ids.size(), begin + context);
        backend.reset_lane(0);
        ++r.n_windows;
        // Score positions i in [max(prev_end, begin + 1), end) with the logits of position i-1.
        const size_t first = std::max(prev_end, begin + 1);
        for (size_t at = begin; at < end; at += chunk) {
            const size_t n = std::min<size_t>(chunk, end - at);
            const bool wanted = at + n > first - 1; // holds some position i-1 >= first-1
            backend.prefill(0, ids.subspan(at, n), wanted ? LogitsOut::All : LogitsOut::None,
                            wanted ? &logits : nullptr);
            if (!wanted)
                continue;
            for (size_t p = at; p < at + n; ++p) {
                const size_t target = p + 1;
                if (target < first || target >= end)
                    continue;
                const std::span<const float> row(logits.data() + (p - at) * V, V);
                r.nll.push_back(-log_softmax_at(row, ids[target]));
            }
        }
        prev_end = end;
        if (end == ids.size())
            break;
    }
    backend.reset_lane(0);
    double sum = 0;
    for (double x : r.nll)
        sum += x;
    r.mean_nll = sum / double(r.nll.size());
    r.ppl = std::exp(r.mean_nll);
    return r;
}

} // namespace ninfer::core
