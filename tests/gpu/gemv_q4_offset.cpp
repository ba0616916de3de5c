// ninfer tests - the q4 offset GEMV path (gemv.h x_q4_offset: codes fed as 136 + q, each group's sum
// started at -136 * X_g) and its producers (add_rmsnorm, swiglu): an fp64 reference at the 27B shapes
// on every kernel path, 1..8 tokens, with and without x low halves; batch 8 = 8 singles and graph =
// eager bit for bit; the producers' offsets equal the host's f64 sums of what they wrote.
#include "ninfer/kernels/gemv.h"
#include "ninfer/kernels/runner_ops.h"
#include "weights_util.h"

#include <limits>

using namespace ninfer;
using namespace ninfer::test;
using kernels::WeightFormat;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// gemv.h x_q4_offset of rows of bf16 values (row stride ld) with row stride `stride`; the floats
// past gemv_q4_offset_per_row(k) are NaN, so a kernel that reads them poisons its result.
std::vector<float> host_offsets(const std::vector<bf16>& x, int rows, int64_t ld, int64_t k, int64_t stride) {
    std::vector<float> o(size_t(rows * stride), kNaN);
    for (int t = 0; t < rows; ++t)
        for (int64_t g = 0; g < kernels::gemv_q4_offset_per_row(k); ++g) {
            double s = 0;
            for (int64_t c = 64 * g; c < std::min(k, 64 * g + 64); ++c) s += to_f(x[size_t(t * ld + c)]);
            o[size_t(t * stride + g)] = float(kernels::kGemvQ4OffsetScale * s);
        }
    return o;
}

// Every path of the tiled q4 GEMV (gemv.h gemv_set_tiled_pipeline): stages 0 = the register kernel.
struct Path {
    int stages;
    bool stage_x;
};
const Path kPaths[] = {{0, false}, {2, true}, {2, false}, {3, true}, {4, false}};

struct OffsetCase {
    int64_t n, k;
    int tokens;
    bool lo, split, fp32_out, residual;
};

// Runs one case on the current path with host-made offsets (or `zero_offsets`: all offsets 0, which
// must NOT match the reference: the proof that the kernel took the offset path); returns the number
// of elements outside 2e-5 * sum|w x| (gemv.cpp's tolerance) of the fp64 reference.
int run_offset_case(const OffsetCase& c, const CaseWeight& w, const std::vector<uint8_t>& wbytes, uint64_t seed,
                    bool zero_offsets = false) {
    INFO("n=" << c.n << " k=" << c.k << " tokens=" << c.tokens << " lo=" << c.lo << " split=" << c.split);
    Rng rng(seed);
    const int64_t ldx = c.k + 8, ldy = (c.n + 7) / 8 * 8 + 8, lds = kernels::gemv_q4_offset_per_row(c.k) + 8;
    std::vector<bf16> xh(size_t(c.tokens * ldx)), xl(xh.size());
    for (size_t i = 0; i < xh.size(); ++i) { // the runner's normed rows: bf16 high + low halves of f32
        const float v = rng.uniform(-2.f, 2.f);
        xh[i] = to_bf16(v);
        xl[i] = to_bf16(v - to_f(xh[i]));
    }
    auto oh = host_offsets(xh, c.tokens, ldx, c.k, lds), ol = host_offsets(xl, c.tokens, ldx, c.k, lds);
    if (zero_offsets)
        for (float& v : oh) v = 0.f;
    DeviceBuffer<bf16> x(xh), x_lo(xl), res(rng.bf16s(size_t(c.tokens * ldy), -4.f, 4.f));
    DeviceBuffer<float> ofs(oh), ofs_lo(ol), y32(size_t(c.tokens * ldy), 0xff);
    DeviceBuffer<bf16> y16(size_t(c.tokens * ldy), 0xff);
    DeviceBuffer<float> partials(kernels::gemv_scratch_floats(c.n));
    DeviceBuffer<uint32_t> counters(kernels::gemv_scratch_counters(c.n), 0);
    kernels::GemvArgs a;
    a.w = w.view;
    a.x = x.get();
    a.x_lo = c.lo ? x_lo.get() : nullptr;
    a.x_q4_offset = ofs.get();
    a.x_lo_q4_offset = c.lo ? ofs_lo.get() : nullptr;
    a.q4_offset_stride = lds;
    a.n_tokens = c.tokens;
    a.x_stride = ldx;
    a.residual = c.residual ? res.get() : nullptr;
    a.residual_stride = ldy;
    a.y_fp32 = c.fp32_out;
    a.y = c.fp32_out ? static_cast<void*>(y32.get()) : static_cast<void*>(y16.get());
    a.y_stride = ldy;
    if (c.split) a.scratch = {partials.get(), partials.size(), counters.get(), counters.size()};
    CUDA_OK(kernels::gemv(a, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(y32.guards_intact());
    CHECK(y16.guards_intact());
    const auto got32 = y32.download();
    const auto got16 = y16.download();
    const auto rh = res.download();
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < std::min<int64_t>(c.n, 48); ++r) rows.push_back(r);
    for (int i = 0; i < 48 && c.n > 48; ++i) rows.push_back(rng.integer(48, int(c.n - 1)));
    int bad = 0;
    for (int64_t r : rows) {
        const auto wr = decode_row(WeightFormat::Q4G64Fp16, wbytes, c.n, c.k, r);
        for (int t = 0; t < c.tokens; ++t) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < c.k; ++i) {
                const size_t at = size_t(t * ldx + i);
                const double p = wr[i] * (double(to_f(xh[at])) + (c.lo ? double(to_f(xl[at])) : 0.0));
                ref += p;
                mag += std::fabs(p);
            }
            const double resid = c.residual ? to_f(rh[size_t(t * ldy + r)]) : 0.0;
            const double got = c.fp32_out ? double(got32[size_t(t * ldy + r)]) : double(to_f(got16[size_t(t * ldy + r)]));
            const GemvExpect e = gemv_expect(ref, mag, resid, c.fp32_out, c.residual); // gemv.cpp's tolerance
            if (!(std::fabs(got - e.want) <= e.tol) && bad++ < 3 && !zero_offsets)
                FAIL_CHECK("row " << r << " token " << t << " got " << got << " want " << e.want << " tol " << e.tol);
        }
    }
    return bad;
}

} // namespace

