// ninfer tests - the prefill GEMM's epilogue (bias, GELU tanh / erf, accumulate into fp32 C) bit for
// bit against the unfused path it replaces: the plain GEMM to fp32, then vision_bias_act or
// vision_residual (gemm.h's contract), over ragged shapes and the vision tower's real ones.
// Tagged [gemm] too, so `test_gpu "[gemm]"` runs every GEMM test.
#include "ninfer/kernels/gemm.h"
#include "ninfer/kernels/vision.h"
#include "gpu_test_util.h"

#include <cstring>

using namespace ninfer;
using namespace ninfer::test;
using kernels::GemmAct;

namespace {

kernels::VisionAct vision_act(GemmAct a) {
    switch (a) {
    case GemmAct::GeluTanh: return kernels::VisionAct::GeluTanh;
    case GemmAct::GeluErf: return kernels::VisionAct::GeluErf;
    default: return kernels::VisionAct::None;
    }
}

const char* act_name(GemmAct a) {
    return a == GemmAct::GeluTanh ? "gelu_tanh" : a == GemmAct::GeluErf ? "gelu_erf" : "none";
}

struct Epilogue {
    GemmAct act = GemmAct::None;
    bool bias = true, fp32 = true, accumulate = false;
};

// Elements whose bits differ between two equally long host arrays (the first few are reported).
template <typename T> int64_t bit_mismatches(const std::vector<T>& got, const std::vector<T>& want, int64_t ld) {
    int64_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
        if (bad < 5) {
            double g, w;
            if constexpr (std::is_same_v<T, float>)
                g = got[i], w = want[i];
            else
                g = to_f(got[i]), w = to_f(want[i]);
            WARN("C[" << int64_t(i) / ld << "][" << int64_t(i) % ld << "] = " << g << ", unfused " << w);
        }
        ++bad;
    }
    return bad;
}

