// ninfer::core::grammar - the LRU cache of compiled grammars.
#include "core/grammar/grammar_cache.h"

namespace ninfer::core::grammar {
namespace {

uint64_t key_hash(GrammarKind kind, std::string_view source) {
    uint64_t h = 1469598103934665603ull ^ uint64_t(kind); // FNV-1a
    for (char c : source) h = (h ^ uint8_t(c)) * 1099511628211ull;
    return h;
}

} // namespace

GrammarCache::GrammarCache(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

std::shared_ptr<const Grammar> GrammarCache::get_or_compile(GrammarKind kind, std::string_view source,
                                                            const std::function<std::shared_ptr<const Grammar>()>& compile) {
    const uint64_t h = key_hash(kind, source);
    {
        std::lock_guard lock(mutex_);
        auto [begin, end] = by_hash_.equal_range(h);
        for (auto it = begin; it != end; ++it)
            if (it->second->kind == kind && it->second->source == source) {
                lru_.splice(lru_.begin(), lru_, it->second);
                ++hits_;
                return it->second->grammar;
            }
        ++misses_;
    }
    std::shared_ptr<const Grammar> grammar = compile(); // outside the lock: compiling takes time
    if (max_entries_ == 0 || !grammar) return grammar;
    std::lock_guard lock(mutex_);
    auto [begin, end] = by_hash_.equal_range(h);
    for (auto it = begin; it != end; ++it)
        if (it->second->kind == kind && it->second->source == source) return it->second->grammar; // another thread won
    lru_.push_front({kind, std::string(source), grammar});
    by_hash_.emplace(h, lru_.begin());
    size_t bytes = 0;
    for (const Entry& e : lru_) bytes += e.grammar->memory_bytes() + e.source.size();
    while (lru_.size() > max_entries_ || (bytes > max_bytes_ && lru_.size() > 1)) {
        Entry& last = lru_.back();
        auto [b, e] = by_hash_.equal_range(key_hash(last.kind, last.source));
        for (auto it = b; it != e; ++it)
            if (&*it->second == &last) { by_hash_.erase(it); break; }
        const size_t last_bytes = last.grammar->memory_bytes() + last.source.size(); // may have grown meanwhile
        bytes = bytes > last_bytes ? bytes - last_bytes : 0;
        lru_.pop_back();
    }
    return grammar;
}

size_t GrammarCache::n_entries() const { std::lock_guard lock(mutex_); return lru_.size(); }
size_t GrammarCache::n_hits() const { std::lock_guard lock(mutex_); return hits_; }
size_t GrammarCache::n_misses() const { std::lock_guard lock(mutex_); return misses_; }

} // namespace ninfer::core::grammar
