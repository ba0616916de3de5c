// ninfer::core - the vision tower on the GPU: bf16 tensor-core GEMMs, f32 norms, residuals and attention.
#include "core/cuda/vision_tower_gpu.h"

#include "core/cuda/device_weights.h"
#include "core/cuda/phase_timer.h"
#include "core/util/error.h"
#include "core/vision/vision_tower.h"
#include "ninfer/kernels/gemm.h"
#include "ninfer/kernels/vision.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace ninfer::core {

using cuda::cuda_check;

namespace {

constexpr float kLayerNormEps = 1e-6f; // as the CPU tower
constexpr uint64_t kRows = VisionTower::kMaxBatchRows;
// Frame pairs of at least this many patches take the flash attention on the tensor cores (bf16 q,
// k, v and P; head sizes kernels::vision_flash_supported takes); smaller ones the f32 kernel, which
// costs next to nothing there.
constexpr int kFlashAttentionMin = 256;

bool flash_attention(int frame, uint32_t head_dim) {
    return frame >= kFlashAttentionMin && kernels::vision_flash_supported(int(head_dim));
}

uint64_t pad8(uint64_t v) { return (v + 7) / 8 * 8; }

// Every device buffer of the tower, in one list that the constructor (allocating) and
// cuda_vision_bytes (planning) both walk.
struct TowerBuffers {
    struct Block {
        __nv_bfloat16 *qkv = nullptr, *proj = nullptr, *fc1 = nullptr, *fc2 = nullptr;
        float *qkv_bias = nullptr, *proj_bias = nullptr, *fc1_bias = nullptr, *fc2_bias = nullptr;
        float *norm1_w = nullptr, *norm1_b = nullptr, *norm2_w = nullptr, *norm2_b = nullptr;
    };
    __nv_bfloat16* patch_w = nullptr;
    float *patch_b = nullptr, *positions = nullptr;
    std::vector<Block> blocks;
    float *merger_norm_w = nullptr, *merger_norm_b = nullptr, *merger_fc1_b = nullptr, *merger_fc2_b = nullptr;
    __nv_bfloat16 *merger_fc1 = nullptr, *merger_fc2 = nullptr;
    // One batch's activations (rows = kRows; widths padded to 8).
    float *patches = nullptr, *x = nullptr, *qkv_out = nullptr, *out = nullptr, *cos = nullptr, *sin = nullptr,
          *tap_w = nullptr;
    int32_t* taps = nullptr;
    __nv_bfloat16 *patches16 = nullptr, *xn = nullptr, *attn = nullptr, *mlp16 = nullptr, *m116 = nullptr;
    // The flash attention's inputs: rotated q, k and v in bf16.
    __nv_bfloat16 *q16 = nullptr, *k16 = nullptr, *v16 = nullptr;

