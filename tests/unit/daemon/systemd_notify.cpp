// ninfer tests - the watchdog's health rule: a ping needs engine progress or an engine without work.
#include "daemon/systemd_notify.h"

#include <catch2/catch.hpp>

using namespace ninfer::daemon;

TEST_CASE("an idle engine earns the watchdog ping", "[systemd_notify]") {
    CHECK(engine_is_healthy(7, 7, 0));
}

TEST_CASE("an engine with requests earns the ping only when its progress moved", "[systemd_notify]") {
    CHECK(engine_is_healthy(7, 8, 3));
    CHECK_FALSE(engine_is_healthy(7, 7, 1));
    CHECK_FALSE(engine_is_healthy(7, 7, 3));
}

TEST_CASE("engine progress counts steps, admissions and every kind of request end", "[systemd_notify]") {
    ninfer::core::EngineStats stats;
    uint64_t p0 = engine_progress(stats);
    ++stats.n_steps_total;
    uint64_t p1 = engine_progress(stats);
    CHECK(p1 > p0);
    stats.n_prompt_tokens_total += 5; // an admission
    uint64_t p2 = engine_progress(stats);
    CHECK(p2 > p1);
    for (auto* counter : {&stats.n_requests_finished_total, &stats.n_requests_cancelled_total,
                          &stats.n_requests_rejected_total}) {
        uint64_t before = engine_progress(stats);
        ++*counter;
        CHECK(engine_progress(stats) > before);
    }
    // Gauges going up and down are not progress (a queue that only grows is a stall).
    uint64_t before = engine_progress(stats);
    stats.n_requests_waiting = 4;
    stats.n_requests_running = 1;
    CHECK(engine_progress(stats) == before);
}
