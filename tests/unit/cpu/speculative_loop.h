// ninfer tests - greedy generation through draft -> verify -> accept rounds on any Backend, and the
// plain greedy loop it must equal (shared by the CPU speculation tests and the transformers oracle).
#pragma once

#include "core/backend/backend.h"
#include "core/backend/speculative.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <span>
#include <vector>

namespace ninfer::test {

using namespace ninfer::core;

inline int32_t argmax_row(const float* row, size_t n) {
    return int32_t(std::max_element(row, row + n) - row);
}

// n greedy tokens after the prompt, one decode step each.
inline std::vector<int32_t> plain_greedy(Backend& b, int lane, std::span<const int32_t> prompt, size_t n) {
    b.reset_lane(lane);
    b.prefill(lane, prompt, LogitsOut::Last, nullptr);
    std::vector<int32_t> out{b.sample_after_prefill(lane, {}, {}, 0).token};
    while (out.size() < n) {
        DecodeStep step;
        step.lane = lane;
        step.token = out.back();
        out.push_back(b.decode(std::span(&step, 1))[0].token);
    }
    return out;
}

// drafter(out so far, k) -> up to k drafts for the tokens after out.back()
using Drafter = std::function<std::vector<int32_t>(const std::vector<int32_t>&, int)>;

struct RoundStats {
    size_t rounds = 0, drafted = 0, accepted = 0;
};

// n greedy tokens after the prompt: each round verifies [last token, drafts...] in one step,
// accept_drafts keeps the drafts that equal the target's argmax before them and gives the token
// after them, which the lane's logits after accept_verified must give too.
inline std::vector<int32_t> speculative_greedy(Backend& b, int lane, std::span<const int32_t> prompt, size_t n,
                                               int k, const Drafter& drafter, RoundStats& stats) {
    const size_t V = b.vocab_size();
    b.reset_lane(lane);
    b.prefill(lane, prompt, LogitsOut::Last, nullptr);
    std::vector<int32_t> out{b.sample_after_prefill(lane, {}, {}, 0).token};
    while (out.size() < n) {
        const std::vector<int32_t> drafts = drafter(out, k);
        std::vector<int32_t> window{out.back()};
        window.insert(window.end(), drafts.begin(), drafts.end());
        std::vector<float> rows;
        b.verify(std::vector<VerifyStep>{{lane, window}}, rows);
        REQUIRE(rows.size() == window.size() * V);
        const DraftAcceptance a = accept_drafts(rows, V, drafts, {}, {});
        const size_t m = a.accepted;
        b.accept_verified(lane, uint32_t(m + 1));
        out.insert(out.end(), drafts.begin(), drafts.begin() + long(m));
        out.push_back(a.next_token);
        REQUIRE(b.sample_after_prefill(lane, {}, {}, 0).token == a.next_token);
        stats.rounds++, stats.drafted += drafts.size(), stats.accepted += m;
    }
    out.resize(n);
    return out;
}

inline Drafter mtp_drafter(Backend& b, int lane) {
    return [&b, lane](const std::vector<int32_t>& out, int k) {
        return b.draft_mtp(std::vector<DraftRequest>{{lane, out.back(), k}}, nullptr)[0];
    };
}

} // namespace ninfer::test
