// ninfer::core::grammar - a thread-safe cache of compiled grammars keyed by (kind, source text).
//
// Contract:
// - get_or_compile(kind, source, compile) returns the cached grammar for (kind, source) or calls
//   compile() (outside the lock; two threads may compile the same key at once, the first to finish
//   is kept) and caches its result. An exception from compile() propagates and nothing is cached.
// - Bounded by both a count and a byte size (Grammar::memory_bytes, which grows as requests fill
//   token tables; summed anew at each insertion): least recently used entries are dropped first;
//   a dropped grammar lives on while requests hold it. max_entries 0 disables caching.
// - The key is a 64-bit hash of (kind, source) with the full text compared on a hit, so a hash
//   collision never returns the wrong grammar.
// Thread safety: all members may be called concurrently.
#pragma once

#include "core/grammar/grammar.h"

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ninfer::core::grammar {

enum class GrammarKind : uint8_t { JsonSchema, Gbnf, JsonObject, ToolCalls };

class GrammarCache {
  public:
    explicit GrammarCache(size_t max_entries = 64, size_t max_bytes = size_t(256) << 20);
    std::shared_ptr<const Grammar> get_or_compile(GrammarKind kind, std::string_view source,
                                                  const std::function<std::shared_ptr<const Grammar>()>& compile);
    size_t n_entries() const;
    size_t n_hits() const;
    size_t n_misses() const;

  private:
    struct Entry {
        GrammarKind kind;
        std::string source;
        std::shared_ptr<const Grammar> grammar;
    };
    mutable std::mutex mutex_;
    size_t max_entries_, max_bytes_, hits_ = 0, misses_ = 0;
    std::list<Entry> lru_; // front = most recent
    std::unordered_multimap<uint64_t, std::list<Entry>::iterator> by_hash_;
};

} // namespace ninfer::core::grammar
