// ninfer bench - decode GEMV bandwidth against the measured device-to-device copy bandwidth.
//
// Usage: bench_gpu [summary_file [format]] (format: only that one, e.g. q4_g64_fp16). Prints (and appends to summary_file) the copy bandwidth
// (best of 10 copies of 4 GiB, bytes read + written) and, for bf16 / fp8 / q4 / q5 / q6 / q8 weights at batch
// 1 and 8, the GB/s of each 27B decode GEMV shape in the tiled layout (the runner's) and of the
// whole 27B layer mix in both layouts, with the fraction of the copy roofline, then the mix with
// x low halves (gemv.h x_lo), the 35B-A3B (hidden 2048) mix, and the mixes for each tiled weight
// path (gemv_set_tiled_pipeline: register buffer, 2..4 shared-memory stages, carveouts). GB/s counts the stored
// (artifact) weight bytes. Weights rotate over copies larger than L2 so every launch reads HBM;
// timing is CUDA events around replays of a captured graph, best of 5.
#include "ninfer/kernels/device.h"
#include "ninfer/kernels/gemv.h"

#include "../bench_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
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
    if (g_summary) std::fputs(line, g_summary);
}

double copy_bandwidth() {
    const size_t bytes = size_t(4) << 30;
    void *a, *b;
    BENCH_CHECK_CUDA(cudaMalloc(&a, bytes));
    BENCH_CHECK_CUDA(cudaMalloc(&b, bytes));
    BENCH_CHECK_CUDA(cudaMemset(a, 0x5a, bytes));
    cudaEvent_t e0, e1;
    BENCH_CHECK_CUDA(cudaEventCreate(&e0));
    BENCH_CHECK_CUDA(cudaEventCreate(&e1));
    float best = 1e30f;
    BENCH_CHECK_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    for (int i = 0; i < 10; ++i) {
        BENCH_CHECK_CUDA(cudaEventRecord(e0));
        BENCH_CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
        BENCH_CHECK_CUDA(cudaEventRecord(e1));
        BENCH_CHECK_CUDA(cudaEventSynchronize(e1));
        float ms;
        BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        best = std::min(best, ms);
    }
    BENCH_CHECK_CUDA(cudaFree(a));
    BENCH_CHECK_CUDA(cudaFree(b));
    return 2.0 * double(bytes) / (best * 1e-3) / 1e9;
}

struct Shape {
    const char* name;
    int64_t n, k;
};

// One 27B decoder layer pair's linear layers (a GDN layer and the dense MLP), as decode reads them.
const std::vector<Shape> k27b = {{"gdn in_proj_qkv", 10240, 5120}, {"gdn in_proj_z", 6144, 5120},
                                 {"gdn out_proj", 5120, 6144},      {"attn q_proj", 12288, 5120},
                                 {"attn k_proj", 1024, 5120},       {"attn o_proj", 5120, 6144},
                                 {"mlp gate_proj", 17408, 5120},    {"mlp up_proj", 17408, 5120},
                                 {"mlp down_proj", 5120, 17408}};

// The 35B-A3B's dense decode GEMVs (hidden 2048; experts run in the MoE kernels): GDN
// [q;k;v;z;a;b] and out_proj, attention [q;gate;k;v] and o_proj, as the runner concatenates them.
const std::vector<Shape> k35b = {{"gdn qkvzab", 12352, 2048}, {"gdn out_proj", 2048, 4096},
                                 {"attn qgkv", 9216, 2048},   {"attn o_proj", 2048, 4096}};

// GB/s of the launches of `shapes` (weight bytes / time), rotating over enough copies to defeat L2.
size_t layout_bytes(WeightFormat f, WeightLayout l, const Shape& s) {
    return l == WeightLayout::Tiled ? tiled_weight_bytes(f, s.n, s.k) : weight_bytes(f, s.n, s.k);
}

