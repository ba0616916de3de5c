// ninfer tests - a hand-written TokenConstraint for the scheduler's constraint tests: position i
// of the reply takes any id of sets[i]; accepting once min_length tokens came; finished after the
// last set (never, with repeat_last: the last set then repeats forever).
#pragma once

#include "core/backend/token_constraint.h"

#include <algorithm>
#include <vector>

namespace ninfer::test {

class SetGrammar final : public core::TokenConstraint {
  public:
    SetGrammar(std::vector<std::vector<int32_t>> sets, size_t min_length, bool repeat_last = false)
        : sets_(std::move(sets)), min_length_(min_length), repeat_last_(repeat_last) {}
    void fill_mask(std::span<uint32_t> words) const override {
        std::fill(words.begin(), words.end(), 0u);
        if (const std::vector<int32_t>* set = current())
            for (int32_t t : *set) core::token_mask_set(words, t, true);
    }
    bool accept(int32_t token) override {
        const std::vector<int32_t>* set = current();
        if (!set || std::find(set->begin(), set->end(), token) == set->end()) return false;
        accepted_.push_back(token);
        return true;
    }
    void rollback(size_t n) override { accepted_.resize(accepted_.size() - n); }
    bool accepting() const override { return accepted_.size() >= min_length_; }
    bool finished() const override { return !repeat_last_ && accepted_.size() >= sets_.size(); }
    const std::vector<int32_t>& accepted() const { return accepted_; }

  private:
    const std::vector<int32_t>* current() const {
        if (accepted_.size() < sets_.size()) return &sets_[accepted_.size()];
        return repeat_last_ && !sets_.empty() ? &sets_.back() : nullptr;
    }
    std::vector<std::vector<int32_t>> sets_;
    size_t min_length_;
    bool repeat_last_;
    std::vector<int32_t> accepted_;
};

} // namespace ninfer::test
