// ninfer::core - the vision tower on the GPU: bf16 tensor-core GEMMs, f32 norms, residuals and attention.
#include "core/cuda/vision_tower_gpu.h"

#include "core/cpu/thread_pool.h"
#include "core/cuda/device_weights.h"
#include "core/cuda/phase_timer.h"
#include "core/cuda/vision_staging.h"
#include "core/util/error.h"
#include "core/vision/vision_batch_inputs.h"
#include "core/vision/vision_tower.h"
#include "ninfer/kernels/gemm.h"
#include "ninfer/kernels/vision.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace ninfer::core {

using cuda::cuda_check;

namespace {

constexpr float kLayerNormEps = 1e-6f; // as the CPU tower
// The largest rows per batch the encoder takes (its activations then take about 80 GB at the real
// shape: the allocation fails first; the bound keeps every row count an int).
constexpr size_t kMaxRowsLimit = size_t(1) << 20;
// Frame pairs of at least this many patches take the flash attention on the tensor cores (bf16 q,
// k, v and P; head sizes kernels::vision_flash_supported takes); smaller ones the f32 kernel, which
// costs next to nothing there.
constexpr int kFlashAttentionMin = 256;

bool flash_attention(int frame, uint32_t head_dim) {
    return frame >= kFlashAttentionMin && kernels::vision_flash_supported(int(head_dim));
}

uint64_t pad8(uint64_t v) { return (v + 7) / 8 * 8; }

// Every device buffer of the tower, in one list that the constructor (allocating) and
// cuda_vision_bytes (planning) both walk, for batches of `rows` patches.
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
    // One batch's activations (widths padded to 8).
    float *x = nullptr, *qkv_out = nullptr, *out = nullptr;
    __nv_bfloat16 *xn = nullptr, *attn = nullptr, *mlp16 = nullptr, *m116 = nullptr;
    // Two batches' inputs (the upload of one overlaps the other's blocks; vision_staging.h), and
    // the rotary tables of the batch in flight (those of in[its slot]).
    cuda::VisionDeviceInputs in[2];
    float *cos = nullptr, *sin = nullptr;
    // The flash attention's inputs: rotated q, k and v in bf16.
    __nv_bfloat16 *q16 = nullptr, *k16 = nullptr, *v16 = nullptr;

    template <class Visit> void visit(const VisionConfig& c, uint64_t rows, Visit&& v) {
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
        const uint64_t G = rows / c.merge_unit();
        for (cuda::VisionDeviceInputs& s : in) {
            v(s.patches, rows * P, "vision patches (bf16)");
            v(s.taps, rows * 4, "vision position taps");
            v(s.tap_w, rows * 4, "vision position tap weights");
            v(s.cos, rows * hd2, "vision rotary cos");
            v(s.sin, rows * hd2, "vision rotary sin");
        }
        v(x, rows * D, "vision residual");
        v(xn, rows * D, "vision normed rows");
        v(qkv_out, rows * 3 * D, "vision qkv rows");
        v(attn, rows * D, "vision attention rows");
        v(mlp16, rows * I, "vision MLP rows (bf16)");
        v(m116, G * M, "vision merger rows (bf16)");
        v(out, G * O, "vision output rows");
        v(q16, rows * D, "vision rotated queries");
        v(k16, rows * D, "vision rotated keys");
        v(v16, rows * D, "vision values (bf16)");
    }
};

void require_multiple_of_8(uint64_t v, const char* what) {
    if (v % 8)
        throw Error(std::string("cuda: the GPU vision tower needs ") + what + " to be a multiple of 8, not " +
                    std::to_string(v));
}

size_t checked_batch_rows(const VisionConfig& c, size_t rows) {
    if (rows < c.merge_unit() || rows > kMaxRowsLimit)
        throw Error("cuda: the GPU vision tower takes " + std::to_string(c.merge_unit()) + " to " +
                    std::to_string(kMaxRowsLimit) + " rows per batch, not " + std::to_string(rows));
    return rows;
}

