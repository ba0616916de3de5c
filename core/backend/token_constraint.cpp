// ninfer::core - allowed-token bitsets: counting them and applying them to a row of logits.
#include "core/backend/token_constraint.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace ninfer::core {

size_t token_mask_count(std::span<const uint32_t> words, uint32_t vocab) {
    const size_t full = std::min(words.size(), size_t(vocab) / 32);
    size_t n = 0;
    for (size_t w = 0; w < full; ++w) n += size_t(std::popcount(words[w]));
    if (full < words.size() && vocab % 32 != 0)
        n += size_t(std::popcount(words[full] & ((1u << (vocab % 32)) - 1u)));
    return n;
}

void apply_token_mask(std::span<float> logits, std::span<const uint32_t> words) {
    constexpr float kNever = -std::numeric_limits<float>::infinity();
    const size_t n = logits.size();
    for (size_t w = 0; w * 32 < n; ++w) {
        const uint32_t bits = w < words.size() ? words[w] : 0u;
        if (bits == ~0u) continue;
        const size_t end = std::min(n, w * 32 + 32);
        for (size_t t = w * 32; t < end; ++t)
            if (!((bits >> (t % 32)) & 1u)) logits[t] = kNever;
    }
}

} // namespace ninfer::core
