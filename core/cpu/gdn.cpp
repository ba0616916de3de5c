// ninfer::core - Gated DeltaNet recurrence and its chunked (WY/UT) equivalent, f32.
#include "core/cpu/gdn.h"

#include "core/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ninfer::core::cpu {

void gdn_recurrent(const GdnHeadSequence& s, float* S) {
    const uint32_t dk = s.dk, dv = s.dv;
    std::vector<float> kS(dv);
    for (size_t t = 0; t < s.n_tokens; ++t) {
        const float* q = s.q + t * s.qk_stride;
        const float* k = s.k + t * s.qk_stride;
        const float* v = s.v + t * s.v_stride;
        const float decay = std::exp(s.g[t * s.gb_stride]);
        const float beta = s.beta[t * s.gb_stride];
        // S = exp(g) S; the error uses the decayed state: delta = beta (v - S^T k).
        std::fill(kS.begin(), kS.end(), 0.0f);
        for (uint32_t i = 0; i < dk; ++i) {
            float* row = S + size_t(i) * dv;
            for (uint32_t j = 0; j < dv; ++j)
                row[j] *= decay;
            axpy(k[i], row, kS.data(), dv);
        }
        for (uint32_t j = 0; j < dv; ++j)
            kS[j] = beta * (v[j] - kS[j]); // now delta
        float* o = s.o + t * s.o_stride;
        std::fill(o, o + dv, 0.0f);
        for (uint32_t i = 0; i < dk; ++i) {
            float* row = S + size_t(i) * dv;
            axpy(k[i], kS.data(), row, dv); // S += k ⊗ delta
            axpy(q[i], row, o, dv);         // o = S^T q
        }
    }
}

// One chunk of C tokens with entry state S0 (see docs/MODEL.md §6, "Chunked prefill"):
//   Gamma_i = sum_{j<=i} g_j;  A[i][j] = beta_i exp(Gamma_i - Gamma_j) (k_i . k_j), j < i
//   (I + A) Delta = diag(beta) (V - diag(exp Gamma) K S0)      (forward substitution)
//   o_i = exp(Gamma_i) q_i^T S0 + sum_{j<=i} exp(Gamma_i - Gamma_j) (q_i . k_j) Delta_j
//   S_C = exp(Gamma_C) S0 + sum_j exp(Gamma_C - Gamma_j) k_j ⊗ Delta_j
static void gdn_one_chunk(const GdnHeadSequence& s, size_t t0, size_t C, float* S,
                          std::vector<float>& delta, std::vector<float>& gamma) {
    const uint32_t dk = s.dk, dv = s.dv;
    auto q = [&](size_t i) { return s.q + (t0 + i) * s.qk_stride; };
    auto k = [&](size_t i) { return s.k + (t0 + i) * s.qk_stride; };
    delta.assign(C * dv, 0.0f);
    gamma.resize(C);
    float acc = 0;
    for (size_t i = 0; i < C; ++i) {
        acc += s.g[(t0 + i) * s.gb_stride];
        gamma[i] = acc;
    }
    // Right-hand side and output's state term, both against S0.
    for (size_t i = 0; i < C; ++i) {
        float* d = delta.data() + i * dv;
        float* o = s.o + (t0 + i) * s.o_stride;
        std::fill(o, o + dv, 0.0f);
        const float* ki = k(i);
        const float* qi = q(i);
        for (uint32_t a = 0; a < dk; ++a) {
            const float* row = S + size_t(a) * dv;
            axpy(ki[a], row, d, dv);
            axpy(qi[a], row, o, dv);
        }
        const float e = std::exp(gamma[i]);
        const float beta = s.beta[(t0 + i) * s.gb_stride];
        const float* v = s.v + (t0 + i) * s.v_stride;
        for (uint32_t j = 0; j < dv; ++j) {
            d[j] = beta * (v[j] - e * d[j]);
            o[j] *= e;
        }
    }
    // Forward substitution: Delta_i -= sum_{j<i} A[i][j] Delta_j.
    for (size_t i = 1; i < C; ++i) {
        const float beta = s.beta[(t0 + i) * s.gb_stride];
        float* di = delta.data() + i * dv;
        for (size_t j = 0; j < i; ++j) {
            const float a = beta * std::exp(gamma[i] - gamma[j]) * dot(k(i), k(j), dk);
            axpy(-a, delta.data() + j * dv, di, dv);
        }
    }
    // Intra-chunk output.
    for (size_t i = 0; i < C; ++i) {
        float* o = s.o + (t0 + i) * s.o_stride;
        for (size_t j = 0; j <= i; ++j) {
            const float w = std::exp(gamma[i] - gamma[j]) * dot(q(i), k(j), dk);
            axpy(w, delta.data() + j * dv, o, dv);
        }
    }
    // State update.
    const float eC = std::exp(gamma[C - 1]);
    for (size_t i = 0; i < C; ++i)
        gamma[i] = std::exp(gamma[C - 1] - gamma[i]); // reused as the per-token state weight
    for (uint32_t a = 0; a < dk; ++a) {
        float* row = S + size_t(a) * dv;
        for (uint32_t j = 0; j < dv; ++j)
            row[j] *= eC;
        for (size_t i = 0; i < C; ++i)
            axpy(gamma[i] * k(i)[a], delta.data() + i * dv, row, dv);
    }
}

void gdn_chunked(const GdnHeadSequence& s, float* S, size_t chunk, size_t first_chunk) {
    std::vector<float> delta, gamma;
    size_t t = 0, len = std::min(first_chunk ? first_chunk : chunk, s.n_tokens);
    while (t < s.n_tokens) {
        gdn_one_chunk(s, t, len, S, delta, gamma);
        t += len;
        len = std::min(chunk, s.n_tokens - t);
    }
}

} // namespace ninfer::core::cpu