double time_mix(WeightFormat f, WeightLayout layout, const std::vector<Shape>& shapes, int tokens, GemvScratch scratch,
                const void* x, void* y, const void* x_lo = nullptr) {
    size_t mix_bytes = 0;
    for (const auto& s : shapes) mix_bytes += (layout_bytes(f, layout, s) + 255) / 256 * 256;
    const int copies = int(std::max<size_t>(2, (size_t(3) << 29) / mix_bytes + 1));
    uint8_t* pool;
    BENCH_CHECK_CUDA(cudaMalloc(&pool, mix_bytes * copies));
    // Random bytes (not zeros): q4 and fp8 dequantisation cost does not depend on values, but keep
    // the data honest. The bytes avoid fp8 NaN codes (0x7F/0xFF) by clearing bit 0 of 0x7F patterns.
    std::vector<uint8_t> host(mix_bytes);
    uint64_t s = 88172645463325252ull;
    for (auto& b : host) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        b = uint8_t(s);
        if ((b & 0x7F) == 0x7F) b ^= 1;
    }
    if (f == WeightFormat::Bf16) // keep bf16 weights finite: clear the top exponent bit
        for (size_t i = 1; i < host.size(); i += 2) host[i] &= 0xBF;
    for (int c = 0; c < copies; ++c)
        BENCH_CHECK_CUDA(cudaMemcpy(pool + mix_bytes * c, host.data(), mix_bytes, cudaMemcpyHostToDevice));
    cudaStream_t st;
    BENCH_CHECK_CUDA(cudaStreamCreate(&st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    BENCH_CHECK_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int c = 0; c < copies; ++c) {
        size_t off = 0;
        for (const auto& sh : shapes) {
            GemvArgs a;
            a.w = {f, pool + mix_bytes * c + off, sh.n, sh.k, layout};
            a.x = static_cast<const __nv_bfloat16*>(x);
            a.x_lo = static_cast<const __nv_bfloat16*>(x_lo);
            a.n_tokens = tokens;
            a.x_stride = sh.k;
            a.y = y;
            a.y_stride = sh.n;
            a.scratch = scratch;
            BENCH_CHECK_CUDA(gemv(a, st));
            off += (layout_bytes(f, layout, sh) + 255) / 256 * 256;
        }
    }
    BENCH_CHECK_CUDA(cudaStreamEndCapture(st, &graph));
    BENCH_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    BENCH_CHECK_CUDA(cudaGraphLaunch(exec, st));
    BENCH_CHECK_CUDA(cudaStreamSynchronize(st));
    cudaEvent_t e0, e1;
    BENCH_CHECK_CUDA(cudaEventCreate(&e0));
    BENCH_CHECK_CUDA(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int i = 0; i < 5; ++i) {
        BENCH_CHECK_CUDA(cudaEventRecord(e0, st));
        BENCH_CHECK_CUDA(cudaGraphLaunch(exec, st));
        BENCH_CHECK_CUDA(cudaEventRecord(e1, st));
        BENCH_CHECK_CUDA(cudaEventSynchronize(e1));
        float ms;
        BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        best = std::min(best, ms);
    }
    size_t bytes = 0;
    for (const auto& sh : shapes) bytes += weight_bytes(f, sh.n, sh.k);
    BENCH_CHECK_CUDA(cudaGraphExecDestroy(exec));
    BENCH_CHECK_CUDA(cudaGraphDestroy(graph));
    BENCH_CHECK_CUDA(cudaStreamDestroy(st));
    BENCH_CHECK_CUDA(cudaFree(pool));
    return double(bytes) * copies / (best * 1e-3) / 1e9;
}

} // namespace

