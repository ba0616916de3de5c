// ninfer bench - prefill sequence mixing (GDN prefill, attention prefill) per call, in ms and TFLOP/s.
//
// A hidden test ([.] keeps it out of plain runs): test_gpu "[prefill_bench]". Prints RESULT lines
// (tests/gpu/run.sh collects them): GDN prefill per layer for T = 512, 2048, 8192 at the 27B
// (Hk 16, Hv 48) and 35B-A3B (Hv 32) shapes for every scan layout and the chunked form (also
// in the visible case run with [gdn_prefill], which checks the two agree), and attention prefill (prep and
// attention, every block shape) from position 0 for the 27B (24/4 heads) and 35B-A3B (16/2)
// geometries, with the causal attention FLOPs (4 * heads * 256 * T(T+1)/2) over the attention time. Times: CUDA events
// around 5 calls after 2 warm-up calls, median of 3 such groups; inputs random (never zeros).
#include "gpu_test_util.h"
#include "ninfer/kernels/attention_prefill.h"
#include "ninfer/kernels/gdn_prefill.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>

using namespace ninfer;
using namespace ninfer::test;

namespace {

double median_ms(const std::function<void()>& call) {
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    for (int i = 0; i < 2; ++i) call();
    std::vector<double> ms;
    for (int rep = 0; rep < 3; ++rep) {
        CUDA_OK(cudaEventRecord(e0));
        for (int i = 0; i < 5; ++i) call();
        CUDA_OK(cudaEventRecord(e1));
        CUDA_OK(cudaEventSynchronize(e1));
        float t = 0;
        CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t / 5.0);
    }
    CUDA_OK(cudaEventDestroy(e0));
    CUDA_OK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return ms[1];
}

struct GdnRun {
    double ms = 0;
    std::vector<double> y, state; // after the timed calls (identical inputs and call count per shape)
};

GdnRun bench_gdn(int hk, int hv, int T, int variant, int algorithm = kernels::kGdnPrefillScan) {
    constexpr int D = kernels::kGdnHeadDim;
    Rng rng(uint64_t(T) * 7 + hv);
    const int conv_dim = (2 * hk + hv) * D;
    DeviceBuffer<bf16> qkv(rng.bf16s(size_t(T) * conv_dim, -2.f, 2.f)), z(rng.bf16s(size_t(T) * hv * D, -3.f, 3.f));
    DeviceBuffer<bf16> a(rng.bf16s(size_t(T) * hv, -4.f, 4.f)), b(rng.bf16s(size_t(T) * hv, -4.f, 4.f));
    DeviceBuffer<bf16> w(rng.bf16s(size_t(conv_dim) * 4, -0.6f, 0.6f)), nw(rng.bf16s(D, 0.5f, 1.5f));
    DeviceBuffer<bf16> hist(rng.bf16s(size_t(3) * conv_dim, -2.f, 2.f)), y(size_t(T) * hv * D);
    std::vector<float> a_log(hv, 0.5f), dt_bias(hv, 0.1f), st(size_t(hv) * D * D);
    for (auto& v : st) v = rng.uniform(-0.5f, 0.5f);
    DeviceBuffer<float> alog_d(a_log), dtb_d(dt_bias), state(st);
    DeviceBuffer<uint8_t> scratch(kernels::gdn_prefill_scratch_bytes(T, hk, hv));
    kernels::GdnPrefillArgs p;
    p.qkv = qkv.get(), p.qkv_stride = conv_dim, p.z = z.get(), p.z_stride = hv * D;
    p.a = a.get(), p.b = b.get(), p.a_stride = p.b_stride = hv;
    p.conv_w = w.get(), p.conv_state = hist.get(), p.state = state.get(), p.slot = 0;
    p.a_log = alog_d.get(), p.dt_bias = dtb_d.get(), p.norm_w = nw.get(), p.y = y.get(), p.y_stride = hv * D;
    p.n_k_heads = hk, p.n_v_heads = hv, p.conv_dim = conv_dim, p.n_tokens = T, p.exact = true, p.scan_variant = variant;
    p.algorithm = algorithm;
    if (algorithm == kernels::kGdnPrefillChunked) p.scan_variant = 0, p.chunk_variant = variant;
    p.scratch = scratch.get(), p.scratch_bytes = scratch.size();
    GdnRun run;
    run.ms = median_ms([&] { CUDA_OK(kernels::gdn_prefill(p, nullptr)); });
    // The scan's arithmetic: 4 multiply-adds per state element per token (decay, S^T k, update, S^T q).
    const double gflops = 8.0 * hv * D * D * double(T) / (run.ms * 1e6);
    std::printf("RESULT gdn_prefill hk %d hv %d T %d %s %d ms %.3f tok_per_s %.0f scan_gflops %.0f\n", hk, hv, T,
                algorithm == kernels::kGdnPrefillChunked ? "chunked" : "scan_variant", variant, run.ms,
                T / (run.ms * 1e-3), gflops);
    for (auto v : y.download()) run.y.push_back(to_f(v));
    for (auto v : state.download()) run.state.push_back(v);
    return run;
}

