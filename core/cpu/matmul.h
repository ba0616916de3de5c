// ninfer::core - threaded matrix products over weights in their stored format.
//
// Contract: matmul(pool, w, x, n_tokens, y, ldy) computes y[t*ldy + r] = w.row(r) . x[t*cols]
// for every token t < n_tokens and row r < w.rows(). One token uses the codec's dot_rows (no
// decoded copy); several tokens decode each block of weight rows once and apply it to all of
// them. Rows are split over the pool's threads.
#pragma once

#include "core/cpu/thread_pool.h"
#include "core/model/weights.h"

#include <cstddef>

namespace ninfer::core::cpu {

void matmul(ThreadPool& pool, const Matrix& w, const float* x, size_t n_tokens, float* y,
            size_t ldy);
inline void matmul(ThreadPool& pool, const Matrix& w, const float* x, size_t n_tokens, float* y) {
    matmul(pool, w, x, n_tokens, y, w.rows());
}

} // namespace ninfer::core::cpu
