// ninfer tests - defaults that let coding agents work out of the box: max-context (auto) holds their
// conversations within the memory plan of the demo model and a real 27B; max_tokens is shortened, not refused.
#include "core/convert/synthetic.h"
#include "core/model/memory_plan.h"
#include "daemon/config_load.h"
#include "daemon/options.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::daemon;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

// The plan ninferd's defaults make for a model shape (max-context auto, as plan_model does).
core::ContextChoice plan_for(std::string_view shape, const Settings& s, uint64_t weight_bytes, uint64_t available) {
    core::MemoryRequest r;
    r.max_concurrency = int(s.get_int("max-concurrency"));
    r.prefill_chunk = uint32_t(s.get_int("prefill-chunk"));
    r.weight_bytes = weight_bytes;
    r.available_bytes = available;
    r.margin_bytes = core::host_default_margin(available);
    return core::plan_max_context_auto(core::synthetic_shape_config(shape), r);
}

} // namespace

TEST_CASE("the default max-context holds an agent's conversation and fits the memory plans", "[agent_defaults]") {
    Settings s;
    REQUIRE(s.get("max-context") == "auto");
    REQUIRE(to_daemon_config([] {
                Settings t;
                t.set("artifact", "x.ninfer", "test");
                return t;
            }()).max_context == 0); // auto: plan_model decides
    const uint64_t lanes = uint64_t(s.get_int("max-concurrency"));
    // A real 27B (bf16 weights, 54 GB) on an 80 GB GPU: every lane gets more than Claude Code's
    // 64K (its 12K first prompt plus 33K it keeps free), all of it in the pool.
    const core::ContextChoice big = plan_for("qwen3.6-27b", s, 54'000'000'000ull, 79 * kGiB);
    CHECK(big.plan.max_context >= 65536);
    CHECK(big.plan.kv_capacity_tokens >= big.plan.max_context * lanes);
    // The demo/tiny model on a small host: the model's whole 262144 tokens for every lane.
    const core::ContextChoice tiny = plan_for("tiny", s, 1ull << 20, 2 * kGiB);
    CHECK(tiny.plan.max_context == 262144);
    CHECK(tiny.plan.kv_capacity_tokens >= tiny.plan.max_context * lanes);
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