// One GEMM with the epilogue e against the plain GEMM + the vision kernel, same tile width
// (tile_n 0: the heuristic's). C is [m, ldc]; columns [n, ldc) must keep what they held.
void run_epilogue(int64_t m, int64_t n, int64_t k, const Epilogue& e, int tile_n, uint64_t seed) {
    INFO("epilogue m=" << m << " n=" << n << " k=" << k << " act=" << act_name(e.act) << " bias=" << e.bias
                       << " fp32=" << e.fp32 << " accumulate=" << e.accumulate << " tile_n=" << tile_n);
    Rng rng(seed);
    const int64_t lda = k + 8 * rng.integer(0, 1), ldb = k + 8 * rng.integer(0, 1);
    const int64_t ldc = (n + 7) / 8 * 8 + 8 * rng.integer(0, 1);
    // Sums of about unit size (B scaled by 1/sqrt(k)), so the GELUs see both their curved part and
    // their tails.
    const float scale = 2.f / std::sqrt(float(k));
    DeviceBuffer<bf16> a(rng.bf16s(size_t(m * lda), -1.f, 1.f)), b(rng.bf16s(size_t(n * ldb), -scale, scale));
    std::vector<float> bias_h(static_cast<size_t>(n)), c0(static_cast<size_t>(m * ldc));
    for (float& v : bias_h) v = rng.uniform(-1.f, 1.f);
    for (float& v : c0) v = rng.uniform(-4.f, 4.f);
    DeviceBuffer<float> bias(bias_h);

    // Unfused: plain fp32 GEMM into y, then the element-wise kernel the tower ran before.
    DeviceBuffer<float> y(size_t(m * ldc), 0xff);
    kernels::GemmArgs plain;
    plain.a = a.get(), plain.lda = lda, plain.b = b.get(), plain.ldb = ldb;
    plain.c = y.get(), plain.ldc = ldc, plain.c_fp32 = true;
    plain.m = int(m), plain.n = int(n), plain.k = int(k);
    kernels::GemmArgs fused = plain;
    fused.bias = e.bias ? bias.get() : nullptr;
    fused.act = e.act;
    fused.accumulate = e.accumulate;
    fused.c_fp32 = e.fp32;

    DeviceBuffer<float> want32(size_t(m * ldc), 0xff), got32(size_t(m * ldc), 0xff);
    DeviceBuffer<bf16> want16(size_t(m * ldc), 0xff), got16(size_t(m * ldc), 0xff);
    if (e.accumulate) {
        want32.upload(c0);
        got32.upload(c0);
    }
    fused.c = e.fp32 ? static_cast<void*>(got32.get()) : static_cast<void*>(got16.get());
    kernels::gemm_force_tile_n(tile_n);
    const cudaError_t plain_err = kernels::gemm_bf16(plain, nullptr);
    const cudaError_t fused_err = kernels::gemm_bf16(fused, nullptr);
    kernels::gemm_force_tile_n(0);
    CUDA_OK(plain_err);
    CUDA_OK(fused_err);
    if (e.accumulate)
        CUDA_OK(kernels::vision_residual(want32.get(), ldc, y.get(), ldc, fused.bias, int(m), int(n), nullptr));
    else
        CUDA_OK(kernels::vision_bias_act(y.get(), ldc, fused.bias, int(m), int(n), vision_act(e.act),
                                         e.fp32 ? nullptr : want16.get(), ldc, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(got32.guards_intact());
    CHECK(got16.guards_intact());
    // Not vacuous: every element of C's n columns was written (no poison left), or, accumulating,
    // moved from what C held.
    int64_t untouched = 0;
    if (!e.fp32) {
        const std::vector<bf16> got = got16.download();
        CHECK(bit_mismatches(got, want16.download(), ldc) == 0);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) untouched += std::memcmp(&got[size_t(i * ldc + j)], "\xff\xff", 2) == 0;
        CHECK(untouched == 0);
        return;
    }
    const std::vector<float> got = got32.download();
    CHECK(bit_mismatches(got, e.accumulate ? want32.download() : y.download(), ldc) == 0);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            const float v = got[size_t(i * ldc + j)];
            untouched += e.accumulate ? v == c0[size_t(i * ldc + j)] : std::memcmp(&v, "\xff\xff\xff\xff", 4) == 0;
        }
    CHECK(untouched <= (e.accumulate ? m * n / 100 : 0)); // a sum may round away next to a large C
}

// Every epilogue variant the GEMM offers, including those the tower does not use.
const Epilogue kVariants[] = {
    {GemmAct::None, true, true, false},      // bias, fp32 (the tower's qkv, merger fc2)
    {GemmAct::None, true, false, false},     // bias, bf16
    {GemmAct::GeluTanh, true, false, false}, // the tower's fc1
    {GemmAct::GeluTanh, true, true, false},
    {GemmAct::GeluTanh, false, false, false},
    {GemmAct::GeluErf, true, false, false},  // the merger's fc1
    {GemmAct::GeluErf, false, true, false},
    {GemmAct::None, true, true, true},       // accumulate with bias (proj, fc2)
    {GemmAct::None, false, true, true},      // accumulate without
};

} // namespace

TEST_CASE("gemm_bf16 epilogues equal the GEMM then the vision kernels bit for bit, ragged shapes, both tiles",
          "[gemm][gemm_epilogue]") {
    require_gpu();
    // m not a multiple of 128, n not a multiple of the tile (and of 8, 4 and 2: the bias's scalar
    // tail and the ragged stores), k not a multiple of 64.
    const struct { int64_t m, n, k; } shapes[] = {
        {1, 8, 8}, {77, 136, 64}, {129, 264, 40}, {300, 520, 192}, {65, 37, 40}, {200, 390, 136}, {1000, 1160, 1152},
    };
    uint64_t seed = 5000;
    for (const auto& s : shapes)
        for (int tile_n : {128, 256})
            for (const Epilogue& e : kVariants) run_epilogue(s.m, s.n, s.k, e, tile_n, seed++);
}

