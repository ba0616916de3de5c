// ninfer::core - CPU forward pass: embedding, gated attention, Gated DeltaNet, MLP/MoE, head.
#include "core/cpu/forward.h"

#include "core/cpu/gdn.h"
#include "core/cpu/matmul.h"
#include "core/cpu/ops.h"
#include "core/model/kv_codec.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ninfer::core::cpu {

ModelRunner::ModelRunner(const ModelWeights& weights, const MemoryPlan& plan, KvStore& kv,
                         ThreadPool& pool, ForwardOptions options)
    : w_(weights), c_(weights.config), plan_(plan), kv_(kv), pool_(pool), options_(options),
      hidden_size_(weights.config.hidden_size) {}

size_t ModelRunner::conv_floats() const {
    return size_t(c_.n_linear_attention_layers()) * (c_.linear_conv_kernel_dim - 1) * c_.gdn_conv_dim();
}

size_t ModelRunner::recurrent_floats() const {
    return size_t(c_.n_linear_attention_layers()) * c_.linear_num_value_heads *
           c_.linear_key_head_dim * c_.linear_value_head_dim;
}

static void add_into(float* x, const float* y, size_t n) {
    for (size_t i = 0; i < n; ++i)
        x[i] += y[i];
}

void ModelRunner::set_rows(std::span<const RowSegment> segs, size_t R) {
    row_position_.resize(R);
    row_rope_.resize(R);
    row_segment_.resize(R);
    for (const RowSegment& s : segs)
        for (uint32_t i = 0; i < s.n; ++i) {
            row_position_[s.row + i] = s.start + i;
            row_rope_[s.row + i] = s.positions ? s.positions[i]
                                               : MropePosition::text(uint32_t(int64_t(s.start + i) + s.lane->rope_offset));
            row_segment_[s.row + i] = &s;
        }
    x_.resize(R * hidden_size_);
    xn_.resize(R * hidden_size_);
    mix_.resize(R * hidden_size_);
}

void ModelRunner::embed(std::span<const int32_t> tokens, float* out) {
    for (size_t r = 0; r < tokens.size(); ++r) {
        if (tokens[r] < 0 || uint32_t(tokens[r]) >= c_.vocab_size)
            throw Error("backend: token id " + std::to_string(tokens[r]) + " is outside the vocabulary");
        w_.token_embedding.decode(uint64_t(tokens[r]), 1, out + r * hidden_size_);
    }
}

void ModelRunner::override_embeddings(std::span<const RowSegment> segs, float* out) {
    for (const RowSegment& s : segs) // the vision tower's rows at the placeholders
        for (uint32_t i = 0; s.embedding_rows && i < s.n; ++i)
            if (s.embedding_rows[i] >= 0)
                std::copy_n(s.embeddings + size_t(s.embedding_rows[i]) * hidden_size_, hidden_size_,
                            out + (s.row + i) * hidden_size_);
}

void ModelRunner::norm_rows(const std::vector<float>& weight, const float* in, float* out, size_t R) {
    const size_t H = hidden_size_;
    const float eps = c_.rms_norm_eps;
    pool_.parallel_for(R, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r)
            rms_norm_offset(in + r * H, weight.data(), H, eps, out + r * H);
    });
}

void ModelRunner::layer(const LayerWeights& L, uint32_t kv_or_gdn_index, std::span<const RowSegment> segs,
                        size_t R) {
    norm_rows(L.input_norm, x_.data(), xn_.data(), R);
    if (L.kind == LayerKind::FullAttention)
        attention(L, kv_or_gdn_index, segs, R);
    else
        gdn(L, kv_or_gdn_index, segs, R);
    add_into(x_.data(), mix_.data(), R * hidden_size_);
    norm_rows(L.post_attention_norm, x_.data(), xn_.data(), R);
    ffn(L, R);
    add_into(x_.data(), mix_.data(), R * hidden_size_);
}

void ModelRunner::forward(std::span<const RowSegment> segs, std::span<const int32_t> tokens) {
    const size_t R = tokens.size();
    set_rows(segs, R);
    embed(tokens, x_.data());
    override_embeddings(segs, x_.data());
    uint32_t full_index = 0, gdn_index = 0;
    for (uint32_t l = 0; l < c_.num_hidden_layers; ++l) {
        const LayerWeights& L = w_.layers[l];
        layer(L, L.kind == LayerKind::FullAttention ? full_index++ : gdn_index++, segs, R);
    }
    norm_rows(w_.final_norm, x_.data(), x_.data(), R);
}

