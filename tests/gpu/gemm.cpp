// ninfer tests - prefill GEMM (plain and grouped, both tile widths) against an fp64 reference, and
// weight dequantisation to bf16 bit-exact against the CPU codec for every gemv format and layout.
#include "core/formats/codec.h"
#include "ninfer/kernels/gemm.h"
#include "weights_util.h"

#include <algorithm>
#include <array>

using namespace ninfer;
using namespace ninfer::test;
using kernels::WeightFormat;

namespace {

int64_t pad8(int64_t v) { return (v + 7) / 8 * 8; }

// ||C - ref|| / ||ref||: fp32 sums of k random-signed products drift like sqrt(k) ulps (measured
// 5e-6 at k = 5120); a bf16 output adds its rounding, ~2^-9 relative.
double rel_bound(bool fp32, int64_t k) { return fp32 ? 1e-6 + 3e-7 * std::sqrt(double(k)) : 3e-3; }

bool is_poison_bf16(bf16 v) {
    uint16_t b;
    std::memcpy(&b, &v, 2);
    return b == 0xFFFF;
}
bool is_poison_f32(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return b == 0xFFFFFFFFu;
}

// A [m, k] and B [groups][n, k] with padded strides, values in (-1, 1) rounded to bf16.
struct GemmInputs {
    int64_t m, n, k, lda, ldb, ldc, b_stride;
    int groups;
    std::vector<bf16> a, b;
    GemmInputs(int64_t m_, int64_t n_, int64_t k_, int groups_, Rng& rng)
        : m(m_), n(n_), k(k_), lda(pad8(k_) + 8 * rng.integer(0, 2)), ldb(pad8(k_) + 8 * rng.integer(0, 2)),
          ldc(pad8(n_) + 8 * rng.integer(0, 1)), b_stride(n_ * ldb + 8 * rng.integer(0, 3)), groups(groups_) {
        a = rng.bf16s(size_t(m * lda), -1.f, 1.f);
        b = rng.bf16s(size_t(groups * b_stride), -1.f, 1.f);
    }
    // fp64 dot of A row i and B_g row j, and the sum of |products| (the scale of fp32 rounding).
    void ref(int64_t i, int64_t j, int g, double& dot, double& mag) const {
        dot = mag = 0;
        const bf16* ar = &a[size_t(i * lda)];
        const bf16* br = &b[size_t(g * b_stride + j * ldb)];
        for (int64_t t = 0; t < k; ++t) {
            const double p = double(to_f(ar[t])) * double(to_f(br[t]));
            dot += p;
            mag += std::fabs(p);
        }
    }
};

// Checks C rows [row_begin, row_end) against group g's reference (every row_step-th row, and the
// last one), every element written; returns rel_l2 over the checked rows.
template <typename T>
double check_rows(const GemmInputs& in, const std::vector<T>& c, int64_t row_begin, int64_t row_end, int g,
                  int64_t row_step, bool fp32) {
    std::vector<double> got, want;
    int64_t unwritten = 0, bad = 0;
    for (int64_t i = row_begin; i < row_end; ++i) {
        const bool sampled = (i - row_begin) % row_step == 0 || i == row_end - 1;
        for (int64_t j = 0; j < in.n; ++j) {
            const T v = c[size_t(i * in.ldc + j)];
            double gv;
            if constexpr (std::is_same_v<T, float>) {
                unwritten += is_poison_f32(v);
                gv = v;
            } else {
                unwritten += is_poison_bf16(v);
                gv = to_f(v);
            }
            if (!sampled) continue;
            double dot, mag;
            in.ref(i, j, g, dot, mag);
            // fp32 sums: a few ulps of the magnitude; bf16 output adds its half-ulp rounding.
            const double tol = 1e-5 * mag + 1e-6 + (fp32 ? 0.0 : std::fabs(dot) * (1.0 / 256));
            if (!(std::fabs(gv - dot) <= tol)) {
                if (bad < 5) WARN("C[" << i << "][" << j << "] = " << gv << ", reference " << dot << " (group " << g << ")");
                ++bad;
            }
            got.push_back(gv);
            want.push_back(dot);
        }
    }
    CHECK(unwritten == 0);
    CHECK(bad == 0);
    return rel_l2(got, want);
}

// Columns [n, ldc) of every row, and rows outside `written`, keep their poison.
template <typename T> int64_t count_touched(const GemmInputs& in, const std::vector<T>& c, const std::vector<bool>& written) {
    int64_t touched = 0;
    for (int64_t i = 0; i < in.m; ++i)
        for (int64_t j = 0; j < in.ldc; ++j) {
            if (written[size_t(i)] && j < in.n) continue;
            const T v = c[size_t(i * in.ldc + j)];
            if constexpr (std::is_same_v<T, float>)
                touched += !is_poison_f32(v);
            else
                touched += !is_poison_bf16(v);
        }
    return touched;
}

void run_gemm(int64_t m, int64_t n, int64_t k, bool fp32, int tile_n, uint64_t seed) {
    INFO("gemm m=" << m << " n=" << n << " k=" << k << " fp32=" << fp32 << " tile_n=" << tile_n);
    Rng rng(seed);
    GemmInputs in(m, n, k, 1, rng);
    DeviceBuffer<bf16> a(in.a), b(in.b);
    DeviceBuffer<float> c32(size_t(m * in.ldc), 0xff);
    DeviceBuffer<bf16> c16(size_t(m * in.ldc), 0xff);
    kernels::GemmArgs args;
    args.a = a.get();
    args.lda = in.lda;
    args.b = b.get();
    args.ldb = in.ldb;
    args.c = fp32 ? static_cast<void*>(c32.get()) : static_cast<void*>(c16.get());
    args.ldc = in.ldc;
    args.c_fp32 = fp32;
    args.m = int(m), args.n = int(n), args.k = int(k);
    kernels::gemm_force_tile_n(tile_n);
    const cudaError_t err = kernels::gemm_bf16(args, nullptr);
    kernels::gemm_force_tile_n(0);
    CUDA_OK(err);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(c32.guards_intact());
    CHECK(c16.guards_intact());
    const int64_t step = m * n * k > (int64_t(1) << 29) ? 7 : 1; // sample rows of the large cases
    const std::vector<bool> all(size_t(m), true);
    double rel;
    if (fp32) {
        const auto c = c32.download();
        rel = check_rows(in, c, 0, m, 0, step, true);
        CHECK(count_touched(in, c, all) == 0);
    } else {
        const auto c = c16.download();
        rel = check_rows(in, c, 0, m, 0, step, false);
        CHECK(count_touched(in, c, all) == 0);
    }
    INFO("rel_l2 " << rel);
    CHECK(rel < rel_bound(fp32, k));
}

} // namespace