TEST_CASE("gemv_q4_offset: every tiled q4 path matches an fp64 reference, 27B and edge shapes, 1..8 tokens",
          "[gemv_q4_offset]") {
    require_gpu();
    uint64_t seed = 9000;
    // 27B: MLP gate+up, down, GDN [q;k;v;z;a;b], attention [q;gate;k;v], out/o; then edge shapes
    // (k % 64 != 0: a partial last group; k < 128; n not a multiple of 16).
    const std::vector<std::pair<int64_t, int64_t>> shapes = {{34816, 5120}, {5120, 17408}, {16480, 5120}, {14336, 5120},
                                                             {5120, 6144},  {17, 48},      {100, 1040},  {129, 4112}};
    for (const auto& [n, k] : shapes) {
        const auto wbytes = random_weight(WeightFormat::Q4G64Fp16, n, k, seed);
        const CaseWeight w(wbytes, WeightFormat::Q4G64Fp16, n, k, true);
        const bool big = n * k > (int64_t(1) << 26);
        for (const Path& path : kPaths) {
            kernels::gemv_set_tiled_pipeline(path.stages, -1, path.stage_x);
            INFO("stages " << path.stages << " stage_x " << path.stage_x);
            for (int tokens = 1; tokens <= 8; ++tokens)
                for (bool lo : {false, true}) {
                    if (big && tokens != 1 && tokens != 4 && tokens != 5 && tokens != 8) continue; // time
                    const OffsetCase c{n, k, tokens, lo, (seed % 4) != 0, (seed % 2) == 0, (seed % 3) == 0};
                    CHECK(run_offset_case(c, w, wbytes, seed++) == 0);
                }
        }
        // Offsets of zero leave 136 * X_g in every group: far outside the tolerance.
        kernels::gemv_restore_tiled_pipeline();
        CHECK(run_offset_case({n, k, 3, true, true, true, false}, w, wbytes, seed++, /*zero_offsets=*/true) > 0);
    }
    kernels::gemv_restore_tiled_pipeline();
}

