// ninfer tests - docs/MODEL.md §8 written out in double over ModelWeights, independent of the CPU
// forward code: the MTP head over a whole sequence of rows (h_t, x_{t+1}) at positions 0..T-1
// (causal attention with partial NeoX RoPE, q/k offset norms, GQA and the sigmoid gate; dense
// SwiGLU or the MoE with renormalised top-k and the gated shared expert), and the greedy draft
// chain that feeds each row's output d back with the draft it gave.
#pragma once

#include "core/model/weights.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace ninfer::test {

using Vec = std::vector<double>;

class MtpFormula {
  public:
    explicit MtpFormula(const core::ModelWeights& w) : w_(w), c_(w.config), m_(*w.mtp) {}

    // d = mtp.norm(u) for every row; hidden[t] = h_t, next[t] = x_{t+1}.
    std::vector<Vec> run(const std::vector<Vec>& hidden, const std::vector<int32_t>& next) const {
        const size_t T = hidden.size(), H = c_.hidden_size;
        const core::LayerWeights& L = m_.layer;
        std::vector<Vec> u(T), q(T), k(T), v(T), gate(T);
        for (size_t t = 0; t < T; ++t) {
            std::vector<float> e(H);
            w_.token_embedding.decode(uint64_t(next[t]), 1, e.data());
            Vec in = norm(Vec(e.begin(), e.end()), m_.embedding_norm);
            const Vec hn = norm(hidden[t], m_.hidden_norm);
            in.insert(in.end(), hn.begin(), hn.end()); // the embedding half first
            u[t] = product(m_.input_projection, in);
            const Vec a = norm(u[t], L.input_norm);
            q[t] = heads(product(L.attention.query, a), L.attention.query_norm, t);
            k[t] = heads(product(L.attention.key, a), L.attention.key_norm, t);
            v[t] = product(L.attention.value, a);
            gate[t] = product(L.attention.gate, a);
        }
        const size_t hd = c_.head_dim, group = c_.num_attention_heads / c_.num_key_value_heads;
        std::vector<Vec> d(T);
        for (size_t t = 0; t < T; ++t) {
            Vec attn(c_.attn_q_dim(), 0.0);
            for (size_t h = 0; h < c_.num_attention_heads; ++h) {
                const size_t kv = (h / group) * hd;
                Vec p(t + 1);
                for (size_t s = 0; s <= t; ++s)
                    p[s] = dot(&q[t][h * hd], &k[s][kv], hd) / std::sqrt(double(hd));
                const double mx = *std::max_element(p.begin(), p.end());
                double sum = 0;
                for (double& x : p)
                    sum += x = std::exp(x - mx);
                for (size_t s = 0; s <= t; ++s)
                    for (size_t i = 0; i < hd; ++i)
                        attn[h * hd + i] += p[s] / sum * v[s][kv + i];
                for (size_t i = 0; i < hd; ++i)
                    attn[h * hd + i] *= sigmoid(gate[t][h * hd + i]);
            }
            Vec x = add(u[t], product(L.attention.output, attn));
            x = add(x, ffn(L, norm(x, L.post_attention_norm)));
            d[t] = norm(x, m_.final_norm);
        }
        return d;
    }

    Vec logits(const Vec& d) const { return product(w_.output_head, d); }

    // Greedy drafts after next_token for a prompt whose final hidden rows are `hidden`; returns the
    // drafts' logits rows.
    std::vector<Vec> draft(std::vector<Vec> hidden, const std::vector<int32_t>& prompt, int32_t next_token,
                           int k) const {
        std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
        next.push_back(next_token);
        std::vector<Vec> out;
        for (int i = 0; i < k; ++i) {
            const Vec d = run(hidden, next).back();
            out.push_back(logits(d));
            hidden.push_back(d);
            next.push_back(int32_t(std::max_element(out.back().begin(), out.back().end()) - out.back().begin()));
        }
        return out;
    }

  private:
    static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
    static double dot(const double* a, const double* b, size_t n) {
        double s = 0;
        for (size_t i = 0; i < n; ++i)
            s += a[i] * b[i];
        return s;
    }
    static Vec add(Vec a, const Vec& b) {
        for (size_t i = 0; i < a.size(); ++i)
            a[i] += b[i];
        return a;
    }
    Vec norm(const Vec& x, const std::vector<float>& w) const {
        const double r = 1.0 / std::sqrt(dot(x.data(), x.data(), x.size()) / double(x.size()) + c_.rms_norm_eps);
        Vec y(x.size());
        for (size_t i = 0; i < x.size(); ++i)
            y[i] = x[i] * r * (1.0 + double(w[i]));
        return y;
    }
    static Vec product(const core::Matrix& m, const Vec& x) {
        std::vector<float> row(m.cols());
        Vec y(m.rows());
        for (uint64_t r = 0; r < m.rows(); ++r) {
            m.decode(r, 1, row.data());
            for (size_t i = 0; i < row.size(); ++i)
                y[r] += double(row[i]) * x[i];
        }
        return y;
    }
    // Per head: offset norm over head_dim, then rotate-half RoPE of the first rotary dims at `pos`.
    Vec heads(Vec x, const std::vector<float>& w, size_t pos) const {
        const size_t hd = c_.head_dim, rot = c_.rotary_dim(), half = rot / 2;
        for (size_t h = 0; h < x.size() / hd; ++h) {
            Vec one(x.begin() + long(h * hd), x.begin() + long((h + 1) * hd));
            one = norm(one, w);
            for (size_t i = 0; i < half; ++i) {
                const double angle = double(pos) * std::pow(c_.rope_theta, -2.0 * double(i) / double(rot));
                const double a = one[i], b = one[i + half];
                one[i] = a * std::cos(angle) - b * std::sin(angle);
                one[i + half] = b * std::cos(angle) + a * std::sin(angle);
            }
            std::copy(one.begin(), one.end(), x.begin() + long(h * hd));
        }
        return x;
    }
    Vec swiglu(const core::MlpWeights& m, const Vec& x) const {
        Vec g = product(m.gate, x);
        const Vec up = product(m.up, x);
        for (size_t i = 0; i < g.size(); ++i)
            g[i] = g[i] * sigmoid(g[i]) * up[i];
        return product(m.down, g);
    }
    Vec ffn(const core::LayerWeights& L, const Vec& x) const {
        if (!c_.is_moe())
            return swiglu(L.mlp, x);
        Vec p = product(L.moe.router, x);
        const double mx = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double& v : p)
            sum += v = std::exp(v - mx);
        std::vector<size_t> order(p.size());
        std::iota(order.begin(), order.end(), size_t(0));
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
        double top = 0;
        for (uint32_t i = 0; i < c_.num_experts_per_tok; ++i)
            top += p[order[i]];
        Vec out(x.size(), 0.0);
        for (uint32_t i = 0; i < c_.num_experts_per_tok; ++i) {
            const Vec e = swiglu(L.moe.experts[order[i]], x);
            for (size_t j = 0; j < out.size(); ++j)
                out[j] += p[order[i]] / top * e[j];
        }
        const Vec shared = swiglu(L.moe.shared, x);
        const double score = sigmoid(product(L.moe.shared_score, x)[0]);
        for (size_t j = 0; j < out.size(); ++j)
            out[j] += score * shared[j];
        return out;
    }

    const core::ModelWeights& w_;
    const core::ModelConfig& c_;
    const core::MtpWeights& m_;
};

} // namespace ninfer::test
