// ninfer::core - threaded matmul over stored-format weights (decode once, use for every token).
#include "core/cpu/matmul.h"

#include "core/cpu/ops.h"

#include <algorithm>
#include <vector>

namespace ninfer::core::cpu {

namespace {
constexpr size_t kRowBlock = 16;
constexpr size_t kTokenBlock = 16; // tokens per pass over a decoded row block (x stays in cache)
} // namespace

void matmul(ThreadPool& pool, const Matrix& w, const float* x, size_t n_tokens, float* y,
            size_t ldy) {
    const size_t rows = w.rows(), cols = w.cols();
    if (n_tokens == 0 || rows == 0)
        return;
    const size_t n_blocks = (rows + kRowBlock - 1) / kRowBlock;
    if (n_tokens == 1) {
        pool.parallel_for(n_blocks, [&](size_t b0, size_t b1) {
            const size_t r0 = b0 * kRowBlock, r1 = std::min(rows, b1 * kRowBlock);
            w.dot(r0, r1 - r0, x, y + r0);
        });
        return;
    }
    pool.parallel_for(n_blocks, [&](size_t b0, size_t b1) {
        std::vector<float> block(kRowBlock * cols);
        for (size_t b = b0; b < b1; ++b) {
            const size_t r0 = b * kRowBlock, n = std::min(kRowBlock, rows - r0);
            w.decode(r0, n, block.data());
            for (size_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock)
                for (size_t r = 0; r < n; ++r)
                    for (size_t t = t0; t < std::min(n_tokens, t0 + kTokenBlock); ++t)
                        y[t * ldy + r0 + r] = dot(block.data() + r * cols, x + t * cols, cols);
        }
    });
}

} // namespace ninfer::core::cpu
