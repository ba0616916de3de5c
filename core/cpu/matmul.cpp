// ninfer::core - threaded matmul over stored-format weights (decode once, use for every token).
#include "core/cpu/matmul.h"

#include "core/cpu/ops.h"
#include "core/cpu/simd.h"

#include <algorithm>
#include <vector>

namespace ninfer::core::cpu {

namespace {

constexpr size_t kRowBlock = 16;

// Y[t][r] = W[r] . X[t] for a block of decoded rows, 4 rows x 2 tokens per register tile.
NINFER_SIMD_CLONES void block_product(const float* W, size_t n_rows, const float* X, size_t n_tokens,
                                      size_t cols, float* Y, size_t ldy) {
    const size_t vec_cols = cols / 8 * 8;
    size_t r = 0;
    for (; r + 4 <= n_rows; r += 4) {
        const float* w0 = W + r * cols;
        const float* w1 = w0 + cols;
        const float* w2 = w1 + cols;
        const float* w3 = w2 + cols;
        size_t t = 0;
        for (; t + 2 <= n_tokens; t += 2) {
            const float* x0 = X + t * cols;
            const float* x1 = x0 + cols;
            v8f a00 = splat8(0), a01 = splat8(0), a10 = splat8(0), a11 = splat8(0);
            v8f a20 = splat8(0), a21 = splat8(0), a30 = splat8(0), a31 = splat8(0);
            for (size_t k = 0; k < vec_cols; k += 8) {
                const v8f vx0 = load8(x0 + k), vx1 = load8(x1 + k);
                const v8f v0 = load8(w0 + k), v1 = load8(w1 + k), v2 = load8(w2 + k), v3 = load8(w3 + k);
                a00 += v0 * vx0; a01 += v0 * vx1;
                a10 += v1 * vx0; a11 += v1 * vx1;
                a20 += v2 * vx0; a21 += v2 * vx1;
                a30 += v3 * vx0; a31 += v3 * vx1;
            }
            float s[8] = {hsum8(a00), hsum8(a01), hsum8(a10), hsum8(a11),
                          hsum8(a20), hsum8(a21), hsum8(a30), hsum8(a31)};
            for (size_t k = vec_cols; k < cols; ++k) {
                s[0] += w0[k] * x0[k]; s[1] += w0[k] * x1[k];
                s[2] += w1[k] * x0[k]; s[3] += w1[k] * x1[k];
                s[4] += w2[k] * x0[k]; s[5] += w2[k] * x1[k];
                s[6] += w3[k] * x0[k]; s[7] += w3[k] * x1[k];
            }
            for (size_t i = 0; i < 4; ++i) {
                Y[t * ldy + r + i] = s[2 * i];
                Y[(t + 1) * ldy + r + i] = s[2 * i + 1];
            }
        }
        for (; t < n_tokens; ++t)
            for (size_t i = 0; i < 4; ++i)
                Y[t * ldy + r + i] = dot(W + (r + i) * cols, X + t * cols, cols);
    }
    for (; r < n_rows; ++r)
        for (size_t t = 0; t < n_tokens; ++t)
            Y[t * ldy + r] = dot(W + r * cols, X + t * cols, cols);
}

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
    // Tokens in slabs that stay in cache while a decoded row block is applied to them.
    const size_t token_slab = std::max<size_t>(2, (256 * 1024 / sizeof(float)) / std::max<size_t>(cols, 1));
    pool.parallel_for(n_blocks, [&](size_t b0, size_t b1) {
        std::vector<float> block(kRowBlock * cols);
        for (size_t b = b0; b < b1; ++b) {
            const size_t r0 = b * kRowBlock, n = std::min(kRowBlock, rows - r0);
            w.decode(r0, n, block.data());
            for (size_t t0 = 0; t0 < n_tokens; t0 += token_slab) {
                const size_t nt = std::min(token_slab, n_tokens - t0);
                block_product(block.data(), n, x + t0 * cols, nt, cols, y + t0 * ldy + r0, ldy);
            }
        }
    });
}

} // namespace ninfer::core::cpu