    template <class Visit> void visit(const VisionConfig& c, Visit&& v) {
        const uint64_t D = c.hidden_size, P = pad8(c.patch_dim()), I = pad8(c.intermediate_size),
                       M = pad8(c.merged_dim()), O = pad8(c.out_hidden_size), hd2 = c.head_dim() / 2;
        v(patch_w, D * P, "vision patch embedding");
        v(patch_b, D, "vision patch bias");
        v(positions, uint64_t(c.num_position_embeddings) * D, "vision position table");
        blocks.resize(c.depth);
        for (Block& b : blocks) {
            v(b.qkv, 3 * D * D, "vision qkv");
            v(b.proj, D * D, "vision proj");
            v(b.fc1, uint64_t(c.intermediate_size) * D, "vision fc1");
            v(b.fc2, D * I, "vision fc2");
            v(b.qkv_bias, 3 * D, "vision qkv bias");
            v(b.proj_bias, D, "vision proj bias");
            v(b.fc1_bias, I, "vision fc1 bias");
            v(b.fc2_bias, D, "vision fc2 bias");
            v(b.norm1_w, D, "vision norm");
            v(b.norm1_b, D, "vision norm");
            v(b.norm2_w, D, "vision norm");
            v(b.norm2_b, D, "vision norm");
        }
        v(merger_norm_w, D, "vision merger norm");
        v(merger_norm_b, D, "vision merger norm");
        v(merger_fc1, uint64_t(c.merged_dim()) * M, "vision merger fc1");
        v(merger_fc1_b, M, "vision merger fc1 bias");
        v(merger_fc2, uint64_t(c.out_hidden_size) * M, "vision merger fc2");
        v(merger_fc2_b, O, "vision merger fc2 bias");
        const uint64_t G = kRows / c.merge_unit();
        v(patches, kRows * P, "vision patches");
        v(patches16, kRows * P, "vision patches (bf16)");
        v(x, kRows * D, "vision residual");
        v(xn, kRows * D, "vision normed rows");
        v(qkv_out, kRows * 3 * D, "vision qkv rows");
        v(attn, kRows * D, "vision attention rows");
        v(mlp16, kRows * I, "vision MLP rows (bf16)");
        v(m116, G * M, "vision merger rows (bf16)");
        v(out, G * O, "vision output rows");
        v(cos, kRows * hd2, "vision rotary cos");
        v(sin, kRows * hd2, "vision rotary sin");
        v(taps, kRows * 4, "vision position taps");
        v(tap_w, kRows * 4, "vision position tap weights");
        v(q16, kRows * D, "vision rotated queries");
        v(k16, kRows * D, "vision rotated keys");
        v(v16, kRows * D, "vision values (bf16)");
    }
};

void require_multiple_of_8(uint64_t v, const char* what) {
    if (v % 8)
        throw Error(std::string("cuda: the GPU vision tower needs ") + what + " to be a multiple of 8, not " +
                    std::to_string(v));
}

class CudaVisionEncoder final : public VisionEncoder, private TowerBuffers {
  public:
    CudaVisionEncoder(const VisionWeights& w, int32_t image, int32_t video) : w_(w), c_(w.config) {
        image_token_id = image;
        video_token_id = video;
        require_multiple_of_8(c_.patch_dim(), "the patch values (C*T*P*P)");
        require_multiple_of_8(c_.hidden_size, "the hidden size");
        require_multiple_of_8(c_.intermediate_size, "the intermediate size");
        visit(c_, [&](auto*& p, uint64_t count, const char* name) {
            using T = std::remove_reference_t<decltype(*p)>;
            p = arena_.alloc_n<T>(count, name);
            cuda_check(cudaMemset(p, 0, count * sizeof(T)), "clearing the vision tower");
        });
        cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the vision stream");
        upload();
    }
    ~CudaVisionEncoder() override {
        if (stream_) cudaStreamDestroy(stream_);
    }

    uint32_t out_hidden() const override { return c_.out_hidden_size; }

    std::vector<float> encode(const VisionInput& item) override {
        const VisionInput* one = &item;
        return std::move(encode_batch(std::span(&one, 1))[0]);
    }

    // Items' frame pairs packed in order into batches of at most kRows patches: the row-wise work
    // (GEMMs, norms) runs over a whole batch, attention per frame pair.
    std::vector<std::vector<float>> encode_batch(std::span<const VisionInput* const> items) override {
        for (const VisionInput* item : items) {
            check_vision_input(c_, *item);
            const size_t frame = size_t(item->grid_h) * item->grid_w;
            if (frame > kRows)
                throw Error("vision: a frame of " + std::to_string(frame) + " patches; the GPU tower takes at most " +
                            std::to_string(kRows));
        }
        std::vector<std::vector<float>> out(items.size());
        for (size_t i = 0; i < items.size(); ++i)
            out[i].resize(items[i]->merged_tokens() * c_.out_hidden_size);
        std::vector<Piece> batch;
        size_t used = 0;
        for (size_t i = 0; i < items.size(); ++i) {
            const size_t frame = size_t(items[i]->grid_h) * items[i]->grid_w;
            for (size_t t0 = 0; t0 < size_t(items[i]->grid_t);) {
                if (used + frame > kRows) {
                    run_batch(batch, items, out);
                    batch.clear();
                    used = 0;
                }
                const size_t nt = std::min(size_t(items[i]->grid_t) - t0, (kRows - used) / frame);
                batch.push_back({i, t0, nt, frame, used});
                used += nt * frame;
                t0 += nt;
            }
        }
        if (!batch.empty())
            run_batch(batch, items, out);
        return out;
    }

  private:
    // Frame pairs [t0, t0 + nt) of item `item` at rows [row, row + nt * frame) of a batch.
    struct Piece {
        size_t item, t0, nt, frame, row;
    };

    void run_batch(const std::vector<Piece>& batch, std::span<const VisionInput* const> items,
                   std::vector<std::vector<float>>& out) {
        const Piece& last = batch.back();
        const int n = int(last.row + last.nt * last.frame);
        mark(0);
        embed(batch, items, n);
        mark(kEmbed);
        for (const Block& b : blocks)
            block(b, batch, n);
        merge(batch, n, out);
        mark(kMerge);
        profile_report(n);
    }

