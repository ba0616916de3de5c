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
    // The probe: kProbe rounds judged alone; poor again: twice the pause, and so on up to the bound.
    uint32_t expect = SpeculationGate::kFirstPause;
    for (int probe = 0; probe < 10; ++probe) {
        CHECK(rounds_until_pause(g, p, 3, 1) == SpeculationGate::kProbe); // 1 of 3 < 0.5
        expect = std::min(expect * 2, SpeculationGate::kMaxPause);
        CHECK(g.paused_steps() == expect);
        while (!g.allows()) g.after_plain_step();
    }
    CHECK(g.paused_steps() == 0);
    CHECK(g.next_pause() == SpeculationGate::kMaxPause);
    // A good probe resets the next pause to the first one.
    CHECK(rounds_until_pause(g, p, 3, 3, SpeculationGate::kProbe) == SpeculationGate::kProbe);
    CHECK(g.allows());
    CHECK(g.next_pause() == SpeculationGate::kFirstPause);
    // Then the usual sliding window over the latest rounds: one poor round among good ones does
    // not pause it, and the probe's rounds count in it.
    g.after_round(3, 0, p);
    CHECK(g.allows());
    // Poor rounds from here: judged when the window is full again (kWindow rounds since the
    // pause: the 2 good probe rounds, 6/6, and 6 poor ones, 0/18: 6/24 < 0.5), then the first pause.
    uint32_t poor = 1;
    while (g.allows() && poor < 100) g.after_round(3, 0, p), ++poor;
    CHECK(poor == SpeculationGate::kWindow - SpeculationGate::kProbe);
    CHECK(g.paused_steps() == SpeculationGate::kFirstPause);
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
