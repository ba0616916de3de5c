// ninfer bench - prefill GEMM TFLOP/s (ours, both tile widths) against the bf16 tensor-core peak,
// and weight dequantisation GB/s per format.
//
// Usage: bench_gemm [--tower] [summary_file] (--tower: only the vision tower's epilogues). The peak is the best of our gemm_bf16 and cuBLASLt (loaded at
// run time with dlopen, so nothing links it; NINFER_CUBLASLT names the library file if the usual
// names fail) at 8192^3 bf16 -> bf16, fp32 accumulate. Then every 27B prefill linear shape at
// m = 2048 and 8192, and the 27B layer mix weighted by layer counts (48 GDN, 16 attention, 64
// MLP). Random bf16 data in (-1, 1); each figure is the median of 15 timed launches (CUDA events)
// after 3 warm-ups, with cuBLASLt at each shape beside ours; then the 35B-A3B dense shapes, its
// routed-expert grouped GEMM (256 experts, top 8, skewed routing) and 8192^3 again (drift). Then
// the vision tower's GEMMs at 4096 patches with their epilogues (gemm.h: bias, GELU, accumulate)
// against the plain GEMM and the plain GEMM + the element-wise kernel the epilogue replaces.
// Lines starting with RESULT go to the summary too.
#include "core/cuda/cublaslt.h"
#include "ninfer/kernels/device.h"
#include "ninfer/kernels/gemm.h"
#include "ninfer/kernels/vision.h"

#include "../bench_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

using namespace ninfer::kernels;