    // NINFER_VISION_PROFILE=1: each batch's device time per phase, summed over the blocks, on
    // stderr (phase_timer.h; a development aid, off in serving).
    enum Phase { kEmbed = 1, kQkv, kAttention, kProj, kFc1, kFc2, kMerge };
    cuda::PhaseTimer timer_{{"", "embed", "norm1+qkv", "attention", "proj", "norm2+fc1", "fc2", "merge"},
                            std::getenv("NINFER_VISION_PROFILE") != nullptr};
    void mark(int phase) { phase == 0 ? timer_.start(stream_) : timer_.end(stream_, phase); }
    void profile_report(int n) { timer_.report("vision profile: " + std::to_string(n) + " patches"); }

    template <class T> void put(T* dst, const std::vector<T>& src) {
        cuda_check(cudaMemcpy(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice), "uploading the tower");
    }
    // Rows [row0, row0 + m.rows()) of a device bf16 matrix of row stride ld from a stored Matrix.
    void put_matrix(__nv_bfloat16* dst, uint64_t ld, uint64_t row0, const Matrix& m) {
        std::vector<float> f(m.cols());
        std::vector<__nv_bfloat16> h(m.rows() * ld, __float2bfloat16(0.0f));
        for (uint64_t r = 0; r < m.rows(); ++r) {
            m.decode(r, 1, f.data());
            for (uint64_t k = 0; k < m.cols(); ++k)
                h[r * ld + k] = __float2bfloat16(f[k]);
        }
        put(dst + row0 * ld, h);
    }
    void upload() {
        const uint64_t D = c_.hidden_size, I = pad8(c_.intermediate_size), M = pad8(c_.merged_dim());
        put_matrix(patch_w, pad8(c_.patch_dim()), 0, w_.patch_embedding);
        put(patch_b, w_.patch_embedding_bias);
        std::vector<float> table(size_t(c_.num_position_embeddings) * D);
        w_.position_embedding.decode(0, c_.num_position_embeddings, table.data());
        put(positions, table);
        for (size_t i = 0; i < blocks.size(); ++i) {
            const VisionBlockWeights& s = w_.blocks[i];
            const Block& b = blocks[i];
            put_matrix(b.qkv, D, 0, s.query);
            put_matrix(b.qkv, D, D, s.key);
            put_matrix(b.qkv, D, 2 * D, s.value);
            put_matrix(b.proj, D, 0, s.output);
            put_matrix(b.fc1, D, 0, s.fc1);
            put_matrix(b.fc2, I, 0, s.fc2);
            std::vector<float> qkv_bias(s.query_bias);
            qkv_bias.insert(qkv_bias.end(), s.key_bias.begin(), s.key_bias.end());
            qkv_bias.insert(qkv_bias.end(), s.value_bias.begin(), s.value_bias.end());
            put(b.qkv_bias, qkv_bias);
            put(b.proj_bias, s.output_bias);
            put(b.fc1_bias, s.fc1_bias);
            put(b.fc2_bias, s.fc2_bias);
            put(b.norm1_w, s.norm1_weight);
            put(b.norm1_b, s.norm1_bias);
            put(b.norm2_w, s.norm2_weight);
            put(b.norm2_b, s.norm2_bias);
        }
        put(merger_norm_w, w_.merger_norm_weight);
        put(merger_norm_b, w_.merger_norm_bias);
        put_matrix(merger_fc1, M, 0, w_.merger_fc1);
        put(merger_fc1_b, w_.merger_fc1_bias);
        put_matrix(merger_fc2, M, 0, w_.merger_fc2);
        put(merger_fc2_b, w_.merger_fc2_bias);
    }

    // What the GEMM does with its fp32 sums before they leave (gemm.h's epilogue): + bias[col], then
    // act; with accumulate (f32 y) y += sum + bias, the residual add.
    struct Epilogue {
        const float* bias = nullptr;
        kernels::GemmAct act = kernels::GemmAct::None;
        bool accumulate = false;
    };
    // y[m][n] = epilogue(a[m][k] . w[n][k]ᵀ), y f32 or bf16.
    template <class Out>
    void gemm(const __nv_bfloat16* a, int64_t lda, const __nv_bfloat16* w, int64_t ldw, int m, int n, int k, Out* y,
              int64_t ldy, const Epilogue& e = {}) {
        static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, __nv_bfloat16>);
        const kernels::GemmArgs g{.a = a, .lda = lda, .b = w, .ldb = ldw, .c = y, .ldc = ldy,
                                  .c_fp32 = std::is_same_v<Out, float>, .m = m, .n = n, .k = k, .bias = e.bias,
                                  .act = e.act, .accumulate = e.accumulate};
        cuda_check(kernels::gemm_bf16(g, stream_), "vision GEMM");
    }

