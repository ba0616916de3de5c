// ninfer tests - the runner's f32 decoding paths (embedding rows, f32-x GEMV, MoE expert GEMV) in
// every weight format, against the CPU codec's decoding (weights_util.h).
#include "ninfer/kernels/runner_ops.h"
#include "weights_util.h"

#include <algorithm>
#include <cstring>

using namespace ninfer;
using namespace ninfer::test;
using kernels::WeightFormat;

namespace {

const WeightFormat kFormats[] = {WeightFormat::Bf16,      WeightFormat::Fp8E4m3RowBf16, WeightFormat::Q4G64Fp16,
                                 WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16,      WeightFormat::Q8G32Fp16,
                                 WeightFormat::Nvfp4};

// Row dots of the decoded rows with f32 x, fp64, and the sum of |products| for the tolerance.
void ref_dot(const std::vector<double>& w, const float* x, double& dot, double& mag) {
    dot = mag = 0;
    for (size_t i = 0; i < w.size(); ++i) {
        dot += w[i] * x[i];
        mag += std::fabs(w[i] * x[i]);
    }
}

void check_format(WeightFormat f, int64_t n, int64_t k, uint64_t seed) {
    INFO("format " << int(f) << " n=" << n << " k=" << k);
    Rng rng(seed);
    const auto bytes = random_weight(f, n, k, seed);
    DeviceBuffer<uint8_t> w(bytes);
    const kernels::WeightView view{f, w.get(), n, k};

    // Embedding rows: the codec's values, element for element.
    const int T = 5;
    std::vector<int32_t> ids(T);
    for (auto& id : ids) id = rng.integer(0, int(n - 1));
    ids[0] = int32_t(n - 1);
    DeviceBuffer<int32_t> ids_d(ids);
    DeviceBuffer<float> emb(size_t(T) * k, 0xff);
    CUDA_OK(kernels::embed_rows(view, ids_d.get(), T, emb.get(), k, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto eg = emb.download();
    int bad = 0;
    for (int t = 0; t < T; ++t) {
        const auto row = decode_row(f, bytes, n, k, ids[t]);
        for (int64_t i = 0; i < k; ++i)
            if (!(std::fabs(eg[size_t(t * k + i)] - row[i]) <= 1e-6 * std::fabs(row[i])) && bad++ < 5)
                FAIL_CHECK("embedding token " << t << " col " << i << " got " << eg[size_t(t * k + i)] << " want " << row[i]);
    }
    CHECK(bad == 0);
    CHECK(emb.guards_intact());

    // f32-x GEMV over all rows, 3 tokens.
    std::vector<float> x(size_t(3) * k);
    for (auto& v : x) v = rng.uniform(-2.f, 2.f);
    DeviceBuffer<float> x_d(x), y(size_t(3) * n, 0xff);
    CUDA_OK(kernels::gemv_f32x(view, x_d.get(), k, 3, y.get(), true, n, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto yg = y.download();
    for (int64_t r = 0; r < n; ++r) {
        const auto row = decode_row(f, bytes, n, k, r);
        for (int t = 0; t < 3; ++t) {
            double dot, mag;
            ref_dot(row, x.data() + t * k, dot, mag);
            if (!(std::fabs(yg[size_t(t * n + r)] - dot) <= 1e-5 * mag + 1e-30) && bad++ < 5)
                FAIL_CHECK("gemv_f32x row " << r << " token " << t << " got " << yg[size_t(t * n + r)] << " want " << dot);
        }
    }
    CHECK(bad == 0);

    // MoE expert GEMV: the matrix as experts of 128 rows, 2 tokens x top-2, x per token.
    const int rows = 128, n_experts = int(n / rows), top_k = 2;
    std::vector<int32_t> chosen = {n_experts - 1, 0, rng.integer(0, n_experts - 1), rng.integer(0, n_experts - 1)};
    DeviceBuffer<int32_t> chosen_d(chosen);
    DeviceBuffer<float> ye(size_t(4) * rows, 0xff);
    kernels::MoeGemvArgs m;
    m.w = view;
    m.rows_per_expert = rows;
    m.ids = chosen_d.get();
    m.top_k = top_k;
    m.x = x_d.get();
    m.x_stride = k;
    m.y = ye.get();
    m.y_stride = rows;
    m.n_tokens = 2;
    CUDA_OK(kernels::moe_gemv(m, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto mg = ye.download();
    for (int slot = 0; slot < 4; ++slot)
        for (int r = 0; r < rows; ++r) {
            const auto row = decode_row(f, bytes, n, k, int64_t(chosen[slot]) * rows + r);
            double dot, mag;
            ref_dot(row, x.data() + (slot / top_k) * k, dot, mag);
            if (!(std::fabs(mg[size_t(slot * rows + r)] - dot) <= 1e-5 * mag + 1e-30) && bad++ < 5)
                FAIL_CHECK("moe_gemv slot " << slot << " row " << r << " got " << mg[size_t(slot * rows + r)] << " want " << dot);
        }
    CHECK(bad == 0);
}

} // namespace

TEST_CASE("runner decoders: embedding, f32-x and expert GEMV equal the CPU codec in every format", "[weight_decode]") {
    require_gpu();
    uint64_t seed = 500;
    for (WeightFormat f : kFormats) {
        check_format(f, 256, 192, seed++);  // k not a multiple of 128: padded groups
        check_format(f, 512, 1024, seed++);
        if (f != WeightFormat::Nvfp4) check_format(f, 384, 200, seed++); // k % 16 != 0: the scalar kernels
    }
}

namespace {

// gemv_f32x from 32 tokens and rows (gemv_f32x_tokens.cuh): against fp64 in every format, shapes
// with partial row and token tiles and k past a slab; a token's sums the same bits whatever other
// tokens share the call (each output one chain in column order); bf16 output = bf16(f32 output).
void check_many_tokens(WeightFormat f, int64_t n, int64_t k, int T, uint64_t seed) {
    INFO("format " << int(f) << " n=" << n << " k=" << k << " tokens=" << T);
    Rng rng(seed);
    const auto bytes = random_weight(f, n, k, seed);
    DeviceBuffer<uint8_t> w(bytes);
    const kernels::WeightView view{f, w.get(), n, k};
    const int64_t xs = k + 3; // an odd stride: the kernel reads x element by element
    std::vector<float> x(size_t(T) * xs);
    for (auto& v : x) v = rng.uniform(-2.f, 2.f);
    const int64_t ys = n + 5;
    DeviceBuffer<float> x_d(x), y(size_t(T) * ys, 0xff), y_part(size_t(T) * ys, 0xff);
    DeviceBuffer<__nv_bfloat16> yb(size_t(T) * ys, 0xff);
    CUDA_OK(kernels::gemv_f32x(view, x_d.get(), xs, T, y.get(), true, ys, nullptr));
    CUDA_OK(kernels::gemv_f32x(view, x_d.get(), xs, T, yb.get(), false, ys, nullptr));
    // Tokens [t1, T) alone (still >= 32 tokens: the same kernel).
    const int t1 = std::max(0, T - 32 - int(seed % 7));
    CUDA_OK(kernels::gemv_f32x(view, x_d.get() + int64_t(t1) * xs, xs, T - t1, y_part.get() + int64_t(t1) * ys, true,
                               ys, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto yg = y.download(), yp = y_part.download();
    const auto ybg = yb.download();
    int bad = 0;
    for (int64_t r = 0; r < n; ++r) {
        const auto row = decode_row(f, bytes, n, k, r);
        for (int t = 0; t < T; ++t) {
            const size_t at = size_t(t * ys + r);
            double dot, mag;
            ref_dot(row, x.data() + t * xs, dot, mag);
            if (!(std::fabs(yg[at] - dot) <= 1e-5 * mag + 1e-30) && bad++ < 5)
                FAIL_CHECK("row " << r << " token " << t << " got " << yg[at] << " want " << dot);
            if (__bfloat16_as_ushort(ybg[at]) != __bfloat16_as_ushort(__float2bfloat16(yg[at])) && bad++ < 5)
                FAIL_CHECK("bf16 output row " << r << " token " << t);
            if (t >= t1 && std::memcmp(&yg[at], &yp[at], 4) != 0 && bad++ < 5)
                FAIL_CHECK("token " << t << " row " << r << " differs when computed with fewer tokens");
        }
    }
    CHECK(bad == 0);
    CHECK(y.guards_intact());
    CHECK(y_part.guards_intact());
    CHECK(yb.guards_intact());
}

} // namespace

TEST_CASE("runner decoders: f32-x GEMV over many tokens (router, score, f32 mode) equals fp64 in every format",
          "[weight_decode]") {
    require_gpu();
    uint64_t seed = 900;
    for (WeightFormat f : kFormats) {
        check_many_tokens(f, 256, 2048, 300, seed++); // the 35B-A3B router's shape, a partial token tile
        const bool fp4 = f == WeightFormat::Nvfp4; // rows a multiple of 128 there
        check_many_tokens(f, fp4 ? 128 : 45, 192, 33, seed++); // partial row tile, k not a multiple of 128
        check_many_tokens(f, fp4 ? 128 : 32, 320, 129, seed++); // k past a 128-column slab, not a multiple of it
        if (!fp4) check_many_tokens(f, 40, 200, 64, seed++); // k % 16 != 0: the generic staging
    }
}
