// ninfer tests - the speculating lanes' gate (core/engine/speculation_gate.h): the batch rule, a
// lane pausing after a window of poor acceptance, the doubling pause up to its bound, a good window
// resetting it, a window without drafts counting as poor, and the policy's off values; then in the
// scheduler on the CPU backend: an always-wrong drafter spends few steps in rounds, an oracle keeps
// every round, more lanes than max_lanes take plain steps, and the output stays the plain greedy one.
#include "core/engine/speculation_gate.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;

namespace {

// Rounds until the gate pauses (or `limit`), each with `drafted` drafts of which `accepted` kept.
uint32_t rounds_until_pause(SpeculationGate& g, const SpeculationPolicy& p, uint32_t drafted, uint32_t accepted,
                            uint32_t limit = 100) {
    uint32_t n = 0;
    while (g.allows() && n < limit) g.after_round(drafted, accepted, p), ++n;
    return n;
}

} // namespace

TEST_CASE("speculation gate: the batch rule", "[speculation_gate]") {
    CHECK(batch_allows({0, 0.f}, 8));
    CHECK(batch_allows({4, 0.5f}, 4));
    CHECK_FALSE(batch_allows({4, 0.5f}, 5));
    CHECK(batch_allows({1, 0.5f}, 1));
    CHECK_FALSE(batch_allows({1, 0.5f}, 2));
}

TEST_CASE("speculation gate: poor windows pause the lane, longer each time; a good window resets it",
          "[speculation_gate]") {
    const SpeculationPolicy p{4, 0.5f};
    SpeculationGate g;
    // Half accepted meets the bar: never pauses.
    CHECK(rounds_until_pause(g, p, 4, 2) == 100);
    CHECK(g.pauses() == 0);
    // A window of poor rounds: the pause comes when the window (8 rounds) is below half.
    g.reset();
    CHECK(rounds_until_pause(g, p, 3, 0) == SpeculationGate::kWindow);
    CHECK(g.paused_steps() == SpeculationGate::kFirstPause);
    for (uint32_t i = 0; i < SpeculationGate::kFirstPause; ++i) {
        CHECK_FALSE(g.allows());
        g.after_plain_step();
    }
    CHECK(g.allows());
    // The probe: a fresh window; poor again: twice the pause, and so on up to the bound.
    uint32_t expect = SpeculationGate::kFirstPause;
    for (int probe = 0; probe < 10; ++probe) {
        CHECK(rounds_until_pause(g, p, 3, 1) == SpeculationGate::kWindow); // 1 of 3 < 0.5
        expect = std::min(expect * 2, SpeculationGate::kMaxPause);
        CHECK(g.paused_steps() == expect);
        while (!g.allows()) g.after_plain_step();
    }
    CHECK(g.paused_steps() == 0);
    CHECK(g.next_pause() == SpeculationGate::kMaxPause);
    // A good probe window resets the next pause to the first one.
    CHECK(rounds_until_pause(g, p, 3, 3, SpeculationGate::kWindow) == SpeculationGate::kWindow);
    CHECK(g.allows());
    CHECK(g.next_pause() == SpeculationGate::kFirstPause);
    // The window slides: one poor round among good ones does not pause it.
    g.after_round(3, 0, p);
    CHECK(g.allows());
}

TEST_CASE("speculation gate: rounds without drafts count as poor; min_acceptance 0 never pauses",
          "[speculation_gate]") {
    SpeculationGate g;
    CHECK(rounds_until_pause(g, {4, 0.5f}, 0, 0) == SpeculationGate::kWindow);
    g.reset();
    CHECK(g.allows());
    CHECK(rounds_until_pause(g, {4, 0.f}, 3, 0) == 100);
    CHECK(g.pauses() == 0);
    // A tiny bar still pauses a lane whose drafts never fit.
    g.reset();
    CHECK(rounds_until_pause(g, {0, 0.01f}, 5, 0) == SpeculationGate::kWindow);
}
