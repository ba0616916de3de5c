// ninfer::core - the vision tower's CPU forward: patch embedding, position table, 2-D RoPE blocks, merger.
#include "core/vision/vision_tower.h"

#include "core/cpu/matmul.h"
#include "core/cpu/ops.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>

namespace ninfer::core {
namespace {

constexpr float kLayerNormEps = 1e-6f; // nn.LayerNorm(eps=1e-6) in every block and the merger

// torch.nn.LayerNorm: (x - mean) / sqrt(biased variance + eps) * w + b (moments summed in f64).
void layer_norm(const float* x, const float* w, const float* b, size_t n, float* out) {
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < n; ++i)
        sum += x[i];
    const double mean = sum / double(n);
    for (size_t i = 0; i < n; ++i)
        sum_sq += (x[i] - mean) * (x[i] - mean);
    const float r = float(1.0 / std::sqrt(sum_sq / double(n) + kLayerNormEps));
    const float m = float(mean);
    for (size_t i = 0; i < n; ++i)
        out[i] = (x[i] - m) * r * w[i] + b[i];
}

float gelu_tanh(float x) { // gelu_pytorch_tanh
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
    return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); } // nn.GELU()

// Bilinear taps on one axis of the learned grid, align_corners: source = index * (side-1)/(size-1).
void axis_taps(uint32_t index, uint32_t size, uint32_t side, uint32_t taps[2], float weights[2]) {
    const float src = float(index) * float(side - 1) / float(std::max<uint32_t>(size, 2) - 1);
    const float base = std::floor(src);
    for (uint32_t k = 0; k < 2; ++k) {
        taps[k] = std::min<uint32_t>(uint32_t(base) + k, side - 1);
        weights[k] = std::max(0.0f, 1.0f - std::fabs(src - base - float(k)));
    }
}

void add_bias(float* y, const std::vector<float>& bias, size_t rows) {
    const size_t n = bias.size();
    for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < n; ++i)
            y[r * n + i] += bias[i];
}

} // namespace

PatchCell patch_cell(size_t q, uint32_t grid_w, uint32_t merge) {
    const size_t blocks_w = grid_w / merge, unit = size_t(merge) * merge;
    const size_t block = q / unit, in_block = q % unit;
    return {uint32_t((block / blocks_w) * merge + in_block / merge),
            uint32_t((block % blocks_w) * merge + in_block % merge)};
}

void position_taps(const VisionConfig& c, PatchCell cell, uint32_t grid_h, uint32_t grid_w, uint32_t taps[4],
                   float weights[4]) {
    const uint32_t side = c.position_grid_side();
    uint32_t th[2], tw[2];
    float wh[2], ww[2];
    axis_taps(cell.row, grid_h, side, th, wh);
    axis_taps(cell.col, grid_w, side, tw, ww);
    for (uint32_t k = 0; k < 4; ++k) {
        taps[k] = th[k / 2] * side + tw[k % 2];
        weights[k] = wh[k / 2] * ww[k % 2];
    }
}

// Rotary: pairs [0, hd/4) turn by the row, [hd/4, hd/2) by the column, each with the head_dim/4
// frequencies theta^(-2j / (hd/2)) (transformers' axial vision rope).
void vision_rope_axis(const VisionConfig& c, uint32_t index, float* cs, float* sn) {
    cpu::rope_tables(index, c.head_dim() / 2, c.rope_theta, cs, sn);
}

void vision_rope_tables(const VisionConfig& c, PatchCell cell, float* cs, float* sn) {
    const uint32_t hd = c.head_dim();
    vision_rope_axis(c, cell.row, cs, sn);
    vision_rope_axis(c, cell.col, cs + hd / 4, sn + hd / 4);
}

VisionTower::VisionTower(const VisionWeights& weights, ThreadPool& pool) : w_(weights), pool_(pool) {
    const VisionConfig& c = w_.config;
    position_table_.resize(size_t(c.num_position_embeddings) * c.hidden_size);
    w_.position_embedding.decode(0, c.num_position_embeddings, position_table_.data());
}

uint64_t VisionTower::workspace_bytes(const VisionConfig& c, size_t rows) {
    // x, xn, q, k, v, attn [rows][hidden]; mlp [rows][max(intermediate, merged)]; rope [rows][head_dim].
    const uint64_t wide = std::max(c.intermediate_size, c.merged_dim());
    return uint64_t(rows) * (6ull * c.hidden_size + wide + c.head_dim()) * sizeof(float);
}

uint64_t VisionTower::host_bytes(const VisionConfig& c) {
    return workspace_bytes(c, kMaxBatchRows) + uint64_t(c.num_position_embeddings) * c.hidden_size * sizeof(float);
}

void VisionTower::check(const VisionInput& item) const { check_vision_input(w_.config, item); }

