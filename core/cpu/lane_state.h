// ninfer::core - the CPU backend's sequence state: the paged KV pool and per-lane state.
//
// Contract:
// - KvStore owns plan.kv_pages pages of kKvPageTokens tokens for every full-attention layer (and,
//   with plan.mtp, the MTP layer as one more layer after them, at the same page slots), K and
//   V rows encoded in plan.kv_dtype (kv_codec.h). Pages are handed out from a free list; a lane
//   owns the pages in its page table. allocate() throws ninfer::Error("backend: KV pool full ...").
// - LaneState holds a lane's tokens, page table, GDN conv history and recurrent state (layouts of
//   memory_plan.h) and the logits of its last step; for speculative decoding also the MTP head's
//   progress (mtp_length + the pending hidden rows always equal tokens.size()) and the open verify
//   window with its GDN snapshots (cpu_backend.h).
// Thread safety: engine thread; row() may be called concurrently for distinct rows.
#pragma once

#include "core/backend/backend.h"
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
    // Returns the pages past the ones n_tokens positions need to the free list.
    void truncate(std::vector<uint32_t>& pages, uint32_t n_tokens);
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
    // RoPE position of token index i is i + rope_offset: 0 for text, next M-RoPE position minus
    // the length after a multimodal prefill (backend.h prefill_with).
    int64_t rope_offset = 0;

    // MTP head: MTP positions [0, mtp_length) are in the KV; mtp_hidden holds the final-normed
    // hidden rows ([rows][H]) of positions [mtp_length, tokens.size()), waiting for their next token.
    uint32_t mtp_length = 0;
    std::vector<float> mtp_hidden;
    // The RoPE positions of those pending rows (their main-model positions: M-RoPE ones from a
    // multimodal prefill), and while a multimodal chunk's rows are fed to the head, that chunk's
    // inputs from token index mtp_chunk_start on: a placeholder's next-token input is its tower row
    // (docs/MODEL.md §8), not the placeholder's embedding.
    std::vector<MropePosition> mtp_rope;
    const PrefillInputs* mtp_chunk = nullptr;
    uint32_t mtp_chunk_start = 0;

    // Open verify window: positions [verify_start, verify_start + verify_count) of the last verify
    // step; snapshot i (i < verify_count - 1) is the GDN state after the window's token i.
    uint32_t verify_start = 0, verify_count = 0;
    // Once accepted (verify_kept tokens of it, 0 before) the window stays re-acceptable to fewer
    // (backend.h accept_verified): a draft since then first saves the head's progress as the
    // accept left it (verify_mtp_*), which a smaller keep puts back.
    uint32_t verify_kept = 0;
    bool verify_mtp_saved = false;
    uint32_t verify_mtp_length = 0;
    std::vector<float> verify_mtp_hidden;
    std::vector<MropePosition> verify_mtp_rope;
    std::vector<float> verify_conv;      // [max_draft_tokens][conv floats]
    std::vector<float> verify_recurrent; // [max_draft_tokens][recurrent floats]
    std::vector<float> verify_logits;    // [verify_count][vocab]
};

} // namespace ninfer::core::cpu
