// ninfer::core - --max-context auto: the longest context every lane can hold within the plan.
#include "core/model/memory_plan.h"

#include "core/util/error.h"

#include <cstdio>
#include <optional>

namespace ninfer::core {
namespace {

std::string mib(uint64_t bytes) {
    char s[32];
    std::snprintf(s, sizeof s, "%.1f MiB", double(bytes) / 1048576.0);
    return s;
}

uint64_t round_up_pages(uint64_t tokens) { return (tokens + kKvPageTokens - 1) / kKvPageTokens * kKvPageTokens; }

// The plan for `context` if every lane can hold a full sequence in it, else nullopt.
std::optional<MemoryPlan> plan_if_lanes_fit(const ModelConfig& config, MemoryRequest request, uint32_t context) {
    request.max_context = context;
    const uint64_t lanes_tokens = uint64_t(request.max_concurrency) * round_up_pages(context);
    if (request.kv_capacity_tokens && round_up_pages(request.kv_capacity_tokens) < lanes_tokens) return std::nullopt;
    try {
        MemoryPlan plan = MemoryPlan::make(config, request);
        if (plan.kv_capacity_tokens < lanes_tokens) return std::nullopt; // auto capacity cut by memory
        return plan;
    } catch (const Error&) {
        return std::nullopt;
    }
}

} // namespace

ContextChoice plan_max_context_auto(const ModelConfig& config, MemoryRequest request) {
    const uint32_t model_max = config.max_position_embeddings;
    if (model_max == 0)
        throw Error("plan: --max-context auto: the model gives no max_position_embeddings; set --max-context TOKENS");
    const std::string lanes = std::to_string(request.max_concurrency) + " lane" + (request.max_concurrency == 1 ? "" : "s");
    if (std::optional<MemoryPlan> full = plan_if_lanes_fit(config, request, model_max)) {
        std::string where = request.kv_capacity_tokens
                                ? "kv-capacity " + std::to_string(request.kv_capacity_tokens) + " tokens"
                                : mib(full->available_bytes) + " available (margin " + mib(full->margin_bytes) + ")";
        return {*full, "--max-context auto: " + std::to_string(model_max) + " tokens, the model's max_position_embeddings: " +
                           lanes + " x " + std::to_string(model_max) + " tokens of KV (" + mib(full->kv_bytes) + ") fit in " + where};
    }
    // Bisection over whole pages below the model's limit: fitting is monotone in the context
    // (the KV pool and the workspace only grow with it).
    uint32_t lo = 0, hi = (model_max - 1) / kKvPageTokens; // pages; lo fits (0 = none found yet), hi + 1 does not
    std::optional<MemoryPlan> best;
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo + 1) / 2;
        if (std::optional<MemoryPlan> p = plan_if_lanes_fit(config, request, mid * kKvPageTokens)) {
            lo = mid;
            best = std::move(p);
        } else {
            hi = mid - 1;
        }
    }
    if (!best) {
        request.max_context = kKvPageTokens;
        if (!request.kv_capacity_tokens) request.kv_capacity_tokens = uint64_t(request.max_concurrency) * kKvPageTokens;
        try {
            MemoryPlan::make(config, request);
        } catch (const Error& e) {
            throw Error(std::string("plan: --max-context auto: not even ") + std::to_string(kKvPageTokens) +
                        " tokens a lane fit: " + e.what());
        }
        throw Error("plan: --max-context auto: kv-capacity " + std::to_string(request.kv_capacity_tokens) +
                    " tokens holds less than " + std::to_string(kKvPageTokens) + " tokens for each of " + lanes);
    }
    const MemoryPlan& p = *best;
    std::string why;
    if (request.kv_capacity_tokens) {
        why = "kv-capacity " + std::to_string(request.kv_capacity_tokens) + " tokens shared by " + lanes;
    } else {
        const uint64_t fixed = p.weight_bytes + p.gdn_bytes + p.gdn_verify_bytes + p.workspace_bytes;
        const uint64_t left = p.available_bytes > fixed + p.margin_bytes ? p.available_bytes - fixed - p.margin_bytes : 0;
        const uint64_t kv_per_token = p.kv_bytes_per_token + p.kv_mtp_bytes_per_token;
        why = "the model's " + std::to_string(model_max) + " tokens for " + lanes + " need " +
              mib(uint64_t(request.max_concurrency) * round_up_pages(model_max) * kv_per_token) + " of KV; " + mib(left) +
              " is left of " + mib(p.available_bytes) + " available after weights " + mib(p.weight_bytes) + ", state " +
              mib(p.gdn_bytes + p.gdn_verify_bytes) + ", workspace " + mib(p.workspace_bytes) + " and a margin of " +
              mib(p.margin_bytes);
    }
    return {p, "--max-context auto: " + std::to_string(p.max_context) + " tokens, the most that fits: " + why};
}

} // namespace ninfer::core
