// ninfer tests - defaults that let coding agents work out of the box: max-context holds their first
// prompt and fits the memory plan of the demo model and a real 27B; max_tokens is shortened, not refused.
#include "core/convert/synthetic.h"
#include "core/model/memory_plan.h"
#include "daemon/config_load.h"
#include "daemon/options.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::daemon;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

core::MemoryPlan plan_for(std::string_view shape, const Settings& s, uint64_t weight_bytes, uint64_t available) {
    core::MemoryRequest r;
    r.max_context = uint32_t(s.get_int("max-context"));
    r.max_concurrency = int(s.get_int("max-concurrency"));
    r.prefill_chunk = uint32_t(s.get_int("prefill-chunk"));
    r.weight_bytes = weight_bytes;
    r.available_bytes = available;
    r.margin_bytes = core::host_default_margin(available);
    return core::MemoryPlan::make(core::synthetic_shape_config(shape), r);
}

} // namespace

TEST_CASE("the default max-context holds an agent's first prompt and fits the memory plans", "[agent_defaults]") {
    Settings s;
    const uint64_t ctx = uint64_t(s.get_int("max-context"));
    // Claude Code, Codex, qwen-code and pi send 15-18K tokens first; the turns that follow add more.
    CHECK(ctx >= 18000 + 8192);
    // A real 27B (bf16 weights, 54 GB) on an 80 GB GPU: every lane's whole context is in the pool.
    const core::MemoryPlan big = plan_for("qwen3.6-27b", s, 54'000'000'000ull, 79 * kGiB);
    CHECK(big.max_context == ctx);
    CHECK(big.kv_capacity_tokens >= ctx * uint64_t(s.get_int("max-concurrency")));
    // The demo/tiny model on a small host: a few MiB of KV for all lanes.
    const core::MemoryPlan tiny = plan_for("tiny", s, 1ull << 20, 2 * kGiB);
    CHECK(tiny.kv_capacity_tokens >= ctx * uint64_t(s.get_int("max-concurrency")));
    CHECK(tiny.kv_bytes < 256ull << 20);
}

TEST_CASE("a max_tokens beyond the context left is shortened unless --strict-max-tokens", "[agent_defaults]") {
    Settings s;
    CHECK(s.get("strict-max-tokens") == "false");
    CommandLine strict = [] {
        std::vector<const char*> args{"ninferd", "--strict-max-tokens"};
        return parse_command_line(int(args.size()), args.data());
    }();
    REQUIRE(strict.values.size() == 1);
    CHECK(strict.values[0].first == "strict-max-tokens");
    CHECK(strict.values[0].second == "true");
}
