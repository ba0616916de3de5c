// ninfer::core - prefix cache: chained block hashes, token-verified longest match over the store.
#include "core/engine/prefix_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ninfer::core {
namespace {

constexpr uint64_t kSeed = 0x9E3779B97F4A7C15ull;

uint64_t mix(uint64_t x) { // splitmix64 finaliser
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

} // namespace

uint64_t prefix_hash_extend(uint64_t previous, std::span<const int32_t> block) {
    uint64_t h = mix(previous ^ kSeed ^ block.size());
    for (int32_t t : block) h = mix(h ^ (uint64_t(uint32_t(t)) + kSeed));
    return h;
}

std::vector<uint64_t> prefix_block_hashes(std::span<const int32_t> tokens) {
    std::vector<uint64_t> out;
    uint64_t h = 0;
    for (size_t at = 0; at + kPrefixBlockTokens <= tokens.size(); at += kPrefixBlockTokens) {
        h = prefix_hash_extend(h, tokens.subspan(at, kPrefixBlockTokens));
        out.push_back(h);
    }
    return out;
}

uint64_t prefix_key(std::span<const int32_t> tokens) {
    size_t whole = tokens.size() / kPrefixBlockTokens * kPrefixBlockTokens;
    std::vector<uint64_t> blocks = prefix_block_hashes(tokens);
    uint64_t h = blocks.empty() ? 0 : blocks.back();
    return whole < tokens.size() ? prefix_hash_extend(h, tokens.subspan(whole)) : mix(h ^ 1);
}

uint64_t prefix_key(std::span<const int32_t> tokens, std::span<const MediaSpan> media) {
    uint64_t h = prefix_key(tokens);
    for (const MediaSpan& m : media) { // each item as 10 words: position, length, the digest
        int32_t words[10] = {int32_t(m.position), int32_t(m.n_tokens)};
        std::memcpy(words + 2, m.digest.data(), m.digest.size());
        h = prefix_hash_extend(h, words);
    }
    return h;
}

std::string prefix_key_hex(uint64_t key) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(key));
    return buf;
}

PrefixCache::PrefixCache(SnapshotStoreOptions options) : store_(std::move(options)) {}

uint64_t PrefixCache::block_key(std::span<const int32_t> tokens) const {
    std::vector<uint64_t> blocks = prefix_block_hashes(tokens);
    return blocks.empty() ? 0 : blocks.back();
}

void PrefixCache::unindex(uint64_t key) {
    auto b = block_of_.find(key);
    if (b == block_of_.end()) return;
    auto range = by_block_.equal_range(b->second);
    for (auto it = range.first; it != range.second; ++it)
        if (it->second == key) {
            by_block_.erase(it);
            break;
        }
    block_of_.erase(b);
}

void PrefixCache::forget_dropped() {
    for (uint64_t key : store_.take_dropped()) unindex(key);
}

bool PrefixCache::insert(LaneImage image, Clock::time_point now) {
    if (image.tokens.empty()) return false;
    uint64_t key = prefix_key(image.tokens, image.media);
    uint64_t block = block_key(image.tokens);
    remove(key);
    bool stored = store_.put(key, std::move(image), now);
    if (stored) {
        by_block_.emplace(block, key);
        block_of_[key] = block;
        ++stats_.inserts;
    }
    forget_dropped();
    return stored;
}

const LaneImage* PrefixCache::match(std::span<const int32_t> prompt, std::span<const MediaSpan> media,
                                    Clock::time_point now) {
    std::vector<uint64_t> blocks = prefix_block_hashes(prompt);
    // Longest first: block counts from the most the prompt has down to zero whole blocks.
    for (size_t k = blocks.size() + 1; k-- > 0;) {
        uint64_t block = k == 0 ? 0 : blocks[k - 1];
        uint64_t best_key = 0;
        size_t best_n = 0;
        auto range = by_block_.equal_range(block);
        for (auto it = range.first; it != range.second; ++it) {
            const SnapshotInfo* info = store_.info(it->second);
            size_t n = info ? size_t(info->n_tokens) : 0;
            if (n == 0 || n >= prompt.size() || n / kPrefixBlockTokens != k || n <= best_n) continue;
            if (prefix_key(prompt.subspan(0, n), media_within(media, n)) != it->second) continue;
            best_key = it->second;
            best_n = n;
        }
        if (best_n == 0) continue;
        const LaneImage* image = store_.get(best_key, now);
        forget_dropped();
        if (image && image->tokens.size() == best_n &&
            std::equal(image->tokens.begin(), image->tokens.end(), prompt.begin()) &&
            media_prefix_equal(image->media, media, best_n)) {
            ++stats_.hits;
            return image;
        }
    }
    ++stats_.misses;
    return nullptr;
}

PrefixCache::Removed PrefixCache::remove(uint64_t key) {
    const SnapshotInfo* info = store_.info(key);
    if (!info) return {};
    Removed r{1, info->bytes};
    store_.erase(key);
    unindex(key);
    return r;
}

PrefixCache::Removed PrefixCache::evict_all() {
    Removed total;
    for (const SnapshotInfo& s : store_.list()) {
        Removed r = remove(s.id);
        total.count += r.count;
        total.bytes += r.bytes;
    }
    return total;
}

PrefixCache::Removed PrefixCache::evict_key(const std::string& key_hex) {
    if (key_hex.size() != 16 || key_hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return {};
    return remove(std::stoull(key_hex, nullptr, 16));
}

PrefixCache::Removed PrefixCache::evict_older_than(double idle_s, Clock::time_point now) {
    Removed total;
    for (const SnapshotInfo& s : store_.list()) {
        if (std::chrono::duration<double>(now - s.last_used).count() < idle_s) continue;
        Removed r = remove(s.id);
        total.count += r.count;
        total.bytes += r.bytes;
    }
    return total;
}

void publish_cache_gauges(const PrefixCache* cache, EngineStats& stats) {
    stats.host_cache_used_bytes = cache ? cache->store().used_bytes() : 0;
    stats.host_cache_budget_bytes = cache ? cache->store().budget_bytes() : 0;
    stats.host_cache_entries = cache ? cache->store().n_entries() : 0;
}

} // namespace ninfer::core
