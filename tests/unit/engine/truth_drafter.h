// ninfer tests - the speculation tests' drafters that know the answer: an oracle that drafts the
// true continuation and an always-wrong one that drafts each true token + 1 (mod the vocabulary).
//
// Contract: truth_draft(truths, right, vocab, seq, k) finds the truth that seq is a proper prefix
// of and returns up to k of its next tokens (right), or each of them + 1 mod vocab (!right); empty
// when no truth continues seq. truths: every sequence's prompt followed by its plain output.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::test {

inline std::vector<int32_t> truth_draft(const std::vector<std::vector<int32_t>>& truths, bool right, int32_t vocab,
                                        std::span<const int32_t> seq, int k) {
    std::vector<int32_t> d;
    for (const auto& t : truths)
        if (t.size() > seq.size() && std::equal(seq.begin(), seq.end(), t.begin()))
            for (size_t i = seq.size(); i < t.size() && d.size() < size_t(k); ++i)
                d.push_back(right ? t[i] : (t[i] + 1) % vocab);
    return d;
}

} // namespace ninfer::test