void ModelRunner::mtp_forward(std::span<const RowSegment> segs, std::span<const int32_t> next_tokens,
                              const float* hidden_rows) {
    if (!w_.mtp || !plan_.mtp)
        throw Error("backend: the MTP head needs an artifact with an mtp component and a plan counting its KV");
    const MtpWeights& m = *w_.mtp;
    const size_t R = next_tokens.size(), H = hidden_size_;
    set_rows(segs, R);
    // u = fc([norm_e(embed(x_{t+1})), norm_h(h_t)]): the embedding half first.
    mtp_in_.resize(R * 2 * H);
    embed(next_tokens, xn_.data());
    override_embeddings(segs, xn_.data());
    const float eps = c_.rms_norm_eps;
    pool_.parallel_for(R, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r) {
            rms_norm_offset(xn_.data() + r * H, m.embedding_norm.data(), H, eps, mtp_in_.data() + r * 2 * H);
            rms_norm_offset(hidden_rows + r * H, m.hidden_norm.data(), H, eps, mtp_in_.data() + r * 2 * H + H);
        }
    });
    matmul(pool_, m.input_projection, mtp_in_.data(), R, x_.data());
    layer(m.layer, c_.n_full_attention_layers(), segs, R);
    norm_rows(m.final_norm, x_.data(), x_.data(), R);
}

void ModelRunner::logits(std::span<const size_t> rows, float* out) {
    const size_t H = hidden_size_;
    gathered_.resize(rows.size() * H);
    for (size_t i = 0; i < rows.size(); ++i)
        std::copy_n(hidden(rows[i]), H, gathered_.data() + i * H);
    matmul(pool_, w_.output_head, gathered_.data(), rows.size(), out);
}

