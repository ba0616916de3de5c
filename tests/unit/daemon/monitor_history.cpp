// ninfer tests - /monitor/history: rates from counter deltas, percentiles from histogram bucket
// deltas over the window (hand-computed interpolation), the bounded ring, the JSON (after=, null
// percentiles) and the reading taken from a live context.
#include "daemon/monitor_history.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <array>
#include <cmath>

using namespace ninfer::daemon;

namespace {

constexpr std::array<double, 3> kBounds = {0.01, 0.1, 1.0};

BucketCounts buckets(std::vector<uint64_t> counts, uint64_t overflow = 0) {
    uint64_t total = overflow;
    for (uint64_t c : counts) total += c;
    return {kBounds, std::move(counts), total};
}

// Reading number i: i seconds after the first, with the given counters.
HistoryReading reading_at(uint64_t i, uint64_t prefill, uint64_t generated, BucketCounts gap = buckets({0, 0, 0})) {
    HistoryReading r;
    r.at_ms = 5000 + i * 1000;
    r.unix_ms = 1'700'000'000'000 + int64_t(i) * 1000;
    r.prefill_tokens_total = prefill;
    r.generation_tokens_total = generated;
    r.ttft = buckets({0, 0, 0});
    r.token_gap = std::move(gap);
    r.lanes_total = 4;
    r.lanes_running = int(i % 5);
    r.kv_reserved_tokens = 100 * i;
    r.kv_capacity_tokens = 8192;
    r.host_cache_used_bytes = 1000 * i;
    r.host_cache_budget_bytes = 1 << 20;
    return r;
}

simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& json) {
    simdjson::dom::element doc;
    REQUIRE(parser.parse(json).get(doc) == simdjson::SUCCESS);
    return doc;
}

} // namespace

TEST_CASE("bucket_quantile interpolates inside the bucket holding the rank", "[monitor_history]") {
    const BucketCounts none = buckets({0, 0, 0});
    // 10 observations: 4 in [0, 0.01], 6 in (0.01, 0.1].
    const BucketCounts later = buckets({4, 6, 0});
    CHECK(bucket_quantile(none, later, 0.2) == Approx(0.005));                       // rank 2 of 4 in the first
    CHECK(bucket_quantile(none, later, 0.5) == Approx(0.01 + 0.09 * (1.0 / 6.0)));   // rank 5: 1 of 6 in the second
    CHECK(bucket_quantile(none, later, 0.99) == Approx(0.01 + 0.09 * (5.9 / 6.0)));  // rank 9.9
    // Only the observations between the two states count.
    CHECK(bucket_quantile(buckets({4, 0, 0}), later, 0.5) == Approx(0.01 + 0.09 * 0.5));
    // Above the last bound: the top bound.
    CHECK(bucket_quantile(none, buckets({0, 0, 1}, 9), 0.5) == Approx(1.0));
    // Nothing observed: NaN.
    CHECK(std::isnan(bucket_quantile(later, later, 0.5)));
    CHECK(std::isnan(bucket_quantile(none, none, 0.99)));
}

TEST_CASE("history samples: rates per interval, gauges as read, percentiles over the window", "[monitor_history]") {
    MonitorHistory h;
    h.record(reading_at(0, 0, 0));
    CHECK(h.samples().empty()); // the first reading only primes
    h.record(reading_at(1, 300, 40, buckets({30, 10, 0})));
    h.record(reading_at(1, 999, 999)); // the clock did not advance: ignored
    HistoryReading third = reading_at(3, 500, 140, buckets({30, 10, 0}));
    h.record(third); // two seconds later
    REQUIRE(h.samples().size() == 2);
    const HistorySample& a = h.samples()[0];
    const HistorySample& b = h.samples()[1];
    CHECK(a.seq == 1);
    CHECK(b.seq == 2);
    CHECK(a.interval_s == Approx(1.0));
    CHECK(a.prompt_tokens_per_s == Approx(300.0));
    CHECK(a.generated_tokens_per_s == Approx(40.0));
    CHECK(b.interval_s == Approx(2.0));
    CHECK(b.prompt_tokens_per_s == Approx(100.0));
    CHECK(b.generated_tokens_per_s == Approx(50.0));
    // 40 gaps, 30 in [0, 0.01], 10 in (0.01, 0.1]: p50 rank 20 in the first bucket, p99 rank 39.6 in the second.
    CHECK(a.itl_p50_s == Approx(0.01 * 20.0 / 30.0));
    CHECK(a.itl_p99_s == Approx(0.01 + 0.09 * (9.6 / 10.0)));
    CHECK(b.itl_p50_s == Approx(a.itl_p50_s)); // still inside the 10 s window
    CHECK(std::isnan(a.ttft_p50_s));
    CHECK(b.lanes_total == 4);
    CHECK(b.lanes_running == 3);
    CHECK(b.kv_reserved_tokens == 300);
    CHECK(b.kv_capacity_tokens == 8192);

    // kPercentileWindowS quiet readings after the one that saw them, the window no longer holds those gaps.
    for (uint64_t i = 4; i <= 2 + kPercentileWindowS; ++i) h.record(reading_at(i, 500, 140, buckets({30, 10, 0})));
    CHECK(!std::isnan(h.samples()[h.samples().size() - 2].itl_p50_s));
    CHECK(std::isnan(h.samples().back().itl_p50_s));
    CHECK(h.samples().back().generated_tokens_per_s == 0.0);
}

