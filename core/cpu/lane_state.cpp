// ninfer::core - the CPU backend's paged KV pool.
#include "core/cpu/lane_state.h"

#include "core/util/error.h"

namespace ninfer::core::cpu {

KvStore::KvStore(const ModelConfig& c, const MemoryPlan& plan)
    : n_kv_heads_(c.num_key_value_heads), row_bytes_(plan.kv_row_bytes) {
    const uint64_t per_tensor = uint64_t(plan.kv_pages) * kKvPageTokens * n_kv_heads_ * row_bytes_;
    storage_.resize(2ull * (c.n_full_attention_layers() + (plan.mtp ? 1 : 0)));
    for (auto& s : storage_)
        s.assign(per_tensor, 0);
    for (uint32_t p = plan.kv_pages; p-- > 0;)
        free_.push_back(p);
}

void KvStore::reserve(std::vector<uint32_t>& pages, uint32_t n_tokens) {
    const uint32_t need = (n_tokens + kKvPageTokens - 1) / kKvPageTokens;
    if (need > pages.size() + free_.size())
        throw Error("backend: KV pool full: " + std::to_string(need - pages.size()) +
                    " more pages needed, " + std::to_string(free_.size()) + " free");
    while (pages.size() < need) {
        pages.push_back(free_.back());
        free_.pop_back();
    }
}

void KvStore::truncate(std::vector<uint32_t>& pages, uint32_t n_tokens) {
    const uint32_t keep = (n_tokens + kKvPageTokens - 1) / kKvPageTokens;
    while (pages.size() > keep) {
        free_.push_back(pages.back());
        pages.pop_back();
    }
}

void KvStore::release(std::vector<uint32_t>& pages) {
    for (auto it = pages.rbegin(); it != pages.rend(); ++it)
        free_.push_back(*it);
    pages.clear();
}

} // namespace ninfer::core::cpu