void ModelRunner::attention(const LayerWeights& L, uint32_t fi, std::span<const RowSegment> segs, size_t R) {
    const AttentionWeights& w = L.attention;
    const uint32_t nH = c_.num_attention_heads, nKV = c_.num_key_value_heads, hd = c_.head_dim;
    const uint32_t rot = c_.rotary_dim(), group = nH / nKV;
    const size_t qd = c_.attn_q_dim(), kvd = c_.attn_kv_dim();
    const float eps = c_.rms_norm_eps;
    q_.resize(R * qd);
    gate_.resize(R * qd);
    k_.resize(R * kvd);
    v_.resize(R * kvd);
    attn_.resize(R * qd);
    matmul(pool_, w.query, xn_.data(), R, q_.data());
    matmul(pool_, w.gate, xn_.data(), R, gate_.data());
    matmul(pool_, w.key, xn_.data(), R, k_.data());
    matmul(pool_, w.value, xn_.data(), R, v_.data());

    // q/k norms, RoPE, then K/V rows into the lane's pages.
    pool_.parallel_for(R, [&](size_t r0, size_t r1) {
        std::vector<float> cs(rot / 2 + 1), sn(rot / 2 + 1);
        for (size_t r = r0; r < r1; ++r) {
            const uint32_t pos = row_position_[r];
            mrope_tables(row_rope_[r], rot, c_.rope_theta, c_.mrope_section, c_.mrope_interleaved, cs.data(),
                         sn.data());
            for (uint32_t h = 0; h < nH; ++h) {
                float* q = q_.data() + r * qd + size_t(h) * hd;
                rms_norm_offset(q, w.query_norm.data(), hd, eps, q);
                rope_neox(q, rot, cs.data(), sn.data());
            }
            LaneState& lane = *row_segment_[r]->lane;
            for (uint32_t h = 0; h < nKV; ++h) {
                float* k = k_.data() + r * kvd + size_t(h) * hd;
                rms_norm_offset(k, w.key_norm.data(), hd, eps, k);
                rope_neox(k, rot, cs.data(), sn.data());
                kv_encode_row(plan_.kv_dtype, k, hd, kv_.row(fi, false, lane.pages, pos, h));
                kv_encode_row(plan_.kv_dtype, v_.data() + r * kvd + size_t(h) * hd, hd,
                              kv_.row(fi, true, lane.pages, pos, h));
            }
        }
    });

    // Work items: (segment, KV head, block of tokens); each decodes the history it needs once.
    constexpr uint32_t kTokenBlock = 32;
    struct Item {
        const RowSegment* seg;
        uint32_t kv_head, t0, t1;
    };
    std::vector<Item> items;
    for (const RowSegment& s : segs)
        for (uint32_t h = 0; h < nKV; ++h)
            for (uint32_t t = 0; t < s.n; t += kTokenBlock)
                items.push_back({&s, h, t, std::min(s.n, t + kTokenBlock)});
    const float scale = 1.0f / std::sqrt(float(hd));
    pool_.parallel_for(items.size(), [&](size_t i0, size_t i1) {
        std::vector<float> K, V, p;
        for (size_t it = i0; it < i1; ++it) {
            const Item& item = items[it];
            const RowSegment& s = *item.seg;
            const uint32_t n_ctx = s.start + item.t1;
            K.resize(size_t(n_ctx) * hd);
            V.resize(size_t(n_ctx) * hd);
            p.resize(n_ctx);
            for (uint32_t j = 0; j < n_ctx; ++j) {
                kv_decode_row(plan_.kv_dtype, kv_.row(fi, false, s.lane->pages, j, item.kv_head), hd,
                              K.data() + size_t(j) * hd);
                kv_decode_row(plan_.kv_dtype, kv_.row(fi, true, s.lane->pages, j, item.kv_head), hd,
                              V.data() + size_t(j) * hd);
            }
            for (uint32_t t = item.t0; t < item.t1; ++t) {
                const size_t row = s.row + t;
                const uint32_t n_see = s.start + t + 1; // causal
                for (uint32_t h = item.kv_head * group; h < (item.kv_head + 1) * group; ++h) {
                    const float* q = q_.data() + row * qd + size_t(h) * hd;
                    for (uint32_t j = 0; j < n_see; ++j)
                        p[j] = dot(q, K.data() + size_t(j) * hd, hd) * scale;
                    softmax(p.data(), n_see);
                    float* out = attn_.data() + row * qd + size_t(h) * hd;
                    std::fill(out, out + hd, 0.0f);
                    for (uint32_t j = 0; j < n_see; ++j)
                        axpy(p[j], V.data() + size_t(j) * hd, out, hd);
                    const float* gate = gate_.data() + row * qd + size_t(h) * hd;
                    for (uint32_t d = 0; d < hd; ++d)
                        out[d] *= sigmoid(gate[d]);
                }
            }
        }
    });
    matmul(pool_, w.output, attn_.data(), R, mix_.data());
}

