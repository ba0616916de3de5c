// ninfer tests - what the constrained-lane tests share (scheduler_constraint.cpp,
// constrained_speculation.cpp, constrained_drafts.cpp): the ids their grammars and replies give a
// meaning to, and the tiny random model they decode with (seed 5, with an MTP head: the head is
// drawn after the text weights, so the text model is the same with or without it).
#pragma once

#include "tests/unit/cpu/tiny_models.h"

#include <memory>
#include <vector>

namespace ninfer::test {

inline constexpr int32_t kEnd = 200, kThinkEnd = 150, kSeparator = 151;
inline const std::vector<int32_t> kDigits = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};

struct ConstrainedModel {
    core::ModelConfig config = tiny_config(false);
    std::unique_ptr<core::InMemoryModel> model = core::InMemoryModel::random(config, {.seed = 5, .with_mtp = true});
    core::ModelWeights weights = model->weights();
};

inline const ConstrainedModel& constrained_model() {
    static const ConstrainedModel m;
    return m;
}

} // namespace ninfer::test