    // Patch embedding + the resampled position table; the rows' rotary tables.
    void embed(const std::vector<Piece>& batch, std::span<const VisionInput* const> items, int n) {
        const int64_t P = int64_t(c_.patch_dim()), D = c_.hidden_size;
        const size_t hd2 = c_.head_dim() / 2;
        std::vector<int32_t> taps_h(size_t(n) * 4);
        std::vector<float> w_h(size_t(n) * 4), cos_h(size_t(n) * hd2), sin_h(size_t(n) * hd2);
        for (const Piece& pc : batch) {
            const VisionInput& item = *items[pc.item];
            const size_t rows = pc.nt * pc.frame;
            cuda_check(cudaMemcpyAsync(patches + pc.row * P, item.patches.data() + pc.t0 * pc.frame * P,
                                       rows * P * sizeof(float), cudaMemcpyHostToDevice, stream_), "vision patches");
            // The tables depend on the patch's cell only: computed for the piece's first frame pair,
            // then copied to the others (a 30 s clip's 30 frame pairs share one frame's 1560); the
            // rotary halves per row and column index (grid_h + grid_w evaluations of 18 cos and
            // sin, not one per patch: per patch, 4096 patches took 1.8 ms of host time on the 2-core build
            // machine, the same loop timed alone, session 20).
            const size_t hd4 = hd2 / 2, axis = size_t(std::max(item.grid_h, item.grid_w));
            std::vector<float> axis_cos(axis * hd4), axis_sin(axis * hd4);
            for (size_t i = 0; i < axis; ++i)
                vision_rope_axis(c_, uint32_t(i), &axis_cos[i * hd4], &axis_sin[i * hd4]);
            for (size_t q = 0; q < pc.frame; ++q) {
                const size_t r = pc.row + q;
                const PatchCell cell = patch_cell(q, uint32_t(item.grid_w), c_.spatial_merge_size);
                uint32_t t[4];
                position_taps(c_, cell, uint32_t(item.grid_h), uint32_t(item.grid_w), t, &w_h[4 * r]);
                std::copy(t, t + 4, &taps_h[4 * r]);
                for (const auto& [index, half] : {std::pair{size_t(cell.row), size_t(0)}, std::pair{size_t(cell.col), hd4}}) {
                    std::copy_n(&axis_cos[index * hd4], hd4, &cos_h[r * hd2 + half]);
                    std::copy_n(&axis_sin[index * hd4], hd4, &sin_h[r * hd2 + half]);
                }
            }
            const auto replicate = [&](auto& table, size_t width) {
                const auto first = table.begin() + long(pc.row * width);
                for (size_t f = 1; f < pc.nt; ++f)
                    std::copy(first, first + long(pc.frame * width), first + long(f * pc.frame * width));
            };
            replicate(taps_h, 4);
            replicate(w_h, 4);
            replicate(cos_h, hd2);
            replicate(sin_h, hd2);
        }
        cuda_check(kernels::vision_to_bf16(patches, int64_t(n) * P, patches16, stream_), "vision patches");
        gemm(patches16, P, patch_w, P, n, int(D), int(P), x, D);
        cuda_check(cudaMemcpyAsync(taps, taps_h.data(), taps_h.size() * 4, cudaMemcpyHostToDevice, stream_), "taps");
        cuda_check(cudaMemcpyAsync(tap_w, w_h.data(), w_h.size() * 4, cudaMemcpyHostToDevice, stream_), "taps");
        cuda_check(cudaMemcpyAsync(cos, cos_h.data(), cos_h.size() * 4, cudaMemcpyHostToDevice, stream_), "rotary");
        cuda_check(cudaMemcpyAsync(sin, sin_h.data(), sin_h.size() * 4, cudaMemcpyHostToDevice, stream_), "rotary");
        cuda_check(kernels::vision_bias_act(x, D, patch_b, n, int(D), kernels::VisionAct::None, nullptr, 0, stream_),
                   "vision patch bias");
        cuda_check(kernels::vision_position_add(x, D, positions, taps, tap_w, n, int(D), stream_), "vision positions");
    }