namespace {

FILE* g_summary = nullptr;

void report(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char line[512];
    std::vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    std::fputs(line, stdout);
    std::fflush(stdout);
    if (g_summary && std::strncmp(line, "RESULT", 6) == 0) std::fputs(line, g_summary);
}

// Median milliseconds of `launch` over 15 timed runs after 3 warm-ups.
double median_ms(const std::function<void()>& launch) {
    return ninfer::core::cuda::median_event_ms([&] { launch(); return true; }, 15, 3);
}

void fill_random_bf16(void* dev, size_t count, uint64_t seed) {
    std::vector<uint16_t> h(count);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& v : h) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const float f = float(int32_t(x >> 32)) * 0x1p-31f; // (-1, 1)
        uint32_t b;
        std::memcpy(&b, &f, 4);
        v = uint16_t((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
    }
    BENCH_CHECK_CUDA(cudaMemcpy(dev, h.data(), count * 2, cudaMemcpyHostToDevice));
}

struct Shape {
    const char* name;
    int n, k, per_model; // layers of the 27B that run this shape once per token
};

// The 27B's prefill linear layers (hidden 5120; GDN q/k/v fused; attention q with its gate; MLP
// gate and up fused), as the CUDA runner concatenates them.
const Shape k27b[] = {{"gdn_in_proj_qkv", 10240, 5120, 48}, {"gdn_in_proj_z", 6144, 5120, 48},
                      {"gdn_out_proj", 5120, 6144, 48},     {"attn_q_gate", 12288, 5120, 16},
                      {"attn_k_or_v", 1024, 5120, 32},      {"attn_o_proj", 5120, 6144, 16},
                      {"mlp_gate_up", 34816, 5120, 64},     {"mlp_down", 5120, 17408, 64}};

// The 35B-A3B's dense prefill layers (hidden 2048) and its routed experts (256, top 8, grouped).
const Shape k35b[] = {{"gdn_in_proj_qkv", 8192, 2048, 30}, {"gdn_in_proj_z", 4096, 2048, 30},
                      {"gdn_out_proj", 2048, 4096, 30},    {"attn_q_gate", 8192, 2048, 10},
                      {"attn_k_or_v", 512, 2048, 20},      {"attn_o_proj", 2048, 4096, 10},
                      {"shared_gate_up", 1024, 2048, 40},  {"shared_down", 2048, 512, 40}};
const Shape k35b_experts[] = {{"expert_gate_up", 1024, 2048, 40}, {"expert_down", 2048, 512, 40}};
constexpr int kExperts = 256, kTopK = 8;

double tflops(int64_t m, int64_t n, int64_t k, double ms) { return 2.0 * double(m) * n * k / (ms * 1e-3) / 1e12; }

double time_ours(void* a, void* b, void* c, int m, int n, int k, int tile_n) {
    GemmArgs g;
    g.a = static_cast<const __nv_bfloat16*>(a), g.lda = k;
    g.b = static_cast<const __nv_bfloat16*>(b), g.ldb = k;
    g.c = c, g.ldc = n;
    g.m = m, g.n = n, g.k = k;
    gemm_force_tile_n(tile_n);
    const double ms = median_ms([&] { BENCH_CHECK_CUDA(gemm_bf16(g, nullptr)); });
    gemm_force_tile_n(0);
    return ms;
}

// Grouped GEMM over kExperts experts for `tokens` tokens routed top-kTopK with a skewed random
// choice (a few hot experts, as real routers produce), rows sorted by expert.
double time_grouped(void* a, void* b, void* c, int32_t* d_offsets, int tokens, const Shape& sh, uint64_t seed,
                    int* max_rows_out) {
    std::vector<int32_t> counts(kExperts, 0);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int i = 0; i < tokens * kTopK; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const double u = double(x >> 11) * 0x1p-53;
        counts[size_t(double(kExperts) * u * u)]++; // density ~ 1/sqrt: expert 0 gets ~16x the median
    }
    std::vector<int32_t> offsets(kExperts + 1, 0);
    int max_rows = 0;
    for (int e = 0; e < kExperts; ++e) {
        offsets[e + 1] = offsets[e] + counts[e];
        max_rows = std::max(max_rows, counts[e]);
    }
    BENCH_CHECK_CUDA(cudaMemcpy(d_offsets, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
    GroupedGemmArgs g;
    g.a = static_cast<const __nv_bfloat16*>(a), g.lda = sh.k;
    g.b = static_cast<const __nv_bfloat16*>(b), g.ldb = sh.k;
    g.c = c, g.ldc = sh.n;
    g.m = tokens * kTopK, g.n = sh.n, g.k = sh.k;
    g.group_offsets = d_offsets;
    g.n_groups = kExperts;
    g.b_group_stride = int64_t(sh.n) * sh.k;
    g.max_group_rows = max_rows;
    *max_rows_out = max_rows;
    return median_ms([&] { BENCH_CHECK_CUDA(gemm_bf16_grouped(g, nullptr)); });
}

void bench_dequant(void* src, void* dst) {
    const struct { WeightFormat f; const char* name; bool tiled; } formats[] = {
        {WeightFormat::Bf16, "bf16", false},      {WeightFormat::Fp8E4m3RowBf16, "fp8_e4m3fn_row_bf16", false},
        {WeightFormat::Fp8E4m3RowBf16, "fp8_e4m3fn_row_bf16", true}, {WeightFormat::Q4G64Fp16, "q4_g64_fp16", false},
        {WeightFormat::Q4G64Fp16, "q4_g64_fp16", true}, {WeightFormat::Q5G64Fp16, "q5_g64_fp16", false},
        {WeightFormat::Q6G64Fp16, "q6_g64_fp16", false}, {WeightFormat::Q8G32Fp16, "q8_g32_fp16", false}};
    const int64_t n = 34816, k = 5120; // the fused MLP gate+up of the 27B
    for (const auto& fm : formats) {
        // Random bytes are valid codes for every format except fp8's two NaN codes and scales that
        // may be inf/NaN: the conversion cost does not depend on the values.
        const size_t stored = fm.tiled ? tiled_weight_bytes(fm.f, n, k) : weight_bytes(fm.f, n, k);
        const WeightView w{fm.f, src, n, k, fm.tiled ? WeightLayout::Tiled : WeightLayout::Artifact};
        const double ms =
            median_ms([&] { BENCH_CHECK_CUDA(dequant_bf16(w, 0, n, static_cast<__nv_bfloat16*>(dst), k, nullptr)); });
        const double gbs = double(stored + size_t(n * k) * 2) / (ms * 1e-3) / 1e9;
        report("RESULT dequant_gbs %s%s n=%lld k=%lld %.1f (%.3f ms, stored %zu B read + bf16 written)\n", fm.name,
               fm.tiled ? "_tiled" : "", (long long)n, (long long)k, gbs, ms, stored);
    }
}

// The vision tower's GEMMs for a 1024 x 1024 image (4096 patches; the merger's 1024 rows of 2 x 2)
// as the tower runs them (core/cuda/vision_tower_gpu.cpp), fused against unfused.
void bench_tower_epilogues(void* a, void* b, void* c) {
    const struct { const char* name; int m, n, k; GemmAct act; bool fp32, accumulate; } shapes[] = {
        {"qkv", 4096, 3456, 1152, GemmAct::None, true, false},
        {"proj", 4096, 1152, 1152, GemmAct::None, true, true},
        {"fc1", 4096, 4304, 1152, GemmAct::GeluTanh, false, false},
        {"fc2", 4096, 1152, 4304, GemmAct::None, true, true},
        {"merger_fc1", 1024, 4608, 4608, GemmAct::GeluErf, false, false},
        {"merger_fc2", 1024, 5120, 4608, GemmAct::None, true, false}};
    float *bias, *x;
    __nv_bfloat16* out16;
    BENCH_CHECK_CUDA(cudaMalloc(&bias, 5120 * 4));
    BENCH_CHECK_CUDA(cudaMemset(bias, 0, 5120 * 4));
    BENCH_CHECK_CUDA(cudaMalloc(&x, size_t(4096) * 5120 * 4));
    BENCH_CHECK_CUDA(cudaMemset(x, 0, size_t(4096) * 5120 * 4));
    BENCH_CHECK_CUDA(cudaMalloc(&out16, size_t(4096) * 5120 * 2));
    for (const auto& sh : shapes) {
        GemmArgs plain;
        plain.a = static_cast<const __nv_bfloat16*>(a), plain.lda = sh.k;
        plain.b = static_cast<const __nv_bfloat16*>(b), plain.ldb = sh.k;
        plain.c = c, plain.ldc = sh.n, plain.c_fp32 = true;
        plain.m = sh.m, plain.n = sh.n, plain.k = sh.k;
        GemmArgs fused = plain;
        fused.bias = bias, fused.act = sh.act, fused.accumulate = sh.accumulate;
        if (sh.accumulate) fused.c = x;
        if (!sh.fp32) fused.c = out16, fused.c_fp32 = false;
        const VisionAct act = sh.act == GemmAct::GeluTanh  ? VisionAct::GeluTanh
                              : sh.act == GemmAct::GeluErf ? VisionAct::GeluErf
                                                           : VisionAct::None;
        float* y = static_cast<float*>(c);
        const double t_plain = median_ms([&] { BENCH_CHECK_CUDA(gemm_bf16(plain, nullptr)); });
        const double t_fused = median_ms([&] { BENCH_CHECK_CUDA(gemm_bf16(fused, nullptr)); });
        const double t_unfused = median_ms([&] {
            BENCH_CHECK_CUDA(gemm_bf16(plain, nullptr));
            BENCH_CHECK_CUDA(sh.accumulate ? vision_residual(x, sh.n, y, sh.n, bias, sh.m, sh.n, nullptr)
                                           : vision_bias_act(y, sh.n, bias, sh.m, sh.n, act,
                                                             sh.fp32 ? nullptr : out16, sh.n, nullptr));
        });
        report("RESULT gemm_epilogue_ms tower_%s m=%d n=%d k=%d fused %.3f (plain GEMM %.3f, GEMM + element-wise "
               "%.3f; fused %.1f TFLOP/s)\n",
               sh.name, sh.m, sh.n, sh.k, t_fused, t_plain, t_unfused, tflops(sh.m, sh.n, sh.k, t_fused));
    }
    BENCH_CHECK_CUDA(cudaFree(bias));
    BENCH_CHECK_CUDA(cudaFree(x));
    BENCH_CHECK_CUDA(cudaFree(out16));
}

} // namespace

int main(int argc, char** argv) {
    const auto probe = cuda_probe();
    if (!probe.ok) {
        std::fprintf(stderr, "bench_gemm: cuda unavailable: %s\n", probe.reason.c_str());
        return 2;
    }
    bool tower_only = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--tower") == 0)
            tower_only = true;
        else
            g_summary = std::fopen(argv[i], "a");
    }
    report("device: %s\n", probe.reason.c_str());
    const size_t max_a = size_t(8192) * 17408, max_b = size_t(34816) * 5120, max_c = size_t(8192) * 34816;
    void *a, *b, *c;
    BENCH_CHECK_CUDA(cudaMalloc(&a, max_a * 2));
    BENCH_CHECK_CUDA(cudaMalloc(&b, max_b * 2));
    BENCH_CHECK_CUDA(cudaMalloc(&c, max_c * 4));
    fill_random_bf16(a, max_a, 1);
    fill_random_bf16(b, max_b, 2);
    if (tower_only) {
        bench_tower_epilogues(a, b, c);
        if (g_summary) std::fclose(g_summary);
        return 0;
    }