void check_vision_input(const VisionConfig& c, const VisionInput& item) {
    if (uint32_t(item.patch_size) != c.patch_size || uint32_t(item.temporal_patch_size) != c.temporal_patch_size ||
        uint32_t(item.merge_size) != c.spatial_merge_size)
        throw Error("vision: an item patchified with patch " + std::to_string(item.patch_size) + ", temporal " +
                    std::to_string(item.temporal_patch_size) + ", merge " + std::to_string(item.merge_size) +
                    "; the tower takes " + std::to_string(c.patch_size) + ", " +
                    std::to_string(c.temporal_patch_size) + ", " + std::to_string(c.spatial_merge_size));
    const int m = item.merge_size;
    if (item.grid_t <= 0 || item.grid_h <= 0 || item.grid_w <= 0 || item.grid_h % m || item.grid_w % m)
        throw Error("vision: grid " + std::to_string(item.grid_t) + "x" + std::to_string(item.grid_h) + "x" +
                    std::to_string(item.grid_w) + " is empty or not a multiple of the merge size " +
                    std::to_string(m));
    if (item.patches.size() != item.n_patches() * c.patch_dim())
        throw Error("vision: " + std::to_string(item.patches.size()) + " patch values for " +
                    std::to_string(item.n_patches()) + " patches of " + std::to_string(c.patch_dim()));
}

std::vector<float> VisionTower::encode(const VisionInput& item) {
    check(item);
    const VisionConfig& c = w_.config;
    const size_t frame = size_t(item.grid_h) * item.grid_w;
    const size_t frames_per_batch = std::max<size_t>(1, kMaxBatchRows / frame);
    std::vector<float> out(item.merged_tokens() * size_t(c.out_hidden_size));
    for (size_t t0 = 0; t0 < size_t(item.grid_t); t0 += frames_per_batch) {
        const size_t row0 = t0 * frame;
        const size_t n_rows = std::min(frames_per_batch, size_t(item.grid_t) - t0) * frame;
        embed(item, row0, n_rows);
        for (const VisionBlockWeights& b : w_.blocks)
            block(b, item, n_rows);
        merge(n_rows, out.data() + row0 / c.merge_unit() * c.out_hidden_size);
    }
    return out;
}

// Patch embedding plus the resampled position table; also the rows' rotary tables.
void VisionTower::embed(const VisionInput& item, size_t row0, size_t n_rows) {
    const VisionConfig& c = w_.config;
    const size_t D = c.hidden_size, hd = c.head_dim(), frame = size_t(item.grid_h) * item.grid_w;
    x_.resize(n_rows * D);
    cpu::matmul(pool_, w_.patch_embedding, item.patches.data() + row0 * c.patch_dim(), n_rows, x_.data());
    add_bias(x_.data(), w_.patch_embedding_bias, n_rows);
    rope_cos_.resize(n_rows * hd / 2);
    rope_sin_.resize(n_rows * hd / 2);
    pool_.parallel_for(n_rows, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r) {
            const PatchCell cell = patch_cell((row0 + r) % frame, uint32_t(item.grid_w), c.spatial_merge_size);
            uint32_t taps[4];
            float w[4];
            position_taps(c, cell, uint32_t(item.grid_h), uint32_t(item.grid_w), taps, w);
            float* x = x_.data() + r * D;
            const float* t00 = position_table_.data() + size_t(taps[0]) * D;
            const float* t01 = position_table_.data() + size_t(taps[1]) * D;
            const float* t10 = position_table_.data() + size_t(taps[2]) * D;
            const float* t11 = position_table_.data() + size_t(taps[3]) * D;
            for (size_t i = 0; i < D; ++i)
                x[i] += t00[i] * w[0] + t01[i] * w[1] + t10[i] * w[2] + t11[i] * w[3];
            vision_rope_tables(c, cell, rope_cos_.data() + r * hd / 2, rope_sin_.data() + r * hd / 2);
        }
    });
}