void ModelRunner::gdn(const LayerWeights& L, uint32_t gi, std::span<const RowSegment> segs, size_t R) {
    const GdnWeights& w = L.gdn;
    const uint32_t Hk = c_.linear_num_key_heads, Dk = c_.linear_key_head_dim;
    const uint32_t Hv = c_.linear_num_value_heads, Dv = c_.linear_value_head_dim;
    const uint32_t K = c_.linear_conv_kernel_dim;
    const size_t kd = c_.gdn_key_dim(), vd = c_.gdn_value_dim(), cd = c_.gdn_conv_dim();
    qkv_.resize(R * cd);
    z_.resize(R * vd);
    alpha_.resize(R * Hv);
    beta_.resize(R * Hv);
    conv_.resize(R * cd);
    o_.resize(R * vd);
    matmul(pool_, w.query, xn_.data(), R, qkv_.data(), cd);
    matmul(pool_, w.key, xn_.data(), R, qkv_.data() + kd, cd);
    matmul(pool_, w.value, xn_.data(), R, qkv_.data() + 2 * kd, cd);
    matmul(pool_, w.z, xn_.data(), R, z_.data());
    matmul(pool_, w.a_projection, xn_.data(), R, alpha_.data());
    matmul(pool_, w.b_projection, xn_.data(), R, beta_.data());

    // Causal depthwise conv + SiLU per lane, carrying the last K-1 input columns in the lane.
    const size_t hist_floats = size_t(K - 1) * cd;
    for (const RowSegment& s : segs) {
        float* hist = s.lane->conv.data() + gi * hist_floats;
        const float* in = qkv_.data() + s.row * cd;
        float* out = conv_.data() + s.row * cd;
        pool_.parallel_for(cd, [&](size_t c0, size_t c1) {
            auto column = [&](int64_t m, size_t ch) { // input column m of the segment, m < 0: history
                return m >= 0 ? in[size_t(m) * cd + ch] : hist[size_t(int64_t(K) - 1 + m) * cd + ch];
            };
            for (uint32_t i = 0; i < s.n; ++i)
                for (size_t ch = c0; ch < c1; ++ch) {
                    float acc = 0;
                    for (uint32_t j = 0; j < K; ++j)
                        acc += w.convolution[size_t(j) * cd + ch] * column(int64_t(i) - (K - 1) + j, ch);
                    out[size_t(i) * cd + ch] = silu(acc);
                }
            if (s.keep_snapshots) // the history as it stands after each window token but the last
                for (uint32_t i = 0; i + 1 < s.n; ++i) {
                    float* snap = s.lane->verify_conv.data() + i * conv_floats() + gi * hist_floats;
                    for (uint32_t m = 0; m + 1 < K; ++m)
                        for (size_t ch = c0; ch < c1; ++ch)
                            snap[size_t(m) * cd + ch] = column(int64_t(i) + 2 - K + m, ch);
                }
            std::vector<float> keep(K - 1);
            for (size_t ch = c0; ch < c1; ++ch) {
                for (uint32_t m = 0; m + 1 < K; ++m)
                    keep[m] = column(int64_t(s.n) - (K - 1) + m, ch);
                for (uint32_t m = 0; m + 1 < K; ++m)
                    hist[size_t(m) * cd + ch] = keep[m];
            }
        });
    }

    // Decay, beta, l2-normalised q/k.
    const float q_scale = 1.0f / std::sqrt(float(Dk));
    pool_.parallel_for(R, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r) {
            for (uint32_t h = 0; h < Hv; ++h) {
                float& a = alpha_[r * Hv + h];
                a = -std::exp(w.a_log[h]) * softplus(a + w.dt_bias[h]);
                beta_[r * Hv + h] = sigmoid(beta_[r * Hv + h]);
            }
            for (uint32_t h = 0; h < Hk; ++h) {
                float* q = conv_.data() + r * cd + size_t(h) * Dk;
                float* k = q + kd;
                l2_normalize(q, Dk);
                for (uint32_t d = 0; d < Dk; ++d)
                    q[d] *= q_scale;
                l2_normalize(k, Dk);
            }
        }
    });

    struct Item {
        const RowSegment* seg;
        uint32_t head;
    };
    std::vector<Item> items;
    for (const RowSegment& s : segs)
        for (uint32_t h = 0; h < Hv; ++h)
            items.push_back({&s, h});
    const size_t state_floats = size_t(Dk) * Dv;
    pool_.parallel_for(items.size(), [&](size_t i0, size_t i1) {
        for (size_t it = i0; it < i1; ++it) {
            const RowSegment& s = *items[it].seg;
            const uint32_t h = items[it].head, r = h / (Hv / Hk);
            GdnHeadSequence seq;
            seq.n_tokens = s.n;
            seq.dk = Dk;
            seq.dv = Dv;
            seq.q = conv_.data() + s.row * cd + size_t(r) * Dk;
            seq.k = seq.q + kd;
            seq.qk_stride = cd;
            seq.v = conv_.data() + s.row * cd + 2 * kd + size_t(h) * Dv;
            seq.v_stride = cd;
            seq.g = alpha_.data() + s.row * Hv + h;
            seq.beta = beta_.data() + s.row * Hv + h;
            seq.gb_stride = Hv;
            seq.o = o_.data() + s.row * vd + size_t(h) * Dv;
            seq.o_stride = vd;
            const size_t head_at = (size_t(gi) * Hv + h) * state_floats;
            float* S = s.lane->recurrent.data() + head_at;
            if (s.keep_snapshots) {
                // Token by token (the same arithmetic as one call), copying the state after each.
                for (uint32_t i = 0; i < s.n; ++i) {
                    GdnHeadSequence one = seq;
                    one.n_tokens = 1;
                    one.q += i * seq.qk_stride, one.k += i * seq.qk_stride, one.v += i * seq.v_stride;
                    one.g += i * seq.gb_stride, one.beta += i * seq.gb_stride, one.o += i * seq.o_stride;
                    gdn_recurrent(one, S);
                    if (i + 1 < s.n)
                        std::copy_n(S, state_floats,
                                    s.lane->verify_recurrent.data() + i * recurrent_floats() + head_at);
                }
            } else if (s.n == 1 || !options_.gdn_chunked) {
                gdn_recurrent(seq, S);
            } else {
                gdn_chunked(seq, S, kGdnChunk, kGdnChunk - s.start % kGdnChunk);
            }
        }
    });

    const float eps = c_.rms_norm_eps;
    pool_.parallel_for(R, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r)
            for (uint32_t h = 0; h < Hv; ++h) {
                float* o = o_.data() + r * vd + size_t(h) * Dv;
                gated_rms_norm(o, z_.data() + r * vd + size_t(h) * Dv, w.norm.data(), Dv, eps, o);
            }
    });
    matmul(pool_, w.output, o_.data(), R, mix_.data());
}

