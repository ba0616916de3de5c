// ninfer::core - the CPU backend: the exact f32 reference of the model (Backend interface).
//
// Contract:
// - make_cpu_backend(weights, plan) allocates everything the plan lists (KV pool, one GDN state
//   slot per lane) up front; weights must outlive the backend and stay in their stored format.
// - Semantics are those of backend.h. Prefill uses the chunked Gated DeltaNet form (chunks aligned
//   to absolute positions, so chunked prefills equal one whole prefill) and decode the recurrence.
// - LaneImage byte layout: memory_plan.h (kv rows as stored in the pool's KV dtype; GDN state f32).
// - Speculation (backend.h): verify and accept_verified when plan.max_draft_tokens > 0 (verify
//   windows run the GDN recurrence token by token and keep per-token state snapshots); draft_mtp
//   when plan.mtp (the weights must then have the MTP head, else construction throws), and then
//   every prefill, decode and verify also feeds the head (core/cpu/mtp_head.h). An accepted window
//   stays re-acceptable to fewer tokens (the snapshots stay; a draft after the accept saves the
//   head's pending rows first); verify_accept_greedy is Backend's default (those calls in order).
// - CpuBackendOptions.threads: 0 = every core; gdn_chunked = false forces the recurrence in prefill
//   (tests compare both forms through the whole model).
#pragma once

#include "core/backend/backend.h"
#include "core/model/memory_plan.h"
#include "core/model/weights.h"

#include <memory>

namespace ninfer::core {

struct CpuBackendOptions {
    unsigned threads = 0;
    bool gdn_chunked = true;
};

std::unique_ptr<Backend> make_cpu_backend(const ModelWeights& weights, const MemoryPlan& plan,
                                          const CpuBackendOptions& options = {});

// Log-softmax helpers shared by backends and tools (f64 accumulation).
double log_sum_exp(std::span<const float> logits);

} // namespace ninfer::core