    const int s = 8192;
    const double ours = tflops(s, s, s, time_ours(a, b, c, s, s, s, 0));
    report("RESULT gemm_tflops square m=%d n=%d k=%d %.1f (tile %d)\n", s, s, s, ours, gemm_tile_n(s, s));
    double lt = -1;
    ninfer::core::cuda::Cublaslt cublas;
    if (cublas.open()) {
        report("cublasLt: %s\n", cublas.library().c_str());
        const double ms = cublas.gemm_ms(a, b, c, s, s, s, 15);
        if (ms > 0) lt = tflops(s, s, s, ms);
    } else {
        report("cublasLt: not loadable (%s); the peak is our kernel alone\n", cublas.note().c_str());
    }
    report("RESULT cublaslt_tflops square m=%d n=%d k=%d %.1f\n", s, s, s, lt);
    const double peak = std::max(ours, lt);
    report("RESULT tc_peak_tflops %.1f\n", peak);

    for (int m : {2048, 8192}) {
        double flops = 0, ms_mix = 0;
        for (const auto& sh : k27b) {
            const double t128 = time_ours(a, b, c, m, sh.n, sh.k, 128), t256 = time_ours(a, b, c, m, sh.n, sh.k, 256);
            const double best = gemm_tile_n(m, sh.n) == 128 ? t128 : t256;
            const double lt_ms = lt > 0 ? cublas.gemm_ms(a, b, c, m, sh.n, sh.k, 15) : -1;
            const double tf = tflops(m, sh.n, sh.k, best);
            report("RESULT gemm_tflops 27b_%s m=%d n=%d k=%d %.1f (%.1f%% of peak; tile 128: %.1f, 256: %.1f, chosen %d; "
                   "cublasLt %.1f)\n",
                   sh.name, m, sh.n, sh.k, tf, 100 * tf / peak, tflops(m, sh.n, sh.k, t128), tflops(m, sh.n, sh.k, t256),
                   gemm_tile_n(m, sh.n), lt_ms > 0 ? tflops(m, sh.n, sh.k, lt_ms) : -1.0);
            flops += 2.0 * m * sh.n * double(sh.k) * sh.per_model;
            ms_mix += best * sh.per_model;
        }
        const double tf = flops / (ms_mix * 1e-3) / 1e12;
        report("RESULT gemm_tflops 27b_layer_mix m=%d %.1f (%.1f%% of peak)\n", m, tf, 100 * tf / peak);
    }
    for (int m : {2048, 8192})
        for (const auto& sh : k35b) {
            const double ms = time_ours(a, b, c, m, sh.n, sh.k, 0);
            const double lt_ms = lt > 0 ? cublas.gemm_ms(a, b, c, m, sh.n, sh.k, 15) : -1;
            report("RESULT gemm_tflops 35b_%s m=%d n=%d k=%d %.1f (tile %d; cublasLt %.1f)\n", sh.name, m, sh.n, sh.k,
                   tflops(m, sh.n, sh.k, ms), gemm_tile_n(m, sh.n), lt_ms > 0 ? tflops(m, sh.n, sh.k, lt_ms) : -1.0);
        }
    {
        // Expert weights: 256 x [1024, 2048] bf16 = 1 GiB, tiled from the random B.
        const size_t expert_elems = size_t(kExperts) * 1024 * 2048;
        void *experts, *rows_out;
        int32_t* d_offsets;
        BENCH_CHECK_CUDA(cudaMalloc(&experts, expert_elems * 2));
        BENCH_CHECK_CUDA(cudaMalloc(&rows_out, size_t(8192) * kTopK * 2048 * 2));
        BENCH_CHECK_CUDA(cudaMalloc(&d_offsets, (kExperts + 1) * 4));
        for (size_t off = 0; off < expert_elems; off += max_b)
            BENCH_CHECK_CUDA(cudaMemcpy(static_cast<uint16_t*>(experts) + off, b,
                                        std::min(max_b, expert_elems - off) * 2, cudaMemcpyDeviceToDevice));
        for (int tokens : {2048, 8192})
            for (const auto& sh : k35b_experts) {
                int max_rows = 0;
                const double ms = time_grouped(a, experts, rows_out, d_offsets, tokens, sh, uint64_t(tokens), &max_rows);
                report("RESULT gemm_grouped_tflops 35b_%s tokens=%d rows=%d n=%d k=%d %.1f (256 experts, largest %d rows)\n",
                       sh.name, tokens, tokens * kTopK, sh.n, sh.k, tflops(int64_t(tokens) * kTopK, sh.n, sh.k, ms),
                       max_rows);
            }
        BENCH_CHECK_CUDA(cudaFree(experts));
        BENCH_CHECK_CUDA(cudaFree(rows_out));
        BENCH_CHECK_CUDA(cudaFree(d_offsets));
    }
    // The same square product last: a drop from the first figure is clock or power drift.
    report("RESULT gemm_tflops square_again m=%d n=%d k=%d %.1f\n", s, s, s, tflops(s, s, s, time_ours(a, b, c, s, s, s, 0)));
    bench_dequant(b, c);
    bench_tower_epilogues(a, b, c);
    if (g_summary) std::fclose(g_summary);
    return 0;
}