void VisionTower::block(const VisionBlockWeights& b, const VisionInput& item, size_t n_rows) {
    const VisionConfig& c = w_.config;
    const size_t D = c.hidden_size, I = c.intermediate_size;
    xn_.resize(n_rows * D);
    auto norm = [&](const std::vector<float>& w, const std::vector<float>& bias) {
        pool_.parallel_for(n_rows, [&](size_t r0, size_t r1) {
            for (size_t r = r0; r < r1; ++r)
                layer_norm(x_.data() + r * D, w.data(), bias.data(), D, xn_.data() + r * D);
        });
    };
    norm(b.norm1_weight, b.norm1_bias);
    q_.resize(n_rows * D);
    k_.resize(n_rows * D);
    v_.resize(n_rows * D);
    cpu::matmul(pool_, b.query, xn_.data(), n_rows, q_.data());
    cpu::matmul(pool_, b.key, xn_.data(), n_rows, k_.data());
    cpu::matmul(pool_, b.value, xn_.data(), n_rows, v_.data());
    add_bias(q_.data(), b.query_bias, n_rows);
    add_bias(k_.data(), b.key_bias, n_rows);
    add_bias(v_.data(), b.value_bias, n_rows);
    attention(item, n_rows);
    cpu::matmul(pool_, b.output, attn_.data(), n_rows, xn_.data());
    add_bias(xn_.data(), b.output_bias, n_rows);
    for (size_t i = 0; i < n_rows * D; ++i)
        x_[i] += xn_[i];

    norm(b.norm2_weight, b.norm2_bias);
    mlp_.resize(n_rows * I);
    cpu::matmul(pool_, b.fc1, xn_.data(), n_rows, mlp_.data());
    pool_.parallel_for(n_rows, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r)
            for (size_t i = 0; i < I; ++i)
                mlp_[r * I + i] = gelu_tanh(mlp_[r * I + i] + b.fc1_bias[i]);
    });
    cpu::matmul(pool_, b.fc2, mlp_.data(), n_rows, xn_.data());
    add_bias(xn_.data(), b.fc2_bias, n_rows);
    for (size_t i = 0; i < n_rows * D; ++i)
        x_[i] += xn_[i];
}

// Rotary on q and k, then softmax(q kᵀ / sqrt(hd)) v per head within each temporal patch.
void VisionTower::attention(const VisionInput& item, size_t n_rows) {
    const VisionConfig& c = w_.config;
    const size_t D = c.hidden_size, hd = c.head_dim(), H = c.num_heads;
    const size_t frame = size_t(item.grid_h) * item.grid_w;
    pool_.parallel_for(n_rows, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r)
            for (size_t h = 0; h < H; ++h) {
                const float* cs = rope_cos_.data() + r * hd / 2;
                const float* sn = rope_sin_.data() + r * hd / 2;
                cpu::rope_neox(q_.data() + r * D + h * hd, uint32_t(hd), cs, sn);
                cpu::rope_neox(k_.data() + r * D + h * hd, uint32_t(hd), cs, sn);
            }
    });
    attn_.resize(n_rows * D);
    constexpr size_t kQueryBlock = 32;
    struct Item {
        size_t seg_row, head, q0, q1; // rows relative to the batch
    };
    std::vector<Item> items;
    for (size_t s = 0; s < n_rows; s += frame) // batches hold whole temporal patches
        for (size_t h = 0; h < H; ++h)
            for (size_t q = 0; q < frame; q += kQueryBlock)
                items.push_back({s, h, q, std::min(frame, q + kQueryBlock)});
    const float scale = 1.0f / std::sqrt(float(hd));
    pool_.parallel_for(items.size(), [&](size_t i0, size_t i1) {
        std::vector<float> p(frame);
        for (size_t it = i0; it < i1; ++it) {
            const Item& job = items[it];
            const size_t off = job.head * hd;
            for (size_t q = job.q0; q < job.q1; ++q) {
                const float* qv = q_.data() + (job.seg_row + q) * D + off;
                for (size_t j = 0; j < frame; ++j)
                    p[j] = cpu::dot(qv, k_.data() + (job.seg_row + j) * D + off, hd) * scale;
                cpu::softmax(p.data(), frame);
                float* out = attn_.data() + (job.seg_row + q) * D + off;
                std::fill(out, out + hd, 0.0f);
                for (size_t j = 0; j < frame; ++j)
                    cpu::axpy(p[j], v_.data() + (job.seg_row + j) * D + off, out, hd);
            }
        }
    });
}

// LN per patch, groups of merge_unit consecutive rows -> fc1 -> exact GELU -> fc2.
void VisionTower::merge(size_t n_rows, float* out) {
    const VisionConfig& c = w_.config;
    const size_t D = c.hidden_size, M = c.merged_dim(), groups = n_rows / c.merge_unit();
    xn_.resize(n_rows * D);
    pool_.parallel_for(n_rows, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r)
            layer_norm(x_.data() + r * D, w_.merger_norm_weight.data(), w_.merger_norm_bias.data(), D,
                       xn_.data() + r * D);
    });
    mlp_.resize(groups * M);
    cpu::matmul(pool_, w_.merger_fc1, xn_.data(), groups, mlp_.data()); // [groups][4D] = consecutive rows
    for (size_t g = 0; g < groups; ++g)
        for (size_t i = 0; i < M; ++i)
            mlp_[g * M + i] = gelu_erf(mlp_[g * M + i] + w_.merger_fc1_bias[i]);
    cpu::matmul(pool_, w_.merger_fc2, mlp_.data(), groups, out);
    add_bias(out, w_.merger_fc2_bias, groups);
}

} // namespace ninfer::core