TEST_CASE("gemm_bf16 epilogues at the vision tower's shapes equal the unfused path bit for bit",
          "[gemm][gemm_epilogue]") {
    require_gpu();
    // The tower's GEMMs (hidden 1152, intermediate 4304, qkv 3456, merger 4608 -> 5120) at a
    // 1024x1024 image's 4096 patches and a 30 s video batch's 3120, tile width as the tower gets it.
    const GemmAct none = GemmAct::None;
    uint64_t seed = 6000;
    for (int64_t rows : {4096, 3120}) {
        const int64_t groups = rows / 4; // the merger's rows: 2x2 patches each
        run_epilogue(rows, 3456, 1152, {none, true, true, false}, 0, seed++);              // qkv + bias
        run_epilogue(rows, 1152, 1152, {none, true, true, true}, 0, seed++);               // proj into x
        run_epilogue(rows, 4304, 1152, {GemmAct::GeluTanh, true, false, false}, 0, seed++); // fc1 + GELU
        run_epilogue(rows, 1152, 4304, {none, true, true, true}, 0, seed++);               // fc2 into x
        run_epilogue(groups, 4608, 4608, {GemmAct::GeluErf, true, false, false}, 0, seed++); // merger fc1
        run_epilogue(groups, 5120, 4608, {none, true, true, false}, 0, seed++);            // merger fc2
    }
}

TEST_CASE("gemm_bf16 refuses epilogues outside its contract", "[gemm][gemm_epilogue]") {
    require_gpu();
    DeviceBuffer<bf16> a(64 * 64), b(64 * 64);
    DeviceBuffer<float> c(64 * 64), bias(64 + 4);
    kernels::GemmArgs ok;
    ok.a = a.get(), ok.lda = 64, ok.b = b.get(), ok.ldb = 64, ok.c = c.get(), ok.ldc = 64, ok.c_fp32 = true;
    ok.m = 64, ok.n = 64, ok.k = 64;
    ok.bias = bias.get();
    ok.accumulate = true;
    CUDA_OK(kernels::gemm_bf16(ok, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    auto bad = ok;
    bad.c_fp32 = false; // accumulate into bf16
    CHECK(kernels::gemm_bf16(bad, nullptr) == cudaErrorInvalidValue);
    bad = ok;
    bad.act = GemmAct::GeluTanh; // accumulate with an activation
    CHECK(kernels::gemm_bf16(bad, nullptr) == cudaErrorInvalidValue);
    bad = ok;
    bad.bias = bias.get() + 1; // 4-byte aligned only
    CHECK(kernels::gemm_bf16(bad, nullptr) == cudaErrorInvalidValue);
    bad = ok;
    bad.accumulate = false;
    bad.act = static_cast<GemmAct>(7);
    CHECK(kernels::gemm_bf16(bad, nullptr) == cudaErrorInvalidValue);
    // The grouped GEMM has no epilogue.
    DeviceBuffer<int32_t> offsets(std::vector<int32_t>{0, 64});
    kernels::GroupedGemmArgs g;
    static_cast<kernels::GemmArgs&>(g) = ok;
    g.accumulate = false;
    g.group_offsets = offsets.get();
    g.n_groups = 1;
    g.b_group_stride = 64 * 64;
    g.max_group_rows = 64;
    CHECK(kernels::gemm_bf16_grouped(g, nullptr) == cudaErrorInvalidValue); // bias
    g.bias = nullptr;
    g.act = GemmAct::GeluErf;
    CHECK(kernels::gemm_bf16_grouped(g, nullptr) == cudaErrorInvalidValue);
    g.act = GemmAct::None;
    CUDA_OK(kernels::gemm_bf16_grouped(g, nullptr)); // plain: accepted
    CUDA_OK(cudaDeviceSynchronize());
}