TEST_CASE("history keeps the last kHistoryCapacity samples and numbers them on", "[monitor_history]") {
    MonitorHistory h;
    const uint64_t n = kHistoryCapacity + 50;
    for (uint64_t i = 0; i <= n; ++i) h.record(reading_at(i, 10 * i, i));
    REQUIRE(h.samples().size() == kHistoryCapacity);
    CHECK(h.samples().front().seq == n - kHistoryCapacity + 1);
    CHECK(h.samples().back().seq == n);
    CHECK(h.samples().back().t_unix_ms == 1'700'000'000'000 + int64_t(n) * 1000);
}

TEST_CASE("history JSON: every field, after= filters, no percentile is null", "[monitor_history]") {
    MonitorHistory h;
    simdjson::dom::parser parser;
    auto empty = parse(parser, h.render_json(0));
    CHECK(uint64_t(empty["last_seq"]) == 0);
    CHECK(simdjson::dom::array(empty["samples"]).size() == 0);

    for (uint64_t i = 0; i <= 3; ++i) h.record(reading_at(i, 100 * i, 7 * i, buckets({2 * i, 0, 0})));
    auto all = parse(parser, h.render_json(0));
    CHECK(double(all["period_s"]) == 1.0);
    CHECK(uint64_t(all["capacity"]) == kHistoryCapacity);
    CHECK(uint64_t(all["percentile_window_s"]) == kPercentileWindowS);
    CHECK(uint64_t(all["last_seq"]) == 3);
    simdjson::dom::array samples = all["samples"];
    REQUIRE(samples.size() == 3);
    simdjson::dom::element last = samples.at(2);
    CHECK(uint64_t(last["seq"]) == 3);
    CHECK(int64_t(last["t_unix_ms"]) == 1'700'000'003'000);
    CHECK(double(last["interval_s"]) == 1.0);
    CHECK(double(last["prompt_tokens_per_s"]) == 100.0);
    CHECK(double(last["generated_tokens_per_s"]) == 7.0);
    CHECK(last["ttft_p50_s"].is_null());
    CHECK(last["ttft_p99_s"].is_null());
    CHECK(double(last["itl_p50_s"]) == Approx(0.005).margin(1e-6)); // 6 gaps in [0, 0.01]
    CHECK(double(last["itl_p99_s"]) == Approx(0.0099).margin(1e-6));
    CHECK(int64_t(last["lanes_total"]) == 4);
    CHECK(int64_t(last["lanes_running"]) == 3);
    CHECK(int64_t(last["lanes_prefilling"]) == 0);
    CHECK(int64_t(last["requests_waiting"]) == 0);
    CHECK(uint64_t(last["kv_reserved_tokens"]) == 300);
    CHECK(uint64_t(last["kv_capacity_tokens"]) == 8192);
    CHECK(uint64_t(last["host_cache_used_bytes"]) == 3000);
    CHECK(uint64_t(last["host_cache_budget_bytes"]) == 1 << 20);

    auto newer = parse(parser, h.render_json(2));
    simdjson::dom::array tail = newer["samples"];
    REQUIRE(tail.size() == 1);
    CHECK(uint64_t(tail.at(0)["seq"]) == 3);
    CHECK(simdjson::dom::array(parse(parser, h.render_json(3))["samples"]).size() == 0);
}

TEST_CASE("read_history takes the figures and the loop's histograms of a live context", "[monitor_history]") {
    ninfer::core::Engine engine({});
    DaemonContext ctx;
    ctx.engine = &engine;
    ctx.counters.token_gap_seconds.observe(0.02);
    ctx.counters.token_gap_seconds.observe(0.3);
    ctx.counters.ttft_seconds.observe(0.5);
    const HistoryReading r = read_history(ctx);
    CHECK(r.token_gap.count == 2);
    CHECK(r.token_gap.counts == ctx.counters.token_gap_seconds.counts);
    CHECK(r.token_gap.bounds.size() == kTokenGapBuckets.size());
    CHECK(r.ttft.count == 1);
    CHECK(r.unix_ms > 1'700'000'000'000);
    CHECK(r.generation_tokens_total == 0);
    CHECK(r.kv_capacity_tokens == engine.stats().kv_capacity_tokens.load());
}