class CudaVisionEncoder final : public VisionEncoder, private TowerBuffers {
  public:
    CudaVisionEncoder(const VisionWeights& w, int32_t image, int32_t video, size_t rows)
        : w_(w), c_(w.config), rows_(checked_batch_rows(c_, rows)), staging_(c_, rows_) {
        image_token_id = image;
        video_token_id = video;
        require_multiple_of_8(c_.patch_dim(), "the patch values (C*T*P*P)");
        require_multiple_of_8(c_.hidden_size, "the hidden size");
        require_multiple_of_8(c_.intermediate_size, "the intermediate size");
        visit(c_, rows_, [&](auto*& p, uint64_t count, const char* name) {
            using T = std::remove_reference_t<decltype(*p)>;
            p = arena_.alloc_n<T>(count, name);
            cuda_check(cudaMemset(p, 0, count * sizeof(T)), "clearing the vision tower");
        });
        cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the vision stream");
        upload();
    }
    ~CudaVisionEncoder() override {
        if (stream_) {
            cudaStreamSynchronize(stream_); // its work reads the staged inputs
            cudaStreamDestroy(stream_);
        }
    }

    uint32_t out_hidden() const override { return c_.out_hidden_size; }

    std::vector<float> encode(const VisionInput& item) override {
        const VisionInput* one = &item;
        return std::move(encode_batch(std::span(&one, 1))[0]);
    }

    // Items' frame pairs packed in order into batches of at most rows_ patches: the row-wise work
    // (GEMMs, norms) runs over a whole batch, attention per frame pair. Pipelined over two slots
    // (vision_staging.h): batch b+1's inputs are built and uploaded, and batch b-1's rows taken,
    // while the device runs batch b.
    std::vector<std::vector<float>> encode_batch(std::span<const VisionInput* const> items) override {
        for (const VisionInput* item : items)
            check_vision_input(c_, *item);
        const std::vector<std::vector<Piece>> batches = pack_vision_batches(items, rows_);
        std::vector<std::vector<float>> out(items.size());
        for (size_t i = 0; i < items.size(); ++i)
            out[i].reserve(items[i]->merged_tokens() * c_.out_hidden_size); // pages touched batch by batch
        for (size_t b = 0; b < batches.size(); ++b) {
            const int slot = int(b % 2);
            fill_vision_batch(c_, batches[b], items, staging_.inputs(slot), &host_pool_);
            staging_.upload(slot, in[slot], vision_batch_rows(batches[b]));
            run_batch(batches[b], slot);
            grow_rows(batches[b], out);
            if (b > 0)
                take_rows(batches[b - 1], int((b - 1) % 2), out);
        }
        if (!batches.empty())
            take_rows(batches.back(), int((batches.size() - 1) % 2), out);
        cuda_check(cudaStreamSynchronize(stream_), "vision tower"); // the one whole-stream wait
        return out;
    }

  private:
    using Piece = VisionBatchPiece;

    void run_batch(const std::vector<Piece>& batch, int slot) {
        const int n = int(vision_batch_rows(batch));
        mark(0);
        embed(slot, n);
        mark(kEmbed);
        for (const Block& b : blocks)
            block(b, batch, n);
        staging_.reuse_output(stream_); // the previous batch's rows have left `out`
        merge(n);
        staging_.release(stream_, slot);
        staging_.download(stream_, slot, out, pad8(c_.out_hidden_size), size_t(n) / c_.merge_unit());
        mark(kMerge);
        profile_report(n);
    }

    // The batch's output rows allocated (their pages touched) while the device runs it: each
    // item's pieces arrive in order, into capacity reserved up front.
    void grow_rows(const std::vector<Piece>& batch, std::vector<std::vector<float>>& out) const {
        const size_t unit = c_.merge_unit(), O = c_.out_hidden_size;
        for (const Piece& pc : batch)
            out[pc.item].resize((pc.t0 + pc.nt) * pc.frame / unit * O);
    }

