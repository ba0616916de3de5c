// ninfer tests - decode GEMV (bf16, fp8 row, q4/q5/q6 g64, q8 g32, nvfp4), artifact and tiled layouts,
// x low halves and f32 row tails, against an fp64 reference, guards, batching.
#include "ninfer/kernels/gemv.h"
#include "weights_util.h"

#include <algorithm>
#include <utility>

using namespace ninfer;
using namespace ninfer::test;
using kernels::WeightFormat;

namespace {

struct Case {
    WeightFormat f;
    int64_t n, k;
    int tokens;
    bool fp32_out, residual, split;
    bool tiled = false;
    bool lo = false;   // x from f32 values as bf16 high + low halves (x_lo)
    bool tail = false; // rows from n/2 on as f32 into y_tail
};

// The weight in the layout the case asks for (the tiled copy made on the device by gemv_pack_tiled).
struct CaseWeight {
    DeviceBuffer<uint8_t> artifact, tiled;
    kernels::WeightView view;
    CaseWeight(const std::vector<uint8_t>& bytes, WeightFormat f, int64_t n, int64_t k, bool use_tiled)
        : artifact(bytes), tiled(use_tiled ? kernels::tiled_weight_bytes(f, n, k) : 1) {
        view = {f, artifact.get(), n, k};
        if (!use_tiled) return;
        CUDA_OK(kernels::gemv_pack_tiled(view, tiled.get(), nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        CHECK(tiled.guards_intact());
        view.data = tiled.get();
        view.layout = kernels::WeightLayout::Tiled;
    }
};

const char* fmt_name(WeightFormat f) {
    switch (f) {
    case WeightFormat::Bf16: return "bf16";
    case WeightFormat::Fp8E4m3RowBf16: return "fp8";
    case WeightFormat::Q4G64Fp16: return "q4";
    case WeightFormat::Q5G64Fp16: return "q5";
    case WeightFormat::Q6G64Fp16: return "q6";
    case WeightFormat::Q8G32Fp16: return "q8";
    case WeightFormat::Nvfp4: return "nvfp4";
    }
    return "?";
}

void run_case(const Case& c, uint64_t seed) {
    INFO(fmt_name(c.f) << " n=" << c.n << " k=" << c.k << " tokens=" << c.tokens << " fp32=" << c.fp32_out
                       << " residual=" << c.residual << " split=" << c.split << " tiled=" << c.tiled
                       << " lo=" << c.lo << " tail=" << c.tail);
    Rng rng(seed);
    const auto wbytes = random_weight(c.f, c.n, c.k, seed);
    CaseWeight w(wbytes, c.f, c.n, c.k, c.tiled);
    // y holds the rows below the tail only (its stride may be shorter than n).
    const int64_t tail0 = c.tail ? c.n / 2 : c.n, ldt = c.n - tail0 + 3;
    const int64_t ldx = c.k + 8, ldy = tail0 + (tail0 % 8 ? 8 - tail0 % 8 : 0) + 8;
    // x32: the f32 activations; xh = bf16(x32) and, with lo, xl = bf16(x32 - xh).
    std::vector<float> x32(size_t(c.tokens * ldx));
    for (float& v : x32) v = c.lo ? rng.uniform(-2.f, 2.f) : to_f(to_bf16(rng.uniform(-2.f, 2.f)));
    std::vector<bf16> xh(x32.size()), xl(x32.size());
    for (size_t i = 0; i < x32.size(); ++i) {
        xh[i] = to_bf16(x32[i]);
        xl[i] = to_bf16(x32[i] - to_f(xh[i]));
    }
    DeviceBuffer<bf16> x(xh), x_lo(xl);
    DeviceBuffer<float> yt(size_t(c.tokens * std::max<int64_t>(ldt, 1)), 0xff);
    const auto rh = rng.bf16s(size_t(c.tokens * ldy), -4.f, 4.f);
    DeviceBuffer<bf16> res(rh);
    DeviceBuffer<float> y32(size_t(c.tokens * ldy), 0xff); // NaN poison
    DeviceBuffer<bf16> y16(size_t(c.tokens * ldy), 0xff);
    DeviceGemvScratch scratch(c.n);

    kernels::GemvArgs a;
    a.w = w.view;
    a.x = x.get();
    a.x_lo = c.lo ? x_lo.get() : nullptr;
    a.n_tokens = c.tokens;
    a.x_stride = ldx;
    if (c.tail) {
        a.y_tail = yt.get();
        a.tail_row0 = tail0;
        a.y_tail_stride = ldt;
    }
    a.residual = c.residual ? res.get() : nullptr;
    a.residual_stride = ldy;
    a.y_fp32 = c.fp32_out;
    a.y = c.fp32_out ? static_cast<void*>(y32.get()) : static_cast<void*>(y16.get());
    a.y_stride = ldy;
    if (c.split) a.scratch = scratch.view();
    CUDA_OK(kernels::gemv(a, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(y32.guards_intact());
    CHECK(y16.guards_intact());
    CHECK(yt.guards_intact());
    const auto got32 = y32.download();
    const auto got16 = y16.download();
    const auto got_tail = yt.download();
    if (c.split) {
        const auto cnt = scratch.counters.download();
        CHECK(std::all_of(cnt.begin(), cnt.end(), [](uint32_t v) { return v == 0; }));
    }

    std::vector<int64_t> rows;
    if (c.n <= 1024) {
        for (int64_t r = 0; r < c.n; ++r) rows.push_back(r);
    } else {
        rows = {0, 1, 15, 16, 63, 64, c.n - 1, c.n - 17};
        for (int i = 0; i < 120; ++i) rows.push_back(rng.integer(0, int(c.n - 1)));
    }
    int bad = 0;
    double err_got = 0, err_hi_only = 0; // f32 outputs with lo: distance to the f32-x product
    for (int64_t r : rows) {
        const auto wr = decode_row(c.f, wbytes, c.n, c.k, r);
        for (int t = 0; t < c.tokens; ++t) {
            double ref = 0, mag = 0, ref32 = 0, ref_hi = 0;
            for (int64_t i = 0; i < c.k; ++i) {
                const size_t at = size_t(t * ldx + i);
                const double p = wr[i] * (double(to_f(xh[at])) + (c.lo ? to_f(xl[at]) : 0.0));
                ref += p;
                mag += std::fabs(p);
                ref32 += wr[i] * double(x32[at]);
                ref_hi += wr[i] * double(to_f(xh[at]));
            }
            const double resid = c.residual ? to_f(rh[size_t(t * ldy + r)]) : 0.0;
            double got, want, tol;
            if (r >= tail0) {
                got = got_tail[size_t(t * ldt + r - tail0)];
                want = ref;
                tol = 2e-5 * mag + 1e-30;
                err_got += std::fabs(got - ref32);
                err_hi_only += std::fabs(ref_hi - ref32);
            } else if (c.fp32_out) {
                got = got32[size_t(t * ldy + r)];
                err_got += std::fabs(got - resid - ref32);
                err_hi_only += std::fabs(ref_hi - ref32);
                want = ref + resid;
                tol = 2e-5 * mag + 1e-6 * std::fabs(resid) + 1e-30;
            } else {
                got = to_f(got16[size_t(t * ldy + r)]);
                want = c.residual ? double(round_bf16(double(round_bf16(ref)) + resid)) : ref;
                // With a residual, the fp32 sum may round to the bf16 neighbour of round(ref) (a sum
                // within 2e-5 * mag of a rounding boundary) before the add: one more ulp of it.
                tol = std::ldexp(std::fabs(want), -7) + 2e-5 * mag + 1e-30 +
                      (c.residual ? std::ldexp(std::fabs(double(round_bf16(ref))), -7) : 0.0);
            }
            if (!(std::fabs(got - want) <= tol) && bad++ < 5)
                FAIL_CHECK("row " << r << " token " << t << " got " << got << " want " << want << " tol " << tol);
        }
    }
    CHECK(bad == 0);
    // The low halves count: the result is far closer to the f32-x product than bf16 x alone gets.
    if (c.lo && (c.fp32_out || c.tail) && err_hi_only > 0) CHECK(err_got < 0.05 * err_hi_only);
    // Every element of every token row was written (no NaN poison left), the padding was not; the
    // rows that went to y_tail were not written to y.
    for (int t = 0; t < c.tokens; ++t) {
        for (int64_t r = 0; r < ldy; ++r) {
            const float v = c.fp32_out ? got32[size_t(t * ldy + r)] : to_f(got16[size_t(t * ldy + r)]);
            if ((r < tail0) == std::isnan(v) && bad++ < 5) FAIL_CHECK("element " << t << "," << r << " = " << v);
        }
        for (int64_t r = 0; c.tail && r < ldt; ++r)
            if ((r < c.n - tail0) == std::isnan(got_tail[size_t(t * ldt + r)]) && bad++ < 5)
                FAIL_CHECK("tail element " << t << "," << r);
    }
    CHECK(bad == 0);
}

} // namespace

const WeightFormat kAllFormats[] = {WeightFormat::Bf16,      WeightFormat::Fp8E4m3RowBf16, WeightFormat::Q4G64Fp16,
                                    WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16,      WeightFormat::Q8G32Fp16};

TEST_CASE("gemv matches an fp64 reference on edge shapes", "[gemv]") {
    require_gpu();
    uint64_t seed = 1;
    for (WeightFormat f : kAllFormats)
        for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 16}, {17, 48}, {64, 128}, {100, 1040}, {129, 4112}, {48, 5120}})
            for (int tokens : {1, 3, 8})
                for (bool split : {false, true})
                    for (bool tiled : {false, true})
                        if (!tiled || kernels::gemv_has_tiled_layout(f))
                            run_case({f, n, k, tokens, (seed % 2) == 0, (seed % 3) == 0, split, tiled}, seed++);
}

TEST_CASE("gemv: low halves of x and an f32 row tail, every tiled format, 1..8 tokens", "[gemv]") {
    require_gpu();
    uint64_t seed = 5000;
    for (WeightFormat f : {WeightFormat::Bf16, WeightFormat::Fp8E4m3RowBf16, WeightFormat::Q4G64Fp16,
                           WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16, WeightFormat::Q8G32Fp16}) {
        for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{17, 48}, {100, 1040}})
            for (int tokens : {1, 4, 5, 8})
                for (bool split : {false, true}) {
                    run_case({f, n, k, tokens, true, false, split, true, true, false}, seed++);
                    run_case({f, n, k, tokens, false, (seed % 2) == 0, split, true, true, false}, seed++);
                    run_case({f, n, k, tokens, false, false, split, true, (seed % 2) == 0, true}, seed++);
                }
        // The 27B GDN input projection [q; k; v; z] bf16 + [a; b] f32 (q5/q6/q8: their host encoder is slow).
        for (int tokens : {1, 8}) {
            if (codec_format(f)) break;
            run_case({f, 16480, 5120, tokens, true, false, true, true, true, false}, seed++);
            run_case({f, 16480, 5120, tokens, false, false, true, true, true, true}, seed++);
        }
    }
    // The stored layout takes the tail but not x_lo.
    run_case({WeightFormat::Q4G64Fp16, 129, 4112, 3, true, false, true, false, false, true}, seed++);
    DeviceBuffer<uint8_t> w(kernels::weight_bytes(WeightFormat::Bf16, 16, 64), 0);
    DeviceBuffer<bf16> x(64), y(16);
    kernels::GemvArgs a;
    a.w = {WeightFormat::Bf16, w.get(), 16, 64};
    a.x = x.get();
    a.x_lo = x.get();
    a.y = y.get();
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("gemv: q5/q6/q8 sizes follow docs/ARTIFACT_FORMAT.md §3.2, their tiled sizes; the tiled layout refuses nvfp4", "[gemv]") {
    require_gpu();
    CHECK(kernels::weight_bytes(WeightFormat::Q5G64Fp16, 2, 130) == 528);
    CHECK(kernels::weight_bytes(WeightFormat::Q5G64Fp16, 7168, 5120) == 24084480);
    CHECK(kernels::weight_bytes(WeightFormat::Q6G64Fp16, 524288, 512) == 0x0C000000 + 524288 * 16);
    CHECK(kernels::weight_bytes(WeightFormat::Q8G32Fp16, 262144, 2048) == 0x20000000 + 262144 * 128);
    // 4 tiles x 8 units of 640 / 768-byte blocks, then 4 x 8 x 32 bytes of multipliers.
    CHECK(kernels::tiled_weight_bytes(WeightFormat::Q5G64Fp16, 64, 128) == 4 * 8 * 640 + 1024);
    CHECK(kernels::tiled_weight_bytes(WeightFormat::Q6G64Fp16, 50, 200) == 4 * 8 * 768 + 1024);
    // q8: 128 codes a row are 2 units of two groups, padded to 8 units of 1024 bytes; 64 bytes of
    // multipliers per tile and unit.
    CHECK(kernels::tiled_weight_bytes(WeightFormat::Q8G32Fp16, 64, 128) == 4 * 8 * 1024 + 4 * 8 * 64);
    for (WeightFormat f : {WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16, WeightFormat::Q8G32Fp16}) {
        const uint64_t shape[2] = {3, 200};
        CHECK(core::encode(core_format(f), shape, std::vector<float>(600, 0.5f)).size() == kernels::weight_bytes(f, 3, 200));
    }
    const WeightFormat f = WeightFormat::Nvfp4;
    CHECK(kernels::tiled_weight_bytes(f, 128, 128) == 0);
    DeviceBuffer<uint8_t> w(kernels::weight_bytes(f, 128, 128), 0);
    DeviceBuffer<bf16> x(128), y(128);
    CHECK(kernels::gemv_pack_tiled({f, w.get(), 128, 128}, y.get(), nullptr) == cudaErrorInvalidValue);
    kernels::GemvArgs a;
    a.w = {f, w.get(), 128, 128, kernels::WeightLayout::Tiled};
    a.x = x.get();
    a.y = y.get();
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("gemv matches an fp64 reference at the 27B and 35B-A3B layer shapes", "[gemv]") {
    require_gpu();
    uint64_t seed = 100;
    const std::vector<std::pair<int64_t, int64_t>> shapes = {
        {10240, 5120}, {6144, 5120}, {12288, 5120}, {1024, 5120}, {5120, 6144}, {17408, 5120}, {5120, 17408},
        {8192, 2048},  {512, 2048},  {2048, 512},   {4096, 2048}, {2048, 4096}, {256, 2048}};
    for (WeightFormat f : {WeightFormat::Bf16, WeightFormat::Fp8E4m3RowBf16, WeightFormat::Q4G64Fp16})
        for (auto [n, k] : shapes)
            for (bool tiled : {false, true}) {
                run_case({f, n, k, 8, false, true, true, tiled}, seed++);
                run_case({f, n, k, 1, true, false, true, tiled}, seed++);
            }
}

TEST_CASE("gemv: q5/q6/q8 at the 27B and 35B-A3B layer shapes, tiled and stored", "[gemv]") {
    require_gpu();
    uint64_t seed = 200;
    // A subset of the shapes (their host encoder is slower): the 27B mix's q5 value/z, down and
    // output, the 35B-A3B's; tiled as the runner calls it (x low halves), stored once.
    for (WeightFormat f : {WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16, WeightFormat::Q8G32Fp16})
        for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{6144, 5120}, {5120, 17408}, {512, 2048}, {2048, 4096}}) {
            run_case({f, n, k, 8, false, true, true}, seed++);
            run_case({f, n, k, 8, false, true, true, true, true}, seed++);
            run_case({f, n, k, 1, true, false, true, true, true}, seed++);
        }
}

