// ninfer::core - the CPU backend's sequence state: the paged KV pool and per-lane state.
//
// Contract:
// - KvStore owns plan.kv_pages pages of kKvPageTokens tokens for every full-attention layer, K and
//   V rows encoded in plan.kv_dtype (kv_codec.h). Pages are handed out from a free list; a lane
//   owns the pages in its page table. allocate() throws ninfer::Error("backend: KV pool full ...").
// - LaneState holds a lane's tokens, page table, GDN conv history and recurrent state (layouts of
//   memory_plan.h) and the logits of its last step.
// Thread safety: engine thread; row() may be called concurrently for distinct rows.
#pragma once

#include "core/model/config.h"
#include "core/model/memory_plan.h"

#include <cstdint>
#include <vector>

namespace ninfer::core::cpu {

class KvStore {
  public:
    KvStore(const ModelConfig& config, const MemoryPlan& plan);

    uint64_t row_bytes() const { return row_bytes_; }
    // Row of (full-attention layer index among full layers, K or V, position, KV head).
    uint8_t* row(uint32_t full_layer, bool value, const std::vector<uint32_t>& pages,
                 uint32_t position, uint32_t kv_head) {
        const uint64_t slot = uint64_t(pages[position / kKvPageTokens]) * kKvPageTokens +
                              position % kKvPageTokens;
        return storage_[2 * full_layer + value].data() + (slot * n_kv_heads_ + kv_head) * row_bytes_;
    }
    const uint8_t* row(uint32_t full_layer, bool value, const std::vector<uint32_t>& pages,
                       uint32_t position, uint32_t kv_head) const {
        return const_cast<KvStore*>(this)->row(full_layer, value, pages, position, kv_head);
    }

    // Grows a page table to hold n_tokens positions.
    void reserve(std::vector<uint32_t>& pages, uint32_t n_tokens);
    void release(std::vector<uint32_t>& pages);
    uint32_t free_pages() const { return uint32_t(free_.size()); }

  private:
    uint32_t n_kv_heads_ = 0;
    uint64_t row_bytes_ = 0;
    std::vector<std::vector<uint8_t>> storage_; // [full layer][K, V]
    std::vector<uint32_t> free_;
};

struct LaneState {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> pages;
    std::vector<float> conv;      // [n_gdn][kernel-1][conv_dim]
    std::vector<float> recurrent; // [n_gdn][Hv][Dk][Dv]
    std::vector<float> logits;    // last step's logits (vocab)
    bool has_logits = false;
};

} // namespace ninfer::core::cpu
