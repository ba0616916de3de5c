// ninfer::core - prompt-lookup n-gram drafter: an index of each n-gram's latest end position.
#include "core/engine/ngram_drafter.h"

#include "core/util/error.h"

#include <algorithm>
#include <string>

namespace ninfer::core {

namespace {

uint64_t mix(uint64_t x) { // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

} // namespace

NgramDrafter::NgramDrafter(NgramOptions options) : options_(options) {
    if (options.min_ngram < 1 || options.min_ngram > options.max_ngram || options.max_ngram > 16)
        throw Error("ngram: n-gram sizes " + std::to_string(options.min_ngram) + ".." +
                    std::to_string(options.max_ngram) + " are not within 1..16 in order");
}

void NgramDrafter::reset() {
    tokens_.clear();
    latest_end_.clear();
}

uint64_t NgramDrafter::key(size_t end, uint32_t length) const {
    uint64_t h = mix(length);
    for (size_t i = end + 1 - length; i <= end; ++i)
        h = mix(h ^ uint32_t(tokens_[i]));
    return h;
}

bool NgramDrafter::same(size_t end_a, size_t end_b, uint32_t length) const {
    return std::equal(tokens_.begin() + long(end_a + 1 - length), tokens_.begin() + long(end_a + 1),
                      tokens_.begin() + long(end_b + 1 - length));
}

void NgramDrafter::append(std::span<const int32_t> tokens) {
    for (int32_t t : tokens) {
        tokens_.push_back(t);
        if (tokens_.size() < 2)
            continue;
        // The n-grams ending just before the new token now have a follower: index them.
        const size_t end = tokens_.size() - 2;
        for (uint32_t n = std::max(options_.min_ngram - 1, 1u); n <= options_.max_ngram && n <= end + 1; ++n)
            latest_end_[key(end, n)] = uint32_t(end);
    }
}

std::vector<int32_t> NgramDrafter::draft(int k) const {
    const size_t size = tokens_.size();
    if (k <= 0 || size == 0)
        return {};
    for (uint32_t n = std::min<uint32_t>(options_.max_ngram, uint32_t(std::min<size_t>(size, 16)));
         n >= options_.min_ngram; --n) {
        const auto it = latest_end_.find(key(size - 1, n));
        if (it == latest_end_.end() || !same(it->second, size - 1, n))
            continue; // none, or another n-gram with the same hash
        const size_t from = size_t(it->second) + 1;
        const size_t to = std::min(size, from + size_t(k));
        return {tokens_.begin() + long(from), tokens_.begin() + long(to)};
    }
    return {};
}

bool NgramDrafter::may_draft_after_next() const {
    // A match after the next token t is a min_ngram-gram (suffix + t) that occurred earlier with a
    // follower: its first min_ngram - 1 tokens are the current suffix, at an earlier end with a
    // follower (the index of that length). A hash hit on other tokens counts as maybe.
    const uint32_t n = options_.min_ngram - 1;
    if (n == 0)
        return tokens_.size() >= 1;
    if (tokens_.size() < n)
        return false;
    return latest_end_.count(key(tokens_.size() - 1, n)) > 0;
}

} // namespace ninfer::core