int main(int argc, char** argv) {
    const auto probe = cuda_probe();
    if (!probe.ok) {
        std::fprintf(stderr, "bench_gpu: cuda unavailable: %s\n", probe.reason.c_str());
        return 2;
    }
    if (argc > 1) g_summary = std::fopen(argv[1], "a");
    report("device: %s\n", probe.reason.c_str());
    const double copy = copy_bandwidth();
    report("copy bandwidth (4 GiB device-to-device, read+write, best of 10): %.1f GB/s\n", copy);

    void *x, *y;
    BENCH_CHECK_CUDA(cudaMalloc(&x, 8 * 17408 * 2));
    BENCH_CHECK_CUDA(cudaMemset(x, 0x3c, 8 * 17408 * 2)); // bf16 ~ 0.0115: finite, nonzero
    void* x_lo; // a buffer of its own, as in the runner (x and its halves both take L1 space)
    BENCH_CHECK_CUDA(cudaMalloc(&x_lo, 8 * 17408 * 2));
    BENCH_CHECK_CUDA(cudaMemset(x_lo, 0x1c, 8 * 17408 * 2));
    BENCH_CHECK_CUDA(cudaMalloc(&y, 8 * 17408 * 4));
    float* partials;
    uint32_t* counters;
    BENCH_CHECK_CUDA(cudaMalloc(&partials, gemv_scratch_floats(17408) * 4));
    BENCH_CHECK_CUDA(cudaMalloc(&counters, gemv_scratch_counters(17408) * 4));
    BENCH_CHECK_CUDA(cudaMemset(counters, 0, gemv_scratch_counters(17408) * 4));
    const GemvScratch scratch{partials, gemv_scratch_floats(17408), counters, gemv_scratch_counters(17408)};

    const struct { WeightFormat f; const char* name; } formats[] = {
        {WeightFormat::Q4G64Fp16, "q4_g64_fp16"}, {WeightFormat::Fp8E4m3RowBf16, "fp8_e4m3fn_row_bf16"},
        {WeightFormat::Bf16, "bf16"}, {WeightFormat::Q5G64Fp16, "q5_g64_fp16"}, {WeightFormat::Q6G64Fp16, "q6_g64_fp16"},
        {WeightFormat::Q8G32Fp16, "q8_g32_fp16"}};
    report("%-20s %-16s %5s %6s %9s %9s   (tiled layout unless marked)\n", "format", "shape", "batch", "splits",
           "GB/s", "roofline");
    const std::string only = argc > 2 ? argv[2] : "";
    for (const auto& fm : formats) {
        if (!only.empty() && only != fm.name) continue;
        for (int tokens : {1, 8}) {
            for (const auto& sh : k27b) {
                const double gbs = time_mix(fm.f, WeightLayout::Tiled, {sh}, tokens, scratch, x, y);
                const int splits = gemv_split_count({fm.f, nullptr, sh.n, sh.k, WeightLayout::Tiled}, scratch);
                report("%-20s %-16s %5d %6d %9.1f %8.1f%%\n", fm.name, sh.name, tokens, splits, gbs, 100 * gbs / copy);
            }
            const double gbs = time_mix(fm.f, WeightLayout::Tiled, k27b, tokens, scratch, x, y);
            report("%-20s %-16s %5d %6s %9.1f %8.1f%%   <- 27B layer mix, tiled\n", fm.name, "27B mix", tokens, "-",
                   gbs, 100 * gbs / copy);
            const double old = time_mix(fm.f, WeightLayout::Artifact, k27b, tokens, scratch, x, y);
            report("%-20s %-16s %5d %6s %9.1f %8.1f%%   <- 27B layer mix, artifact layout\n", fm.name, "27B mix",
                   tokens, "-", old, 100 * old / copy);
        }
    }
    for (const auto& fm : formats)
        for (int tokens : {1, 8}) {
            if (!only.empty() && only != fm.name) continue;
            const double gbs = time_mix(fm.f, WeightLayout::Tiled, k27b, tokens, scratch, x, y, x_lo);
            report("%-20s %-16s %5d %6s %9.1f %8.1f%%   <- 27B layer mix, tiled, with x low halves\n", fm.name,
                   "27B mix", tokens, "-", gbs, 100 * gbs / copy);
        }
    // The 35B-A3B mix per shape (default path), then every weight path on both mixes. The runner
    // passes x low halves to almost every GEMV, so the sweep uses them (8 tokens: two passes).
    for (const auto& fm : formats) {
        if (!only.empty() && only != fm.name) continue;
        for (const auto& sh : k35b) {
            const double gbs = time_mix(fm.f, WeightLayout::Tiled, {sh}, 1, scratch, x, y, x_lo);
            const int splits = gemv_split_count({fm.f, nullptr, sh.n, sh.k, WeightLayout::Tiled}, scratch);
            report("%-20s %-16s %5d %6d %9.1f %8.1f%%   (x low halves)\n", fm.name, sh.name, 1, splits, gbs, 100 * gbs / copy);
        }
    }
    // A carveout stays set on its kernel (and changes the occupancy that picks the split), so the
    // carveout rows come last.
    const struct { int stages, carveout; bool stage_x; } paths[] = {
        {0, -1, false}, {2, -1, false}, {4, -1, false}, {2, -1, true}, {3, -1, true}, {4, -1, true}, {2, 50, false}};
    for (const auto& path : paths) {
        gemv_set_tiled_pipeline(path.stages, path.carveout, path.stage_x);
        for (const auto& fm : formats) {
            if (!only.empty() && only != fm.name) continue;
            const bool q4 = fm.f == WeightFormat::Q4G64Fp16;
            for (int tokens : {1, 8}) {
                if (tokens == 8 && !q4) continue;
                const double b27 = time_mix(fm.f, WeightLayout::Tiled, k27b, tokens, scratch, x, y, x_lo);
                const double b35 = time_mix(fm.f, WeightLayout::Tiled, k35b, tokens, scratch, x, y, x_lo);
                report("%-20s %-16s %5d %6s %9.1f %8.1f%%   <- stages %d carveout %d stage_x %d, x low halves; "
                       "35B-A3B mix %.1f%%\n",
                       fm.name, "27B mix", tokens, "-", b27, 100 * b27 / copy, path.stages, path.carveout,
                       int(path.stage_x), 100 * b35 / copy);
            }
        }
    }
    gemv_restore_tiled_pipeline();
    if (g_summary) std::fclose(g_summary);
    return 0;
}