    // A finished batch's rows from its pinned output slot to each piece's item, over the host
    // threads in whole merge groups.
    void take_rows(const std::vector<Piece>& batch, int slot, std::vector<std::vector<float>>& out) {
        const size_t unit = c_.merge_unit(), O = c_.out_hidden_size;
        const float* rows = staging_.rows(slot);
        host_pool_.parallel_for(vision_batch_rows(batch) / unit, [&](size_t g0, size_t g1) {
            for_batch_rows(batch, g0 * unit, g1 * unit, [&](const Piece& pc, size_t k0, size_t k1) {
                std::copy(rows + (pc.row + k0) / unit * O, rows + (pc.row + k1) / unit * O,
                          out[pc.item].data() + (pc.t0 * pc.frame + k0) / unit * O);
            });
        });
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

    // Patch embedding + the resampled position table, from the batch's uploaded inputs (bf16
    // patches: the host rounded them as vision_to_bf16 would; vision_batch_inputs.h).
    void embed(int slot, int n) {
        const int64_t P = int64_t(c_.patch_dim()), D = c_.hidden_size;
        const cuda::VisionDeviceInputs& s = in[slot];
        staging_.acquire(stream_, slot);
        cos = s.cos; // the rotary tables attention() reads in every block
        sin = s.sin;
        gemm(s.patches, P, patch_w, P, n, int(D), int(P), x, D, {.bias = patch_b}); // bias in the epilogue
        cuda_check(kernels::vision_position_add(x, D, positions, s.taps, s.tap_w, n, int(D), stream_), "vision positions");
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

    // LN per patch, merge_unit consecutive rows side by side -> fc1 -> erf GELU -> fc2 + bias into
    // `out` (run_batch downloads it; a frame pair's patches are whole merge groups).
    void merge(int n) {
        const int D = int(c_.hidden_size), M = int(c_.merged_dim()), M8 = int(pad8(M)), O = int(c_.out_hidden_size),
                  O8 = int(pad8(O)), unit = int(c_.merge_unit()), G = n / unit;
        cuda_check(kernels::vision_layer_norm(x, D, merger_norm_w, merger_norm_b, n, D, kLayerNormEps, xn, D, stream_),
                   "merger norm");
        // xn rows are contiguous: [G][merge_unit * D]; bias and GELU in the GEMMs' epilogues.
        gemm(xn, M, merger_fc1, M8, G, M, M, m116, M8, {.bias = merger_fc1_b, .act = kernels::GemmAct::GeluErf});
        gemm(m116, M8, merger_fc2, M8, G, O, M, out, O8, {.bias = merger_fc2_b});
    }

    const VisionWeights& w_;
    VisionConfig c_;
    size_t rows_; // per batch
    cuda::DeviceArena arena_;
    cuda::VisionStaging staging_;
    // The host's share of a batch (rounding the patches, copying the rows out) on a few threads:
    // a single batch (an image) waits for it.
    ThreadPool host_pool_{std::min(4u, std::max(1u, std::thread::hardware_concurrency()))};
    cudaStream_t stream_ = nullptr;
};

} // namespace

std::unique_ptr<VisionEncoder> make_cuda_vision_encoder(const VisionWeights& weights, int32_t image_token_id,
                                                        int32_t video_token_id, size_t batch_rows) {
    return std::make_unique<CudaVisionEncoder>(weights, image_token_id, video_token_id, batch_rows);
}

uint64_t cuda_vision_bytes(const VisionConfig& config, size_t batch_rows) {
    uint64_t total = 0;
    TowerBuffers plan;
    plan.visit(config, checked_batch_rows(config, batch_rows), [&](auto*& p, uint64_t count, const char*) {
        total += (std::max<uint64_t>(count * sizeof(*p), 256) + 255) / 256 * 256;
    });
    return total;
}

uint64_t cuda_vision_pinned_bytes(const VisionConfig& config, size_t batch_rows) {
    return cuda::VisionStaging::pinned_bytes(config, checked_batch_rows(config, batch_rows));
}

} // namespace ninfer::core