TEST_CASE("gemm_bf16 matches fp64 at edge and layer-like sizes, both tile widths, bf16 and fp32 out", "[gemm]") {
    require_gpu();
    const struct { int64_t m, n, k; } shapes[] = {
        {1, 128, 64},   {7, 200, 128},   {64, 256, 16},  {129, 384, 320}, {1000, 520, 192},
        {65, 37, 40},   {300, 1000, 1024}, {5, 8, 8},    {2048, 2304, 256}, {1, 48, 5120},
    };
    uint64_t seed = 1000;
    for (const auto& s : shapes)
        for (int tile_n : {0, 128, 256})
            for (bool fp32 : {false, true}) run_gemm(s.m, s.n, s.k, fp32, tile_n, seed++);
}

namespace {

// Grouped GEMM over `offsets` (rows [offsets[g], offsets[g+1]) use B_g); rows of [0, m) outside
// every group must keep their poison.
// low_bound: pass max_group_rows = 1 (it may only cost speed, never rows).
void run_grouped(const std::vector<int32_t>& offsets, int64_t m, int64_t n, int64_t k, int tile_n, bool fp32,
                 bool low_bound, uint64_t seed) {
    const int groups = int(offsets.size()) - 1;
    INFO("grouped groups=" << groups << " m=" << m << " n=" << n << " k=" << k << " tile_n=" << tile_n << " fp32=" << fp32
                           << " low_bound=" << low_bound);
    int max_rows = 0;
    for (int g = 0; g < groups; ++g) max_rows = std::max(max_rows, offsets[g + 1] - offsets[g]);
    Rng rng(seed);
    GemmInputs in(m, n, k, groups, rng);
    DeviceBuffer<bf16> a(in.a), b(in.b);
    DeviceBuffer<int32_t> offs(offsets);
    DeviceBuffer<float> c32(size_t(m * in.ldc), 0xff);
    DeviceBuffer<bf16> c16(size_t(m * in.ldc), 0xff);
    kernels::GroupedGemmArgs args;
    args.a = a.get();
    args.lda = in.lda;
    args.b = b.get();
    args.ldb = in.ldb;
    args.c = fp32 ? static_cast<void*>(c32.get()) : static_cast<void*>(c16.get());
    args.ldc = in.ldc;
    args.c_fp32 = fp32;
    args.m = int(m), args.n = int(n), args.k = int(k);
    args.group_offsets = offs.get();
    args.n_groups = groups;
    args.b_group_stride = in.b_stride;
    args.max_group_rows = low_bound ? 1 : max_rows;
    kernels::gemm_force_tile_n(tile_n);
    const cudaError_t err = kernels::gemm_bf16_grouped(args, nullptr);
    kernels::gemm_force_tile_n(0);
    CUDA_OK(err);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(c32.guards_intact());
    CHECK(c16.guards_intact());
    std::vector<bool> written(size_t(m), false);
    for (int64_t i = offsets.front(); i < offsets.back(); ++i) written[size_t(i)] = true;
    const auto got32 = c32.download();
    const auto got16 = c16.download();
    for (int g = 0; g < groups; ++g) {
        if (offsets[g] == offsets[g + 1]) continue;
        const double rel = fp32 ? check_rows(in, got32, offsets[g], offsets[g + 1], g, 1, true)
                                : check_rows(in, got16, offsets[g], offsets[g + 1], g, 1, false);
        INFO("group " << g << " rel_l2 " << rel);
        CHECK(rel < rel_bound(fp32, k));
    }
    CHECK((fp32 ? count_touched(in, got32, written) : count_touched(in, got16, written)) == 0);

    // All groups empty (the host bound still says max_rows): nothing is written.
    DeviceBuffer<int32_t> empty(std::vector<int32_t>(size_t(groups + 1), 7));
    DeviceBuffer<bf16> c_empty(size_t(m * in.ldc), 0xff);
    args.group_offsets = empty.get();
    args.c = c_empty.get();
    args.c_fp32 = false;
    CUDA_OK(kernels::gemm_bf16_grouped(args, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(count_touched(in, c_empty.download(), std::vector<bool>(size_t(m), false)) == 0);
}

} // namespace

TEST_CASE("gemm_bf16_grouped: uneven and empty groups, rows outside groups untouched", "[gemm]") {
    require_gpu();
    uint64_t seed = 2000;
    // Offsets start past row 0 and end before m: those rows belong to no group.
    const std::vector<int32_t> hand = {3, 3, 40, 40, 340, 469, 470, 470};
    // MoE-like: 64 experts with 0..60 rows each (about one in six empty), wider k.
    Rng rng(seed);
    std::vector<int32_t> moe = {0};
    for (int g = 0; g < 64; ++g) moe.push_back(moe.back() + (rng.integer(0, 5) == 0 ? 0 : rng.integer(1, 60)));
    for (int tile_n : {128, 256})
        for (bool fp32 : {false, true}) {
            run_grouped(hand, 480, 200, 136, tile_n, fp32, false, seed++);
            run_grouped(moe, moe.back() + 5, 256, 512, tile_n, fp32, false, seed++);
            run_grouped(moe, moe.back(), 72, 64, tile_n, fp32, true, seed++);
        }
}

TEST_CASE("gemm_bf16 refuses arguments outside its contract", "[gemm]") {
    require_gpu();
    DeviceBuffer<bf16> a(64 * 64), b(64 * 64), c(64 * 64 + 8);
    kernels::GemmArgs ok;
    ok.a = a.get(), ok.lda = 64, ok.b = b.get(), ok.ldb = 64, ok.c = c.get(), ok.ldc = 64;
    ok.m = 64, ok.n = 64, ok.k = 64;
    CUDA_OK(kernels::gemm_bf16(ok, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    auto bad = ok;
    bad.k = 12; // k % 8
    CHECK(kernels::gemm_bf16(bad, nullptr) == cudaErrorInvalidValue);
    bad = ok;
    bad.c = c.get() + 4; // 8-byte aligned only
    CHECK(kernels::gemm_bf16(bad, nullptr) == cudaErrorInvalidValue);
    bad = ok;
    bad.ldc = 56; // < n
    CHECK(kernels::gemm_bf16(bad, nullptr) == cudaErrorInvalidValue);
    bad = ok;
    bad.m = 0;
    CHECK(kernels::gemm_bf16(bad, nullptr) == cudaErrorInvalidValue);
    kernels::GroupedGemmArgs g;
    static_cast<kernels::GemmArgs&>(g) = ok;
    g.n_groups = 1;
    g.b_group_stride = 64 * 64;
    g.max_group_rows = 64;
    CHECK(kernels::gemm_bf16_grouped(g, nullptr) == cudaErrorInvalidValue); // no offsets
}

namespace {

core::TensorFormat codec_of(WeightFormat f) {
    switch (f) {
    case WeightFormat::Bf16: return core::TensorFormat::Bf16;
    case WeightFormat::Fp8E4m3RowBf16: return core::TensorFormat::Fp8E4m3fnRowBf16;
    case WeightFormat::Q4G64Fp16: return core::TensorFormat::Q4G64Fp16;
    default: return core_format(f);
    }
}

void run_dequant(WeightFormat f, bool tiled, int64_t n, int64_t k, int64_t row0, int64_t n_rows, uint64_t seed) {
    INFO("dequant format " << int(f) << " tiled=" << tiled << " n=" << n << " k=" << k << " rows " << row0 << "+"
                           << n_rows);
    const auto bytes = random_weight(f, n, k, seed);
    DeviceBuffer<uint8_t> artifact(bytes);
    DeviceBuffer<uint8_t> packed(tiled ? kernels::tiled_weight_bytes(f, n, k) : 1);
    kernels::WeightView w{f, artifact.get(), n, k};
    if (tiled) {
        CUDA_OK(kernels::gemv_pack_tiled(w, packed.get(), nullptr));
        w.data = packed.get();
        w.layout = kernels::WeightLayout::Tiled;
    }
    const int64_t ld = k + 16;
    DeviceBuffer<bf16> dst(size_t(std::max<int64_t>(n_rows, 1) * ld), 0xff);
    CUDA_OK(kernels::dequant_bf16(w, row0, n_rows, dst.get(), ld, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(dst.guards_intact());
    const auto got = dst.download();

    core::StoredTensor t;
    t.format = codec_of(f);
    t.shape = {uint64_t(n), uint64_t(k)};
    t.data = bytes.data();
    t.bytes = bytes.size();
    std::vector<float> ref(size_t(std::max<int64_t>(n_rows, 1) * k));
    if (n_rows > 0) core::decode_rows(t, uint64_t(row0), uint64_t(n_rows), ref.data());
    int64_t mismatches = 0, padding_written = 0;
    for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t j = 0; j < ld; ++j) {
            uint16_t g;
            std::memcpy(&g, &got[size_t(r * ld + j)], 2);
            if (j >= k) {
                padding_written += g != 0xFFFF;
                continue;
            }
            const uint16_t want = core::f32_to_bf16(ref[size_t(r * k + j)]);
            if (g != want) {
                if (mismatches < 5) WARN("row " << row0 + r << " col " << j << ": got 0x" << std::hex << g << ", want 0x" << want);
                ++mismatches;
            }
        }
    CHECK(mismatches == 0);
    CHECK(padding_written == 0);
}

} // namespace

TEST_CASE("dequant_bf16 equals the CPU codec decode rounded to bf16, every format and layout", "[gemm]") {
    require_gpu();
    const WeightFormat all[] = {WeightFormat::Bf16,      WeightFormat::Fp8E4m3RowBf16, WeightFormat::Q4G64Fp16,
                                WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16,      WeightFormat::Q8G32Fp16};
    uint64_t seed = 3000;
    for (WeightFormat f : all)
        for (bool tiled : {false, true}) {
            if (tiled && !kernels::gemv_has_tiled_layout(f)) continue;
            // k not a multiple of 128 (padding groups), n not a multiple of 16 (padding tile rows).
            run_dequant(f, tiled, 37, 320, 0, 37, seed++);
            run_dequant(f, tiled, 50, 1088, 19, 31, seed++); // through the last row
            run_dequant(f, tiled, 20, 16, 5, 3, seed++);
            run_dequant(f, tiled, 20, 64, 4, 0, seed++); // nothing to do
            run_dequant(f, tiled, 18, 8320, 1, 17, seed++); // two column blocks, the second one partial
        }
    // nvfp4 (per-row divisors, gemv.h): against weights_util's decode of the CPU codec, bit for bit.
    for (auto [n, k, row0, n_rows] : std::vector<std::array<int64_t, 4>>{{128, 64, 0, 128}, {384, 1088, 100, 284}}) {
        INFO("dequant nvfp4 n=" << n << " k=" << k);
        const auto bytes = random_weight(WeightFormat::Nvfp4, n, k, seed++);
        DeviceBuffer<uint8_t> src4(bytes);
        DeviceBuffer<bf16> dst4(size_t(n_rows * k), 0xff);
        CUDA_OK(kernels::dequant_bf16({WeightFormat::Nvfp4, src4.get(), n, k}, row0, n_rows, dst4.get(), k, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        const auto got = dst4.download();
        int64_t mismatches = 0;
        for (int64_t r = 0; r < n_rows; ++r) {
            const auto want = decode_row(WeightFormat::Nvfp4, bytes, n, k, row0 + r);
            for (int64_t j = 0; j < k; ++j) {
                uint16_t g;
                std::memcpy(&g, &got[size_t(r * k + j)], 2);
                mismatches += g != core::f32_to_bf16(float(want[size_t(j)]));
            }
        }
        CHECK(mismatches == 0);
        CHECK(dst4.guards_intact());
    }
    kernels::WeightView w{WeightFormat::Bf16, nullptr, 16, 64};
    DeviceBuffer<bf16> src(16 * 64), dst(16 * 64);
    w.data = src.get();
    CHECK(kernels::dequant_bf16(w, 10, 7, dst.get(), 64, nullptr) == cudaErrorInvalidValue); // past the last row
    CHECK(kernels::dequant_bf16(w, 0, 4, dst.get(), 60, nullptr) == cudaErrorInvalidValue);  // ld < k
}
