// ninfer tests - the memory planner: sizes, auto KV capacity, refusal with the deficit in bytes.
#include "core/model/memory_plan.h"
#include "core/util/error.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <regex>

using namespace ninfer::core;

static ModelConfig dense_27b() {
    ModelConfig c = ninfer::test::tiny_config(false);
    c.vocab_size = 248320;
    c.hidden_size = 5120;
    c.num_hidden_layers = 64;
    c.layer_types.clear();
    for (int i = 0; i < 64; ++i)
        c.layer_types.push_back((i + 1) % 4 == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
    c.num_attention_heads = 24;
    c.num_key_value_heads = 4;
    c.head_dim = 256;
    c.mrope_section = {11, 11, 10};
    c.linear_num_key_heads = 16;
    c.linear_key_head_dim = 128;
    c.linear_num_value_heads = 48;
    c.linear_value_head_dim = 128;
    c.intermediate_size = 17408;
    c.max_position_embeddings = 262144;
    return c;
}

TEST_CASE("memory_plan: 27B state sizes match docs/MODEL.md §11", "[memory_plan]") {
    const ModelConfig c = dense_27b();
    MemoryRequest r;
    r.max_context = 4096;
    r.kv_capacity_tokens = 4096;
    r.available_bytes = 1ull << 40;
    const MemoryPlan bf16 = MemoryPlan::make(c, r);
    CHECK(bf16.kv_bytes_per_token == 65536);
    CHECK(bf16.gdn_recurrent_bytes_per_lane == 144ull << 20);
    CHECK(bf16.kv_pages == 64);
    r.kv_dtype = KvDtype::Int8;
    CHECK(MemoryPlan::make(c, r).kv_bytes_per_token == 33792);
    r.kv_dtype = KvDtype::Fp8;
    CHECK(MemoryPlan::make(c, r).kv_bytes_per_token == 16 * 4 * 516);
}

TEST_CASE("memory_plan: auto capacity fits available minus margin, capped at lanes x context", "[memory_plan]") {
    const ModelConfig c = dense_27b();
    MemoryRequest r;
    r.max_context = 8192;
    r.max_concurrency = 4;
    r.weight_bytes = 10ull << 30;
    r.available_bytes = 14ull << 30;
    r.margin_bytes = 2ull << 30;
    const MemoryPlan p = MemoryPlan::make(c, r);
    CHECK(p.kv_capacity_tokens % kKvPageTokens == 0);
    CHECK(p.kv_capacity_tokens >= 8192);
    CHECK(p.kv_capacity_tokens < 4 * 8192);
    CHECK(p.total_bytes + p.margin_bytes <= r.available_bytes);
    r.available_bytes = 1ull << 40;
    CHECK(MemoryPlan::make(c, r).kv_capacity_tokens == 4 * 8192);
}

TEST_CASE("memory_plan: a plan that does not fit is refused with the deficit in bytes", "[memory_plan]") {
    const ModelConfig c = dense_27b();
    MemoryRequest r;
    r.max_context = 32768;
    r.kv_capacity_tokens = 32768;
    r.weight_bytes = 54ull << 30;
    r.available_bytes = 56ull << 30;
    r.margin_bytes = 1ull << 30;
    uint64_t need = 0;
    {
        MemoryRequest big = r;
        big.available_bytes = 1ull << 40;
        need = MemoryPlan::make(c, big).total_bytes;
    }
    const uint64_t deficit = need + r.margin_bytes - r.available_bytes;
    CHECK_THROWS_WITH(MemoryPlan::make(c, r),
                      Catch::Contains("deficit " + std::to_string(deficit) + " bytes"));
    // Auto capacity that cannot hold one max-context sequence is refused too.
    r.kv_capacity_tokens = 0;
    CHECK_THROWS_WITH(MemoryPlan::make(c, r), Catch::Contains("deficit"));
    // Explicit capacity below one sequence.
    r.available_bytes = 1ull << 40;
    r.kv_capacity_tokens = 1000;
    CHECK_THROWS_WITH(MemoryPlan::make(c, r), Catch::Contains("smaller than one max-context"));
}

TEST_CASE("memory_plan: limits on lanes and context", "[memory_plan]") {
    const ModelConfig c = dense_27b();
    MemoryRequest r;
    r.available_bytes = 1ull << 40;
    r.max_context = 1024;
    r.max_concurrency = 9;
    CHECK_THROWS_WITH(MemoryPlan::make(c, r), Catch::Contains("max-concurrency 9"));
    r.max_concurrency = 0;
    CHECK_THROWS_WITH(MemoryPlan::make(c, r), Catch::Contains("max-concurrency 0"));
    r.max_concurrency = 1;
    r.max_context = 262145;
    CHECK_THROWS_WITH(MemoryPlan::make(c, r), Catch::Contains("max-context 262145"));
    CHECK(host_default_margin(100ull << 30) == 10ull << 30);
    CHECK(host_default_margin(1ull << 30) == 512ull << 20);
}

TEST_CASE("memory_plan: speculation counts the MTP layer's KV and the verify snapshots", "[memory_plan]") {
    const ModelConfig c = dense_27b();
    MemoryRequest r;
    r.max_context = 4096;
    r.kv_capacity_tokens = 4096;
    r.max_concurrency = 2;
    r.available_bytes = 1ull << 40;
    const MemoryPlan plain = MemoryPlan::make(c, r);
    CHECK(plain.kv_mtp_bytes_per_token == 0);
    CHECK(plain.gdn_verify_bytes == 0);
    r.mtp = true;
    r.max_draft_tokens = 3;
    const MemoryPlan spec = MemoryPlan::make(c, r);
    CHECK(spec.kv_mtp_bytes_per_token == 4096); // docs/MODEL.md §11: MTP KV bytes/token BF16, 27B
    CHECK(spec.kv_bytes_per_token == plain.kv_bytes_per_token); // the lane image's main KV is unchanged
    CHECK(spec.kv_bytes == 4096ull * (65536 + 4096));
    // K snapshots of a lane's whole GDN state (fp32 conv history + recurrent state).
    const uint64_t one_copy = 48ull * 3 * 10240 * 4 + (144ull << 20);
    CHECK(spec.gdn_verify_bytes_per_lane == 3 * one_copy);
    CHECK(spec.gdn_verify_bytes == 2 * 3 * one_copy);
    CHECK(spec.total_bytes > plain.total_bytes + spec.gdn_verify_bytes + 4096ull * 4096);
    CHECK(spec.describe().find("verify snapshots") != std::string::npos);
    // Auto capacity counts the MTP rows: exactly the bytes of the explicit plan give its capacity
    // (main rows alone would have sized 4352 tokens and then not fit), one byte less does not fit.
    r.kv_capacity_tokens = 0;
    r.available_bytes = spec.total_bytes;
    CHECK(MemoryPlan::make(c, r).kv_capacity_tokens == 4096);
    r.available_bytes = spec.total_bytes - 1;
    CHECK_THROWS_WITH(MemoryPlan::make(c, r), Catch::Contains("deficit 1 bytes"));
    r.max_draft_tokens = kMaxDraftTokens + 1;
    CHECK_THROWS_WITH(MemoryPlan::make(c, r), Catch::Contains("max draft tokens 6 is not in 0..5"));
}
