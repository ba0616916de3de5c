// ninfer tests - the vision tower in float64, written from docs/MODEL.md §9 and transformers'
// Qwen3_5VisionModel (processor patch order, align_corners bilinear position table, axial 2-D
// rotary, attention per temporal patch, 2x2 merger), and the comparison the tower tests use.
#pragma once

#include "core/model/vision_weights.h"
#include "core/vision/vision_input.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ninfer::test {

using namespace ninfer::core;

using Vec = std::vector<double>;

inline Vec decode(const Matrix& m) {
    std::vector<float> f(m.rows() * m.cols());
    m.decode(0, m.rows(), f.data());
    return Vec(f.begin(), f.end());
}

// y[r] = W x[r] + b for rows of x ([n][cols]).
inline Vec linear(const Matrix& m, const std::vector<float>& bias, const Vec& x, size_t n) {
    const Vec W = decode(m);
    const size_t out = m.rows(), in = m.cols();
    Vec y(n * out);
    for (size_t r = 0; r < n; ++r)
        for (size_t o = 0; o < out; ++o) {
            double s = bias.empty() ? 0.0 : bias[o];
            for (size_t i = 0; i < in; ++i)
                s += W[o * in + i] * x[r * in + i];
            y[r * out + o] = s;
        }
    return y;
}

inline Vec layer_norm(const Vec& x, size_t n, size_t D, const std::vector<float>& w, const std::vector<float>& b) {
    Vec y(x.size());
    for (size_t r = 0; r < n; ++r) {
        double mean = 0, var = 0;
        for (size_t i = 0; i < D; ++i)
            mean += x[r * D + i] / double(D);
        for (size_t i = 0; i < D; ++i)
            var += (x[r * D + i] - mean) * (x[r * D + i] - mean) / double(D);
        for (size_t i = 0; i < D; ++i)
            y[r * D + i] = (x[r * D + i] - mean) / std::sqrt(var + 1e-6) * w[i] + b[i];
    }
    return y;
}

