// ninfer::core - the memory plan: every byte a loaded model needs, decided before anything is
// allocated (ARCHITECTURE.md §4). Shared by every backend.
//
// Contract:
// - MemoryPlan::make(config, request) sizes the weights (given), the paged KV pool (64-token pages,
//   every full-attention layer, K and V rows in the chosen KV dtype), one Gated DeltaNet state slot
//   per lane (conv history of kernel-1 fp32 columns + fp32 recurrent state [Hv, Dk, Dv] per GDN
//   layer) and the workspaces (one prefill chunk of activations plus per-lane logits).
// - Speculative decoding (docs/MODEL.md §8): with request.mtp the pool's pages also hold the MTP
//   layer's K and V rows (the same positions, so a lane's page table serves both;
//   kv_mtp_bytes_per_token), and with max_draft_tokens K > 0 every lane gets K GDN state snapshots
//   (conv history + recurrent state after each of the first K tokens of a K+1-token verify window,
//   so a rejected draft rolls the state back exactly; gdn_verify_bytes). The MTP head's pending
//   hidden rows (at most K + 2 rows of H f32 a lane between steps; a prefill chunk's rows for the
//   moment the head takes them, as large as the chunk's activations already counted) and a verify
//   window's logits ((K + 1) x vocab f32 a lane) are in the workspace.
// - kv_capacity_tokens 0 means auto: what fits in available - margin, capped at
//   lanes * max_context; an explicit capacity is used as given. Capacity is rounded up to pages.
// - A plan that does not fit, or a KV pool smaller than one max_context sequence, is refused with
//   ninfer::Error("plan: ... deficit N bytes ...") naming the bytes missing.
// - max_concurrency must be 1..8; max_context 1..max_position_embeddings.
// - LaneImage layout (lane_image_* helpers): kv = for each full-attention layer in order, the K rows
//   of positions [0,n) (n_kv_heads rows each), then its V rows; gdn = every GDN layer's conv
//   history ([kernel-1][conv_dim] f32, oldest column first), then every GDN layer's recurrent
//   state ([Hv][Dk][Dv] f32).
// Thread safety: plain data.
#pragma once

#include "core/model/config.h"
#include "core/model/kv_codec.h"

#include <cstdint>
#include <string>

namespace ninfer::core {

inline constexpr uint32_t kKvPageTokens = 64;
inline constexpr int kMaxConcurrency = 8;
inline constexpr uint32_t kMaxDraftTokens = 5;

struct MemoryRequest {
    uint32_t max_context = 0;        // tokens per sequence; 0 = the model's max positions
    uint64_t kv_capacity_tokens = 0; // tokens in the KV pool; 0 = auto
    int max_concurrency = 1;         // lanes, 1..8
    KvDtype kv_dtype = KvDtype::Bf16;
    uint32_t prefill_chunk = 256;    // tokens per prefill step (workspace sizing)
    uint64_t weight_bytes = 0;       // resident weight bytes
    uint64_t available_bytes = 0;    // memory the plan may use
    uint64_t margin_bytes = 0;       // left free (auto sizing and the fit check)
    uint64_t backend_workspace_bytes = 0; // a backend's own buffers (CUDA: the tensor-core prefill's)
    bool mtp = false;                // plan the MTP layer's KV (the artifact has an MTP head)
    uint32_t max_draft_tokens = 0;   // K, 0..kMaxDraftTokens: verify windows of up to K+1 tokens
};

struct MemoryPlan {
    KvDtype kv_dtype = KvDtype::Bf16;
    int n_lanes = 1;
    uint32_t max_context = 0;
    uint32_t prefill_chunk = 0;
    uint64_t kv_capacity_tokens = 0; // a multiple of kKvPageTokens
    uint32_t kv_pages = 0;
    uint64_t kv_row_bytes = 0;       // one KV head's K or V row
    uint64_t kv_bytes_per_token = 0; // K+V, every full-attention layer and KV head
    bool mtp = false;
    uint64_t kv_mtp_bytes_per_token = 0; // K+V of the MTP layer (0 without mtp)
    uint64_t kv_bytes = 0;               // capacity x (kv_bytes_per_token + kv_mtp_bytes_per_token)
    uint32_t max_draft_tokens = 0;
    uint64_t gdn_verify_bytes_per_lane = 0; // max_draft_tokens GDN state copies
    uint64_t gdn_verify_bytes = 0;
    uint64_t gdn_conv_bytes_per_lane = 0;
    uint64_t gdn_recurrent_bytes_per_lane = 0;
    uint64_t gdn_bytes = 0;
    uint64_t weight_bytes = 0;
    uint64_t workspace_bytes = 0;
    uint64_t total_bytes = 0;
    uint64_t available_bytes = 0;
    uint64_t margin_bytes = 0;

    static MemoryPlan make(const ModelConfig& config, const MemoryRequest& request);
    std::string describe() const; // one line for logs

    uint64_t lane_image_kv_bytes(uint32_t n_tokens) const { return kv_bytes_per_token * n_tokens; }
    uint64_t lane_image_gdn_bytes() const {
        return gdn_conv_bytes_per_lane + gdn_recurrent_bytes_per_lane;
    }
};

// --max-context auto (memory_plan_auto.cpp): the largest max-context for which every one of the
// request's lanes can hold a full sequence: the plan fits, and its KV pool (auto: what memory
// allows; an explicit kv_capacity_tokens: as given) holds lanes x max-context tokens. That is the
// model's max_position_embeddings when it fits, else the largest multiple of 64 tokens below it
// (found by bisection over MemoryPlan::make; request.max_context is ignored). reason is one log
// line with the figures behind the choice. Throws ninfer::Error("plan: --max-context auto: ...")
// when the model gives no max_position_embeddings, or with make()'s deficit when not even 64
// tokens a lane fit.
struct ContextChoice {
    MemoryPlan plan;
    std::string reason;
};
ContextChoice plan_max_context_auto(const ModelConfig& config, MemoryRequest request);

// Memory the host can give (memory_host.cpp): MemAvailable of /proc/meminfo, lowered to what the
// process's memory cgroup still allows (limit - usage, the tightest level of v2's hierarchy or v1's
// memory controller), so a unit with MemoryMax= or a container plans within its limit. And the
// CPU's default margin: max(512 MiB, 10% of it), so auto sizing never takes all of it.
uint64_t host_available_bytes();
uint64_t host_default_margin(uint64_t available_bytes);
// The room the cgroup of /proc/self/cgroup's text leaves under `sysfs_root` (normally
// /sys/fs/cgroup), in bytes; UINT64_MAX when no limit applies or none can be read.
uint64_t cgroup_memory_room(const std::string& proc_self_cgroup, const std::string& sysfs_root);

} // namespace ninfer::core
