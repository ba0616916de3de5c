// ninfer::core - checks and bookkeeping every backend's prefill_with shares (backend.h contract).
//
// Contract:
// - check_prefill_inputs(n_tokens, inputs, hidden) throws ninfer::Error("backend: ...") unless
//   inputs has one position and one embedding index per token and every index >= 0 names a whole
//   row of `hidden` floats in inputs.embeddings.
// - next_text_position(inputs, before) is a lane's next text position after a chunk: the largest
//   position the chunk holds + 1, at least `before` (where text went next before the chunk).
// Thread safety: pure functions.
#pragma once

#include "core/backend/backend.h"

#include <cstddef>
#include <cstdint>

namespace ninfer::core {

void check_prefill_inputs(size_t n_tokens, const PrefillInputs& inputs, uint32_t hidden);
int64_t next_text_position(const PrefillInputs& inputs, int64_t before);

} // namespace ninfer::core
