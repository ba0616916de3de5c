// ninfer::core - size the weights, KV pool, GDN state slots and workspaces; refuse what won't fit.
#include "core/model/memory_plan.h"

#include "core/model/kv_codec.h"
#include "core/util/error.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace ninfer::core {
namespace {

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

uint64_t plan_workspace_bytes(const ModelConfig& c, uint32_t chunk, int lanes, uint32_t max_context,
                              uint32_t max_draft_tokens) {
    const uint64_t H = c.hidden_size;
    const uint64_t ffn = c.is_moe() ? std::max(c.moe_intermediate_size, c.shared_expert_intermediate_size)
                                    : c.intermediate_size;
    const uint64_t proj = std::max<uint64_t>({2ull * c.attn_q_dim() + 2ull * c.attn_kv_dim(),
                                              uint64_t(c.gdn_conv_dim()) + 2ull * c.gdn_value_dim(),
                                              2 * ffn, c.num_experts});
    const uint64_t per_token = 4 * H + 2 * proj;
    const uint64_t rows = std::max<uint64_t>(chunk, uint64_t(lanes));
    // Activations of one chunk, attention scores and decoded history for one chunk, per-lane
    // logits, one GDN chunk's scratch per value head.
    const uint64_t floats = rows * per_token + 2ull * max_context * c.head_dim +
                            uint64_t(chunk) * std::min<uint64_t>(max_context, 4096) +
                            uint64_t(lanes + 1) * c.vocab_size +
                            4ull * 64 * (c.linear_key_head_dim + c.linear_value_head_dim + 64) +
                            // MTP pending hidden rows, verify windows' logits
                            uint64_t(lanes) * (max_draft_tokens + 2) * H +
                            (max_draft_tokens ? uint64_t(lanes) * (max_draft_tokens + 1) * c.vocab_size : 0);
    return floats * sizeof(float);
}

} // namespace

MemoryPlan MemoryPlan::make(const ModelConfig& c, const MemoryRequest& r) {
    if (r.max_concurrency < 1 || r.max_concurrency > kMaxConcurrency)
        throw Error("plan: max-concurrency " + std::to_string(r.max_concurrency) + " is not in 1..8");
    MemoryPlan p;
    p.kv_dtype = r.kv_dtype;
    p.n_lanes = r.max_concurrency;
    p.max_context = r.max_context ? r.max_context : c.max_position_embeddings;
    if (p.max_context == 0 || (c.max_position_embeddings && p.max_context > c.max_position_embeddings))
        throw Error("plan: max-context " + std::to_string(p.max_context) + " is not in 1.." +
                    std::to_string(c.max_position_embeddings));
    p.prefill_chunk = std::max<uint32_t>(1, r.prefill_chunk);
    if (r.max_draft_tokens > kMaxDraftTokens)
        throw Error("plan: max draft tokens " + std::to_string(r.max_draft_tokens) + " is not in 0.." +
                    std::to_string(kMaxDraftTokens));
    p.kv_row_bytes = ninfer::core::kv_row_bytes(r.kv_dtype, c.head_dim);
    p.kv_bytes_per_token =
        2ull * c.n_full_attention_layers() * c.num_key_value_heads * p.kv_row_bytes;
    p.mtp = r.mtp;
    p.kv_mtp_bytes_per_token = r.mtp ? 2ull * c.num_key_value_heads * p.kv_row_bytes : 0;
    const uint64_t kv_per_token = p.kv_bytes_per_token + p.kv_mtp_bytes_per_token;
    const uint64_t n_gdn = c.n_linear_attention_layers();
    p.gdn_conv_bytes_per_lane =
        n_gdn * uint64_t(c.linear_conv_kernel_dim - 1) * c.gdn_conv_dim() * sizeof(float);
    p.gdn_recurrent_bytes_per_lane = n_gdn * uint64_t(c.linear_num_value_heads) *
                                     c.linear_key_head_dim * c.linear_value_head_dim * sizeof(float);
    p.gdn_bytes = uint64_t(p.n_lanes) * (p.gdn_conv_bytes_per_lane + p.gdn_recurrent_bytes_per_lane);
    p.max_draft_tokens = r.max_draft_tokens;
    p.gdn_verify_bytes_per_lane =
        uint64_t(p.max_draft_tokens) * (p.gdn_conv_bytes_per_lane + p.gdn_recurrent_bytes_per_lane);
    p.gdn_verify_bytes = uint64_t(p.n_lanes) * p.gdn_verify_bytes_per_lane;
    p.weight_bytes = r.weight_bytes;
    p.workspace_bytes =
        plan_workspace_bytes(c, p.prefill_chunk, p.n_lanes, p.max_context, p.max_draft_tokens) +
        r.backend_workspace_bytes;
    p.available_bytes = r.available_bytes;
    p.margin_bytes = r.margin_bytes;

    const uint64_t fixed = p.weight_bytes + p.gdn_bytes + p.gdn_verify_bytes + p.workspace_bytes;
    const uint64_t one_sequence = round_up(p.max_context, kKvPageTokens);
    const uint64_t wanted = uint64_t(p.n_lanes) * one_sequence;
    uint64_t capacity = round_up(r.kv_capacity_tokens, kKvPageTokens);
    if (r.kv_capacity_tokens == 0) {
        capacity = wanted;
        if (kv_per_token) {
            const uint64_t room = r.available_bytes > fixed + r.margin_bytes
                                      ? r.available_bytes - fixed - r.margin_bytes
                                      : 0;
            capacity = std::min(wanted, room / kv_per_token / kKvPageTokens * kKvPageTokens);
            capacity = std::max(capacity, one_sequence); // the fit check below reports any deficit
        }
    }
    if (capacity < one_sequence)
        throw Error("plan: kv-capacity " + std::to_string(capacity) +
                    " tokens is smaller than one max-context sequence (" +
                    std::to_string(one_sequence) + " tokens); deficit " +
                    std::to_string((one_sequence - capacity) * kv_per_token) + " bytes");
    p.kv_capacity_tokens = capacity;
    p.kv_pages = uint32_t(capacity / kKvPageTokens);
    p.kv_bytes = capacity * kv_per_token;
    p.total_bytes = fixed + p.kv_bytes;
    if (p.total_bytes + p.margin_bytes > p.available_bytes) {
        const uint64_t deficit = p.total_bytes + p.margin_bytes - p.available_bytes;
        throw Error("plan: does not fit: needs " + std::to_string(p.total_bytes) + " bytes (" +
                    p.describe() + ") plus a margin of " + std::to_string(p.margin_bytes) +
                    ", but " + std::to_string(p.available_bytes) + " are available; deficit " +
                    std::to_string(deficit) + " bytes");
    }
    return p;
}

std::string MemoryPlan::describe() const {
    auto mib = [](uint64_t b) {
        char s[32];
        std::snprintf(s, sizeof s, "%.1f MiB", double(b) / 1048576.0);
        return std::string(s);
    };
    std::ostringstream o;
    o << "weights " << mib(weight_bytes) << ", KV " << mib(kv_bytes) << " (" << kv_capacity_tokens
      << " tokens, " << kv_dtype_name(kv_dtype) << "), GDN state " << mib(gdn_bytes) << " ("
      << n_lanes << " lanes)";
    if (mtp)
        o << ", MTP KV included";
    if (max_draft_tokens)
        o << ", verify snapshots " << mib(gdn_verify_bytes) << " (K=" << max_draft_tokens << ")";
    o << ", workspace " << mib(workspace_bytes) << ", max-context " << max_context;
    return o.str();
}

} // namespace ninfer::core
