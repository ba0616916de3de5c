// ninfer::core - a multimodal prefill chunk's input checks and the lane's next text position.
#include "core/backend/prefill_inputs.h"

#include <algorithm>
#include <string>

namespace ninfer::core {

void check_prefill_inputs(size_t n_tokens, const PrefillInputs& in, uint32_t hidden) {
    const size_t H = hidden;
    if (in.positions.size() != n_tokens || in.embedding_rows.size() != n_tokens)
        throw Error("backend: a multimodal prefill of " + std::to_string(n_tokens) + " tokens with " +
                    std::to_string(in.positions.size()) + " positions and " + std::to_string(in.embedding_rows.size()) +
                    " embedding indices");
    for (int32_t row : in.embedding_rows)
        if (row >= 0 && (size_t(row) + 1) * H > in.embeddings.size())
            throw Error("backend: embedding row " + std::to_string(row) + " past the " +
                        std::to_string(in.embeddings.size() / H) + " rows given");
}

int64_t next_text_position(const PrefillInputs& in, int64_t before) {
    int64_t next = before;
    for (const MropePosition& p : in.positions)
        next = std::max<int64_t>(next, int64_t(std::max({p.t, p.h, p.w})) + 1);
    return next;
}

} // namespace ninfer::core