// The whole tower in float64. Patch rows follow the processor's permute (t, block_y, block_x,
// merge_y, merge_x), so the grid cell of a row comes from walking those loops in that order.
inline Vec reference_tower(const VisionWeights& w, const VisionInput& in) {
    const VisionConfig& c = w.config;
    const size_t D = c.hidden_size, hd = c.head_dim(), H = c.num_heads, M = c.spatial_merge_size;
    const size_t gh = in.grid_h, gw = in.grid_w, frame = gh * gw, N = in.n_patches();
    std::vector<std::pair<size_t, size_t>> cell; // (row, col) of each patch row
    for (int t = 0; t < in.grid_t; ++t)
        for (size_t by = 0; by < gh / M; ++by)
            for (size_t bx = 0; bx < gw / M; ++bx)
                for (size_t my = 0; my < M; ++my)
                    for (size_t mx = 0; mx < M; ++mx)
                        cell.push_back({by * M + my, bx * M + mx});

    Vec x = linear(w.patch_embedding, w.patch_embedding_bias, Vec(in.patches.begin(), in.patches.end()), N);
    // F.interpolate(bilinear, align_corners=True) of the side x side table to gh x gw.
    const Vec table = decode(w.position_embedding);
    const size_t side = c.position_grid_side();
    for (size_t r = 0; r < N; ++r) {
        const double sy = double(cell[r].first) * double(side - 1) / double(gh - 1);
        const double sx = double(cell[r].second) * double(side - 1) / double(gw - 1);
        const size_t y0 = size_t(sy), x0 = size_t(sx);
        const size_t y1 = std::min(y0 + 1, side - 1), x1 = std::min(x0 + 1, side - 1);
        const double fy = sy - double(y0), fx = sx - double(x0);
        for (size_t i = 0; i < D; ++i)
            x[r * D + i] += (1 - fy) * (1 - fx) * table[(y0 * side + x0) * D + i] +
                            (1 - fy) * fx * table[(y0 * side + x1) * D + i] +
                            fy * (1 - fx) * table[(y1 * side + x0) * D + i] + fy * fx * table[(y1 * side + x1) * D + i];
    }
    auto rotate = [&](Vec& v, size_t r) { // pairs (i, i + hd/2): first hd/4 by row, next hd/4 by column
        for (size_t h = 0; h < H; ++h)
            for (size_t i = 0; i < hd / 2; ++i) {
                const double axis = i < hd / 4 ? double(cell[r].first) : double(cell[r].second);
                const double angle = axis * std::pow(c.rope_theta, -2.0 * double(i % (hd / 4)) / double(hd / 2));
                double& a = v[r * D + h * hd + i];
                double& b = v[r * D + h * hd + i + hd / 2];
                const double a0 = a, b0 = b;
                a = a0 * std::cos(angle) - b0 * std::sin(angle);
                b = b0 * std::cos(angle) + a0 * std::sin(angle);
            }
    };
    for (const VisionBlockWeights& b : w.blocks) {
        const Vec xn = layer_norm(x, N, D, b.norm1_weight, b.norm1_bias);
        Vec q = linear(b.query, b.query_bias, xn, N), k = linear(b.key, b.key_bias, xn, N);
        const Vec v = linear(b.value, b.value_bias, xn, N);
        for (size_t r = 0; r < N; ++r) {
            rotate(q, r);
            rotate(k, r);
        }
        Vec attn(N * D, 0.0);
        for (size_t r = 0; r < N; ++r) {
            const size_t s0 = r / frame * frame; // keys: this row's temporal patch only
            for (size_t h = 0; h < H; ++h) {
                Vec p(frame);
                double m = -1e300, sum = 0;
                for (size_t j = 0; j < frame; ++j) {
                    double d = 0;
                    for (size_t i = 0; i < hd; ++i)
                        d += q[r * D + h * hd + i] * k[(s0 + j) * D + h * hd + i];
                    p[j] = d / std::sqrt(double(hd));
                    m = std::max(m, p[j]);
                }
                for (double& e : p)
                    sum += (e = std::exp(e - m));
                for (size_t j = 0; j < frame; ++j)
                    for (size_t i = 0; i < hd; ++i)
                        attn[r * D + h * hd + i] += p[j] / sum * v[(s0 + j) * D + h * hd + i];
            }
        }
        const Vec o = linear(b.output, b.output_bias, attn, N);
        for (size_t i = 0; i < x.size(); ++i)
            x[i] += o[i];
        Vec f = linear(b.fc1, b.fc1_bias, layer_norm(x, N, D, b.norm2_weight, b.norm2_bias), N);
        for (double& e : f)
            e = 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)));
        const Vec f2 = linear(b.fc2, b.fc2_bias, f, N);
        for (size_t i = 0; i < x.size(); ++i)
            x[i] += f2[i];
    }
    Vec g = linear(w.merger_fc1, w.merger_fc1_bias, layer_norm(x, N, D, w.merger_norm_weight, w.merger_norm_bias),
                   N / (M * M)); // a group's input: its four consecutive rows side by side
    for (double& e : g)
        e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
    return linear(w.merger_fc2, w.merger_fc2_bias, g, N / (M * M));
}

struct Agreement {
    double cosine = 1, max_rel = 0; // max |got - want| / max |want|
};

// Cosine >= min_cosine and max |got - want| <= max_rel * max |want|; returns both measures.
inline Agreement compare(const std::vector<float>& got, const Vec& want, double min_cosine = 0.99999,
                         double max_rel = 1e-4) {
    REQUIRE(got.size() == want.size());
    double dot = 0, gg = 0, ww = 0, max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        dot += got[i] * want[i];
        gg += double(got[i]) * got[i];
        ww += want[i] * want[i];
        max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
        max_abs = std::max(max_abs, std::fabs(want[i]));
    }
    const double cosine = dot / std::sqrt(gg * ww);
    INFO("cosine " << cosine << ", max |d| " << max_diff << " of max |x| " << max_abs);
    CHECK(cosine >= min_cosine);
    CHECK(max_diff <= max_rel * max_abs);
    return {cosine, max_abs > 0 ? max_diff / max_abs : max_diff};
}

} // namespace ninfer::test
