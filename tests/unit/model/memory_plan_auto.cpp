// ninfer tests - --max-context auto: the model's limit when every lane fits it, else the most the
// memory plan (or an explicit KV capacity) holds for every lane, with the figures in the reason.
#include "core/convert/synthetic.h"
#include "core/model/memory_plan.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

// A real 27B (bf16 weights, 54 GB; 64 KiB of KV a token) with `lanes` lanes on `available` bytes.
MemoryRequest request_27b(int lanes, uint64_t available) {
    MemoryRequest r;
    r.max_concurrency = lanes;
    r.prefill_chunk = 1024;
    r.weight_bytes = 54'000'000'000ull;
    r.available_bytes = available;
    r.margin_bytes = host_default_margin(available);
    return r;
}

// Whether every lane holds a full `context` in the plan (what auto promises).
bool lanes_fit(const ModelConfig& c, MemoryRequest r, uint32_t context) {
    r.max_context = context;
    try {
        return MemoryPlan::make(c, r).kv_capacity_tokens >= uint64_t(r.max_concurrency) * context;
    } catch (const ninfer::Error&) {
        return false;
    }
}

} // namespace

TEST_CASE("memory_plan_auto: the model's max_position_embeddings when every lane fits it", "[memory_plan_auto]") {
    const ModelConfig c = synthetic_shape_config("qwen3.6-27b");
    REQUIRE(c.max_position_embeddings == 262144);
    const ContextChoice choice = plan_max_context_auto(c, request_27b(4, 1024 * kGiB));
    CHECK(choice.plan.max_context == 262144);
    CHECK(choice.plan.kv_capacity_tokens == 4ull * 262144);
    CHECK_THAT(choice.reason, Catch::Contains("262144 tokens, the model's max_position_embeddings") &&
                                  Catch::Contains("4 lanes x 262144 tokens of KV (65536.0 MiB)"));
}

TEST_CASE("memory_plan_auto: the most that fits, a page multiple, the next page would not", "[memory_plan_auto]") {
    const ModelConfig c = synthetic_shape_config("qwen3.6-27b");
    for (int lanes : {4, 8}) {
        const MemoryRequest r = request_27b(lanes, 79 * kGiB); // an 80 GB GPU
        const ContextChoice choice = plan_max_context_auto(c, r);
        const uint32_t ctx = choice.plan.max_context;
        CHECK(ctx < 262144);
        CHECK(ctx % kKvPageTokens == 0);
        CHECK(choice.plan.kv_capacity_tokens >= uint64_t(lanes) * ctx);
        CHECK(lanes_fit(c, r, ctx));
        CHECK_FALSE(lanes_fit(c, r, ctx + kKvPageTokens));
        CHECK_THAT(choice.reason, Catch::Contains("the most that fits") && Catch::Contains("available after weights") &&
                                      Catch::Contains("margin of"));
        if (lanes == 4) CHECK(ctx >= 65536); // Claude Code wants 64K; 4 lanes of it fit next to a 27B
    }
    // Fewer lanes, longer contexts: one lane holds the model's whole limit (16 GiB of KV).
    CHECK(plan_max_context_auto(c, request_27b(1, 79 * kGiB)).plan.max_context == 262144);
    CHECK(plan_max_context_auto(c, request_27b(1, 79 * kGiB)).plan.max_context >
          plan_max_context_auto(c, request_27b(8, 79 * kGiB)).plan.max_context);
}

TEST_CASE("memory_plan_auto: an explicit KV capacity is shared by the lanes", "[memory_plan_auto]") {
    const ModelConfig c = synthetic_shape_config("qwen3.6-27b");
    MemoryRequest r = request_27b(4, 1024 * kGiB);
    r.kv_capacity_tokens = 65536;
    ContextChoice choice = plan_max_context_auto(c, r);
    CHECK(choice.plan.max_context == 16384);
    CHECK(choice.plan.kv_capacity_tokens == 65536);
    CHECK_THAT(choice.reason, Catch::Contains("kv-capacity 65536 tokens shared by 4 lanes"));
    r.kv_capacity_tokens = 4ull * 262144; // room for the model's whole limit
    CHECK(plan_max_context_auto(c, r).plan.max_context == 262144);
}

TEST_CASE("memory_plan_auto: refusals name why", "[memory_plan_auto]") {
    ModelConfig c = synthetic_shape_config("qwen3.6-27b");
    CHECK_THROWS_WITH(plan_max_context_auto(c, request_27b(4, 40 * kGiB)),
                      Catch::Contains("--max-context auto: not even 64 tokens a lane fit") && Catch::Contains("deficit"));
    MemoryRequest tiny_pool = request_27b(4, 1024 * kGiB);
    tiny_pool.kv_capacity_tokens = 100; // less than 64 tokens for each of 4 lanes
    CHECK_THROWS_WITH(plan_max_context_auto(c, tiny_pool), Catch::Contains("kv-capacity 100 tokens holds less than 64 tokens for each of 4 lanes"));
    c.max_position_embeddings = 0;
    CHECK_THROWS_WITH(plan_max_context_auto(c, request_27b(4, 1024 * kGiB)),
                      Catch::Contains("no max_position_embeddings"));
}