void ModelRunner::mlp(const MlpWeights& w, const float* x, size_t R, float* out) {
    const size_t I = w.gate.rows();
    mlp_gate_.resize(R * I);
    mlp_up_.resize(R * I);
    matmul(pool_, w.gate, x, R, mlp_gate_.data());
    matmul(pool_, w.up, x, R, mlp_up_.data());
    for (size_t i = 0; i < R * I; ++i)
        mlp_gate_[i] = silu(mlp_gate_[i]) * mlp_up_[i];
    matmul(pool_, w.down, mlp_gate_.data(), R, out);
}

void ModelRunner::ffn(const LayerWeights& L, size_t R) {
    const size_t H = hidden_size_;
    if (!c_.is_moe()) {
        mlp(L.mlp, xn_.data(), R, mix_.data());
        return;
    }
    const MoeWeights& m = L.moe;
    const uint32_t E = c_.num_experts, top_k = c_.num_experts_per_tok;
    router_.resize(R * E);
    matmul(pool_, m.router, xn_.data(), R, router_.data());
    if (route_hook_) {
        const bool head = w_.mtp && &L == &w_.mtp->layer;
        route_hook_(head ? c_.num_hidden_layers : uint32_t(&L - w_.layers.data()), R, router_.data());
    }
    // Routing: softmax over all experts, top-k (ties to the lower id), renormalised weights.
    std::vector<std::vector<std::pair<size_t, float>>> routed(E); // expert -> (row, weight)
    std::vector<uint32_t> order(E);
    for (size_t r = 0; r < R; ++r) {
        float* p = router_.data() + r * E;
        softmax(p, E);
        std::iota(order.begin(), order.end(), 0u);
        std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                          [&](uint32_t a, uint32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
        float sum = 0;
        for (uint32_t i = 0; i < top_k; ++i)
            sum += p[order[i]];
        for (uint32_t i = 0; i < top_k; ++i)
            routed[order[i]].push_back({r, p[order[i]] / sum});
    }
    std::fill(mix_.begin(), mix_.begin() + R * H, 0.0f);
    for (uint32_t e = 0; e < E; ++e) {
        const auto& rows = routed[e];
        if (rows.empty())
            continue;
        gathered_.resize(rows.size() * H);
        expert_out_.resize(rows.size() * H);
        for (size_t i = 0; i < rows.size(); ++i)
            std::copy_n(xn_.data() + rows[i].first * H, H, gathered_.data() + i * H);
        mlp(m.experts[e], gathered_.data(), rows.size(), expert_out_.data());
        for (size_t i = 0; i < rows.size(); ++i)
            axpy(rows[i].second, expert_out_.data() + i * H, mix_.data() + rows[i].first * H, H);
    }
    shared_out_.resize(R * H);
    score_.resize(R);
    mlp(m.shared, xn_.data(), R, shared_out_.data());
    matmul(pool_, m.shared_score, xn_.data(), R, score_.data());
    for (size_t r = 0; r < R; ++r)
        axpy(sigmoid(score_[r]), shared_out_.data() + r * H, mix_.data() + r * H, H);
}

} // namespace ninfer::core::cpu