void bench_attention(int nh, int nkv, int T, int variant) {
    constexpr int HD = 256;
    Rng rng(uint64_t(T) + nh);
    const int max_pages = (T + 63) / 64;
    std::vector<int32_t> table(max_pages);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng.gen);
    const size_t pool = size_t(max_pages) * nkv * 64 * HD;
    DeviceBuffer<bf16> kp(pool), vp(pool), qg(rng.bf16s(size_t(T) * nh * 2 * HD, -3.f, 3.f));
    DeviceBuffer<bf16> k(rng.bf16s(size_t(T) * nkv * HD, -3.f, 3.f)), v(rng.bf16s(size_t(T) * nkv * HD, -2.f, 2.f));
    DeviceBuffer<bf16> qw(rng.bf16s(HD, -0.3f, 0.3f)), kw(rng.bf16s(HD, -0.3f, 0.3f)), out(size_t(T) * nh * HD);
    DeviceBuffer<int32_t> table_d(table);
    DeviceBuffer<uint8_t> scratch(kernels::attn_prefill_scratch_bytes(T, nh));
    kernels::AttnPrefillArgs a;
    a.geo = kernels::AttnGeometry{nh, nkv, HD, 64, 1e7f, 1e-6f, true};
    a.qg = qg.get(), a.qg_stride = nh * 2 * HD, a.k = k.get(), a.k_stride = nkv * HD, a.v = v.get();
    a.v_stride = nkv * HD, a.q_norm = qw.get(), a.k_norm = kw.get();
    a.kv = kernels::KvPages{kp.get(), vp.get(), table_d.get(), max_pages};
    a.lane = 0, a.start_pos = 0, a.n_tokens = T, a.scratch = scratch.get(), a.scratch_bytes = scratch.size();
    a.out = out.get(), a.out_stride = nh * HD, a.kernel_variant = variant;
    const double prep_ms = median_ms([&] { CUDA_OK(kernels::attn_prefill_prep(a, nullptr)); });
    const double attn_ms = median_ms([&] { CUDA_OK(kernels::attn_prefill(a, nullptr)); });
    const double flops = 4.0 * nh * HD * (double(T) * (T + 1) / 2);
    std::printf("RESULT attention_prefill heads %d/%d T %d variant %d prep_ms %.3f attn_ms %.3f attn_tflops %.1f\n", nh,
                nkv, T, variant, prep_ms, attn_ms, flops / (attn_ms * 1e9));
}

} // namespace

TEST_CASE("prefill sequence-mixing timings", "[.][prefill_bench]") {
    require_gpu();
    for (int T : {512, 2048, 8192})
        for (int variant = 1; variant <= 6; ++variant) {
            bench_gdn(16, 48, T, variant);
            bench_gdn(16, 32, T, variant);
        }
    for (int T : {512, 2048, 8192})
        for (int variant = 1; variant <= 3; ++variant) {
            bench_attention(24, 4, T, variant);
            bench_attention(16, 2, T, variant);
        }
}

// Not hidden: runs with [gdn_prefill]. Per-layer timings of the default scan layout and the
// chunked form on the same inputs, whose outputs and final states must agree (the long-sequence
// check the CPU reference is too slow for: 17 calls of T tokens through one state).
TEST_CASE("gdn prefill per-layer timings, scan and chunked", "[prefill_bench][gdn_prefill]") {
    require_gpu();
    for (int T : {512, 2048, 8192})
        for (int hv : {48, 32}) {
            INFO("T " << T << " hv " << hv);
            const GdnRun scan = bench_gdn(16, hv, T, 0);
            for (int variant = 1; variant <= 4; ++variant) { // every chunked launch layout
                INFO("chunk variant " << variant);
                const GdnRun chunked = bench_gdn(16, hv, T, variant, kernels::kGdnPrefillChunked);
                CHECK(std::all_of(chunked.y.begin(), chunked.y.end(), [](double v) { return std::isfinite(v); }));
                CHECK(rel_l2(chunked.y, scan.y) < 1e-3);
                CHECK(rel_l2(chunked.state, scan.state) < 1e-5);
            }
        }
}

TEST_CASE("prefill profile 27B layer T 8192", "[.][prefill_bench]") {
    require_gpu();
    // For ncu -k regex:... -c N test_gpu "prefill profile 27B layer T 8192": the per-kernel times of
    // one 27B layer's GDN prefill (chunked, then the default scan layout) and attention at T = 8192.
    bench_gdn(16, 48, 8192, 0, kernels::kGdnPrefillChunked); // first: ncu -c 4 sees its kernels
    bench_gdn(16, 48, 8192, 0);
    bench_attention(24, 4, 8192, 0);
}