TEST_CASE("gemv: nvfp4 (per-row divisors) matches an fp64 reference of the CPU codec's decoding", "[gemv]") {
    require_gpu();
    // docs/ARTIFACT_FORMAT.md §3.3 Ex1, with d_w per row
    CHECK(kernels::weight_bytes(WeightFormat::Nvfp4, 128, 64) == 4608 + 4 * 128);
    uint64_t seed = 300;
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{128, 64}, {256, 192}, {384, 1024}, {128, 5120}})
        for (int tokens : {1, 2, 5, 8})
            for (bool split : {false, true}) run_case({WeightFormat::Nvfp4, n, k, tokens, (seed % 2) == 0, (seed % 3) == 0, split}, seed++);
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{6144, 5120}, {5120, 17408}, {1024, 5120}}) {
        run_case({WeightFormat::Nvfp4, n, k, 8, false, true, true}, seed++);
        run_case({WeightFormat::Nvfp4, n, k, 1, true, false, true}, seed++);
    }
    DeviceBuffer<uint8_t> w(kernels::weight_bytes(WeightFormat::Nvfp4, 256, 128), 0);
    DeviceBuffer<bf16> x(128), y(256);
    kernels::GemvArgs a;
    a.w = {WeightFormat::Nvfp4, w.get(), 200, 128}; // n % 128 != 0
    a.x = x.get();
    a.y = y.get();
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
    a.w = {WeightFormat::Nvfp4, w.get(), 128, 96}; // k % 64 != 0
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("gemv: a batch of 8 equals 8 single-token calls bit for bit, graph replay equals eager", "[gemv]") {
    require_gpu();
    for (WeightFormat f : {WeightFormat::Bf16, WeightFormat::Fp8E4m3RowBf16, WeightFormat::Q4G64Fp16,
                           WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16, WeightFormat::Q8G32Fp16, WeightFormat::Nvfp4})
    for (int mode = 0; mode < 3; ++mode) // stored layout, tiled, tiled with low halves (2 passes at 8)
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{5120, 6144}, {2048, 4096}}) { // ring / register path (gemv.h)
        const bool tiled = mode > 0, lo = mode == 2;
        if (tiled && !kernels::gemv_has_tiled_layout(f)) continue;
        Rng rng(7);
        CaseWeight w(random_weight(f, n, k, 7), f, n, k, tiled);
        DeviceBuffer<bf16> x(rng.bf16s(size_t(8 * k), -2.f, 2.f)), x_lo(rng.bf16s(size_t(8 * k), -0.01f, 0.01f));
        DeviceBuffer<bf16> y_batch(size_t(8 * n)), y_single(size_t(8 * n)), y_graph(size_t(8 * n));
        DeviceGemvScratch scratch(n);
        kernels::GemvArgs a;
        a.w = w.view;
        a.x_stride = k;
        a.y_stride = n;
        a.scratch = scratch.view();
        REQUIRE(kernels::gemv_split_count(a.w, a.scratch) > 1);
        a.x = x.get();
        a.x_lo = lo ? x_lo.get() : nullptr;
        a.n_tokens = 8;
        a.y = y_batch.get();
        CUDA_OK(kernels::gemv(a, nullptr));
        for (int t = 0; t < 8; ++t) {
            a.x = x.get() + t * k;
            a.x_lo = lo ? x_lo.get() + t * k : nullptr;
            a.n_tokens = 1;
            a.y = y_single.get() + t * n;
            CUDA_OK(kernels::gemv(a, nullptr));
        }
        a.x = x.get();
        a.x_lo = lo ? x_lo.get() : nullptr;
        a.n_tokens = 8;
        a.y = y_graph.get();
        replay_graph([&](cudaStream_t stream) { CUDA_OK(kernels::gemv(a, stream)); }, 3);
        const auto b = y_batch.download(), s = y_single.download(), g = y_graph.download();
        INFO(fmt_name(f) << " tiled " << tiled << " lo " << lo << " n " << n << " k " << k);
        CHECK(std::memcmp(b.data(), s.data(), b.size() * sizeof(bf16)) == 0);
        CHECK(std::memcmp(b.data(), g.data(), b.size() * sizeof(bf16)) == 0);
    }
}

TEST_CASE("gemv refuses shapes it cannot run", "[gemv]") {
    require_gpu();
    DeviceBuffer<uint8_t> w(4096);
    DeviceBuffer<bf16> x(64), y(64);
    kernels::GemvArgs a;
    a.w = {WeightFormat::Bf16, w.get(), 4, 24}; // k % 16 != 0
    a.x = x.get();
    a.y = y.get();
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
    a.w.k = 32;
    a.n_tokens = 9;
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
}
