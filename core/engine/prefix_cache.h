// ninfer::core - the prefix cache: checkpoints of finished sequences found again by their tokens.
//
// Contract (engine thread only):
// - Token sequences are cut into blocks of kPrefixBlockTokens; block k's hash chains the previous
//   block's hash with its token ids (h_k = mix(h_{k-1}, tokens of block k)), so equal hashes mean
//   equal prefixes with overwhelming probability — and every hit is still verified token by token
//   before it is used. A checkpoint of n tokens is indexed under the chain hash of its
//   floor(n / kPrefixBlockTokens) whole blocks; its key (cache list / evict) is the chain hash
//   of all n tokens, as 16 hex digits.
// - insert(image, now) stores a checkpoint (the caller takes it at the end of a prompt and at the
//   assistant boundary after a reply); an identical sequence replaces the old one. Storage and
//   eviction are the SnapshotStore's (host budget, value formula; no disk tier).
// - match(prompt, media, now) finds the longest checkpoint whose tokens are a proper prefix of
//   prompt (n < prompt.size(): at least one token must be prefilled to produce logits) and whose
//   media (LaneImage::media) are the prompt's media starting before n, digests included, so a
//   checkpoint is reused only for the same pixels; returns its image (cached_tokens =
//   image->tokens.size()), or nullptr. It does not change the index. A checkpoint's key covers
//   its tokens and its media (prefix_key(tokens, media)).
// - evict_all / evict_key / evict_older_than return (entries, bytes) removed.
#pragma once

#include "core/engine/engine_stats.h"
#include "core/engine/snapshot_store.h"

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ninfer::core {

inline constexpr uint32_t kPrefixBlockTokens = 16;

uint64_t prefix_hash_extend(uint64_t previous, std::span<const int32_t> block);
// Chain hashes of every whole block of tokens: result[k] covers blocks 0..k.
std::vector<uint64_t> prefix_block_hashes(std::span<const int32_t> tokens);
uint64_t prefix_key(std::span<const int32_t> tokens); // chain over all tokens (last block partial)
// The key of a sequence with media: the tokens' key extended by every span's position, length
// and digest (no media: prefix_key(tokens)).
uint64_t prefix_key(std::span<const int32_t> tokens, std::span<const MediaSpan> media);
std::string prefix_key_hex(uint64_t key);

struct PrefixCacheStats {
    uint64_t hits = 0, misses = 0, inserts = 0;
};

class PrefixCache {
  public:
    using Clock = SnapshotStore::Clock;
    explicit PrefixCache(SnapshotStoreOptions options);

    bool insert(LaneImage image, Clock::time_point now);
    const LaneImage* match(std::span<const int32_t> prompt, std::span<const MediaSpan> media, Clock::time_point now);
    const LaneImage* match(std::span<const int32_t> prompt, Clock::time_point now) { return match(prompt, {}, now); }

    struct Removed {
        uint64_t count = 0, bytes = 0;
    };
    Removed evict_all();
    Removed evict_key(const std::string& key_hex); // count 0 when absent
    Removed evict_older_than(double idle_s, Clock::time_point now);

    SnapshotStore& store() { return store_; }
    const SnapshotStore& store() const { return store_; }
    const PrefixCacheStats& stats() const { return stats_; }

  private:
    uint64_t block_key(std::span<const int32_t> tokens) const;
    void forget_dropped();
    void unindex(uint64_t key);
    Removed remove(uint64_t key);

    SnapshotStore store_;
    // block key -> full keys of checkpoints indexed under it
    std::unordered_multimap<uint64_t, uint64_t> by_block_;
    std::unordered_map<uint64_t, uint64_t> block_of_; // full key -> block key
    PrefixCacheStats stats_;
};

// The cache's store figures into the engine's gauges (EngineStats::host_cache_*; zeros without a
// cache). Engine thread: after the steps and admin operations that change the store.
void publish_cache_gauges(const PrefixCache* cache, EngineStats& stats);

} // namespace ninfer::core