TEST_CASE("gemv_q4_offset: a batch of 8 equals 8 single-token calls bit for bit, graph replay equals eager",
          "[gemv_q4_offset]") {
    require_gpu();
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{5120, 6144}, {2048, 4096}}) // ring / register kernel
        for (bool lo : {false, true}) {
            Rng rng(11);
            const CaseWeight w(random_weight(WeightFormat::Q4G64Fp16, n, k, 11), WeightFormat::Q4G64Fp16, n, k, true);
            const auto xh = rng.bf16s(size_t(8 * k), -2.f, 2.f), xl = rng.bf16s(size_t(8 * k), -0.01f, 0.01f);
            const int64_t lds = kernels::gemv_q4_offset_per_row(k);
            DeviceBuffer<bf16> x(xh), x_lo(xl);
            DeviceBuffer<float> ofs(host_offsets(xh, 8, k, k, lds)), ofs_lo(host_offsets(xl, 8, k, k, lds));
            DeviceBuffer<bf16> y_batch(size_t(8 * n)), y_single(size_t(8 * n)), y_graph(size_t(8 * n));
            DeviceBuffer<float> partials(kernels::gemv_scratch_floats(n));
            DeviceBuffer<uint32_t> counters(kernels::gemv_scratch_counters(n), 0);
            kernels::GemvArgs a;
            a.w = w.view;
            a.x_stride = k;
            a.y_stride = n;
            a.q4_offset_stride = lds;
            a.scratch = {partials.get(), partials.size(), counters.get(), counters.size()};
            REQUIRE(kernels::gemv_split_count(a.w, a.scratch) > 1);
            auto tokens_from = [&](int t, int count, bf16* y) {
                a.x = x.get() + t * k;
                a.x_lo = lo ? x_lo.get() + t * k : nullptr;
                a.x_q4_offset = ofs.get() + t * lds;
                a.x_lo_q4_offset = lo ? ofs_lo.get() + t * lds : nullptr;
                a.n_tokens = count;
                a.y = y + t * n;
            };
            tokens_from(0, 8, y_batch.get());
            CUDA_OK(kernels::gemv(a, nullptr));
            for (int t = 0; t < 8; ++t) {
                tokens_from(t, 1, y_single.get());
                CUDA_OK(kernels::gemv(a, nullptr));
            }
            cudaStream_t stream;
            CUDA_OK(cudaStreamCreate(&stream));
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            tokens_from(0, 8, y_graph.get());
            CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
            CUDA_OK(kernels::gemv(a, stream));
            CUDA_OK(cudaStreamEndCapture(stream, &graph));
            CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
            for (int i = 0; i < 2; ++i) CUDA_OK(cudaGraphLaunch(exec, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
            cudaStreamDestroy(stream);
            const auto b = y_batch.download(), s = y_single.download(), g = y_graph.download();
            INFO("n " << n << " k " << k << " lo " << lo);
            CHECK(std::memcmp(b.data(), s.data(), b.size() * sizeof(bf16)) == 0);
            CHECK(std::memcmp(b.data(), g.data(), b.size() * sizeof(bf16)) == 0);
        }
}

TEST_CASE("gemv_q4_offset: other formats ignore the offsets; malformed offsets are refused", "[gemv_q4_offset]") {
    require_gpu();
    const int64_t n = 256, k = 1024, lds = kernels::gemv_q4_offset_per_row(k);
    Rng rng(5);
    const auto xh = rng.bf16s(size_t(2 * k), -2.f, 2.f);
    DeviceBuffer<bf16> x(xh), y0(size_t(2 * n)), y1(size_t(2 * n));
    DeviceBuffer<float> ofs(host_offsets(xh, 2, k, k, lds));
    const CaseWeight fp8(random_weight(WeightFormat::Fp8E4m3RowBf16, n, k, 5), WeightFormat::Fp8E4m3RowBf16, n, k, true);
    kernels::GemvArgs a;
    a.w = fp8.view;
    a.x = x.get();
    a.x_stride = k;
    a.n_tokens = 2;
    a.y = y0.get();
    a.y_stride = n;
    CUDA_OK(kernels::gemv(a, nullptr));
    a.x_q4_offset = ofs.get();
    a.q4_offset_stride = lds;
    a.y = y1.get();
    CUDA_OK(kernels::gemv(a, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto r0 = y0.download(), r1 = y1.download();
    CHECK(std::memcmp(r0.data(), r1.data(), r0.size() * sizeof(bf16)) == 0);

    const CaseWeight q4(random_weight(WeightFormat::Q4G64Fp16, n, k, 6), WeightFormat::Q4G64Fp16, n, k, true);
    a.w = q4.view;
    a.x_lo = x.get(); // low halves without their offsets
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
    a.x_lo = nullptr;
    a.q4_offset_stride = lds - 8; // shorter than a row of offsets
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
    a.q4_offset_stride = lds + 4; // not a multiple of 8
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
    a.q4_offset_stride = lds;
    a.x_q4_offset = ofs.get() + 1; // not 16-byte aligned
    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("gemv_q4_offset: add_rmsnorm and swiglu write the f64 group sums of what they wrote, same rows",
          "[gemv_q4_offset]") {
    require_gpu();
    Rng rng(21);
    // 5120: the 27B hidden width (the norm's register path); 17408: its MLP width (the norm's strided
    // fallback, > 4096 float4); 5000: a partial last group; 1002: the fallback with dim % 4 != 0.
    for (int dim : {5120, 17408, 5000, 1002})
        for (int rows : {1, 3, 8}) {
            INFO("dim " << dim << " rows " << rows);
            const int64_t ld = (dim + 7) / 8 * 8 + 8, lds = kernels::gemv_q4_offset_per_row(dim) + 8;
            std::vector<float> xv(size_t(rows * ld)), av(xv.size()), wv(static_cast<size_t>(dim)), gu(size_t(rows * 2 * ld));
            for (float& v : xv) v = rng.uniform(-3.f, 3.f);
            for (float& v : av) v = rng.uniform(-3.f, 3.f);
            for (float& v : wv) v = rng.uniform(-0.5f, 0.5f);
            for (float& v : gu) v = rng.uniform(-4.f, 4.f);
            std::vector<uint8_t> rows_without; // the bytes of every output row, without offsets
            for (int with : {0, 1}) { // without, then with the offsets: the rows must not change
                DeviceBuffer<float> x(xv), add(av), w(wv), y32(size_t(rows * ld), 0xff), in(gu);
                DeviceBuffer<float> ofs(size_t(rows * lds), 0xff), ofs_lo(size_t(rows * lds), 0xff);
                DeviceBuffer<bf16> y(size_t(rows * ld), 0xff), y_lo(size_t(rows * ld), 0xff);
                DeviceBuffer<float> ofs2(size_t(rows * lds), 0xff), ofs2_lo(size_t(rows * lds), 0xff);
                DeviceBuffer<bf16> act(size_t(rows * ld), 0xff), act_lo(size_t(rows * ld), 0xff);
                DeviceBuffer<float> act32(size_t(rows * ld), 0xff);
                CUDA_OK(kernels::add_rmsnorm(x.get(), ld, add.get(), ld, w.get(), y.get(), ld, y32.get(), rows, dim, 1e-6f,
                                             nullptr, y_lo.get(), with ? ofs.get() : nullptr,
                                             with ? ofs_lo.get() : nullptr, lds));
                CUDA_OK(kernels::swiglu(in.get(), 2 * ld, dim, act.get(), act32.get(), ld, rows, nullptr, act_lo.get(),
                                        with ? ofs2.get() : nullptr, with ? ofs2_lo.get() : nullptr, lds));
                CUDA_OK(cudaDeviceSynchronize());
                for (const auto* b : {&ofs, &ofs_lo, &ofs2, &ofs2_lo, &y32, &act32}) CHECK(b->guards_intact());
                std::vector<uint8_t> bytes;
                for (const auto* b : {&y, &y_lo, &act, &act_lo}) {
                    const auto h = b->download();
                    bytes.insert(bytes.end(), reinterpret_cast<const uint8_t*>(h.data()),
                                 reinterpret_cast<const uint8_t*>(h.data() + h.size()));
                }
                for (const auto* b : {&y32, &act32}) {
                    const auto h = b->download();
                    bytes.insert(bytes.end(), reinterpret_cast<const uint8_t*>(h.data()),
                                 reinterpret_cast<const uint8_t*>(h.data() + h.size()));
                }
                if (!with) {
                    rows_without = bytes;
                    continue;
                }
                CHECK(bytes == rows_without);
                // Offsets: exactly the host's f64 sums of the device's bf16 rows, then zero padding;
                // the stride's tail past gemv_q4_offset_per_row stays untouched (NaN poison).
                const int64_t per = kernels::gemv_q4_offset_per_row(dim);
                int bad = 0;
                const std::pair<const DeviceBuffer<bf16>*, const DeviceBuffer<float>*> pairs[] = {
                    {&y, &ofs}, {&y_lo, &ofs_lo}, {&act, &ofs2}, {&act_lo, &ofs2_lo}};
                for (const auto& [rows_buf, ofs_buf] : pairs) {
                    const auto want = host_offsets(rows_buf->download(), rows, ld, dim, lds);
                    const auto got = ofs_buf->download();
                    for (int t = 0; t < rows; ++t)
                        for (int64_t g = 0; g < lds; ++g) {
                            const float gv = got[size_t(t * lds + g)], wv2 = want[size_t(t * lds + g)];
                            const bool ok = g < per ? std::memcmp(&gv, &wv2, 4) == 0 : std::isnan(gv);
                            if (!ok && bad++ < 5) FAIL_CHECK("row " << t << " group " << g << " got " << gv << " want " << wv2);
                        }
                }
                CHECK(bad == 0);
            }
        }
}