    void block(const Block& b, const std::vector<Piece>& batch, int n) {
        const int D = int(c_.hidden_size), I = int(c_.intermediate_size), I8 = int(pad8(I));
        cuda_check(kernels::vision_layer_norm(x, D, b.norm1_w, b.norm1_b, n, D, kLayerNormEps, xn, D, stream_), "norm1");
        // Biases, GELU and the residual adds run in the GEMMs' epilogues (bit-equal to the GEMM then
        // vision_bias_act / vision_residual, gemm.h), so no f32 projection or MLP rows round-trip memory.
        gemm(xn, D, b.qkv, D, n, 3 * D, D, qkv_out, 3 * D, {.bias = b.qkv_bias});
        mark(kQkv);
        attention(batch, n);
        mark(kAttention);
        gemm(attn, D, b.proj, D, n, D, D, x, D, {.bias = b.proj_bias, .accumulate = true});
        mark(kProj);
        cuda_check(kernels::vision_layer_norm(x, D, b.norm2_w, b.norm2_b, n, D, kLayerNormEps, xn, D, stream_), "norm2");
        gemm(xn, D, b.fc1, D, n, I, D, mlp16, I8, {.bias = b.fc1_bias, .act = kernels::GemmAct::GeluTanh});
        mark(kFc1);
        gemm(mlp16, I8, b.fc2, I8, n, D, I, x, D, {.bias = b.fc2_bias, .accumulate = true});
        mark(kFc2);
    }

    // Per piece (its frame pairs are segments of one size): large frame pairs through the flash
    // kernel, small ones through the f32 kernel.
    void attention(const std::vector<Piece>& batch, int n) {
        const int D = int(c_.hidden_size), hd = int(c_.head_dim()), H = int(c_.num_heads);
        bool rotated = false;
        for (const Piece& pc : batch) {
            const int frame = int(pc.frame), rows = int(pc.nt * pc.frame);
            const int64_t row = int64_t(pc.row);
            if (!flash_attention(frame, c_.head_dim())) {
                cuda_check(kernels::vision_attention(qkv_out + row * 3 * D, 3 * D, cos + row * hd / 2,
                                                     sin + row * hd / 2, rows, frame, H, hd, attn + row * D, D,
                                                     stream_), "vision attention");
                continue;
            }
            if (!rotated) // the whole batch once: q, k rotated to bf16, v to bf16
                cuda_check(kernels::vision_rotate_qkv(qkv_out, 3 * D, cos, sin, n, H, hd, q16, k16, v16, D, stream_),
                           "vision rotary");
            rotated = true;
            cuda_check(kernels::vision_flash_attention(q16 + row * D, k16 + row * D, v16 + row * D, D, rows, frame, H,
                                                       hd, attn + row * D, D, stream_), "vision attention");
        }
    }

    // LN per patch, merge_unit consecutive rows side by side -> fc1 -> erf GELU -> fc2 + bias; each
    // piece's rows to its item's output (a frame pair's patches are whole merge groups).
    void merge(const std::vector<Piece>& batch, int n, std::vector<std::vector<float>>& host_out) {
        const int D = int(c_.hidden_size), M = int(c_.merged_dim()), M8 = int(pad8(M)), O = int(c_.out_hidden_size),
                  O8 = int(pad8(O)), unit = int(c_.merge_unit()), G = n / unit;
        cuda_check(kernels::vision_layer_norm(x, D, merger_norm_w, merger_norm_b, n, D, kLayerNormEps, xn, D, stream_),
                   "merger norm");
        // xn rows are contiguous: [G][merge_unit * D]; bias and GELU in the GEMMs' epilogues.
        gemm(xn, M, merger_fc1, M8, G, M, M, m116, M8, {.bias = merger_fc1_b, .act = kernels::GemmAct::GeluErf});
        gemm(m116, M8, merger_fc2, M8, G, O, M, out, O8, {.bias = merger_fc2_b});
        for (const Piece& pc : batch)
            cuda_check(cudaMemcpy2DAsync(host_out[pc.item].data() + pc.t0 * pc.frame / unit * O, size_t(O) * 4,
                                         out + int64_t(pc.row / unit) * O8, size_t(O8) * 4, size_t(O) * 4,
                                         pc.nt * pc.frame / unit, cudaMemcpyDeviceToHost, stream_), "vision rows");
        cuda_check(cudaStreamSynchronize(stream_), "vision rows"); // the outputs are pageable
    }

    const VisionWeights& w_;
    VisionConfig c_;
    cuda::DeviceArena arena_;
    cudaStream_t stream_ = nullptr;
};

} // namespace

std::unique_ptr<VisionEncoder> make_cuda_vision_encoder(const VisionWeights& weights, int32_t image_token_id,
                                                        int32_t video_token_id) {
    return std::make_unique<CudaVisionEncoder>(weights, image_token_id, video_token_id);
}

uint64_t cuda_vision_bytes(const VisionConfig& config) {
    uint64_t total = 0;
    TowerBuffers plan;
    plan.visit(config, [&](auto*& p, uint64_t count, const char*) {
        total += (std::max<uint64_t>(count * sizeof(*p), 256) + 255) / 256 * 256;
    });
    return total;
}

} // namespace ninfer::core
