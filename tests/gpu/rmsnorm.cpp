// ninfer tests - offset RMSNorm (bf16, with and without the fused residual add; the runner's f32
// residual-stream add_rmsnorm with its f32 copy and low halves), against fp64.
#include "gpu_test_util.h"
#include "ninfer/kernels/rmsnorm.h"
#include "ninfer/kernels/runner_ops.h"

using namespace ninfer;
using namespace ninfer::test;

TEST_CASE("rmsnorm_offset matches fp64 over edge and model dims", "[rmsnorm]") {
    require_gpu();
    Rng rng(3);
    for (int dim : {8, 128, 256, 2048, 5120, 6144, 17408})
        for (int rows : {1, 3, 8, 24 * 8})
            for (bool add : {false, true}) {
                INFO("dim " << dim << " rows " << rows << " add " << add);
                const int64_t ld = dim + 8;
                const auto xh = rng.bf16s(size_t(rows * ld), -3.f, 3.f);
                const auto ah = rng.bf16s(size_t(rows * ld), -3.f, 3.f);
                const auto wh = rng.bf16s(size_t(dim), -0.5f, 0.5f);
                DeviceBuffer<bf16> x(xh), ad(ah), w(wh), h(size_t(rows * ld), 0xff), y(size_t(rows * ld), 0xff);
                kernels::RmsNormArgs a;
                a.x = x.get();
                a.x_stride = ld;
                a.add = add ? ad.get() : nullptr;
                a.h_out = add ? h.get() : nullptr;
                a.weight = w.get();
                a.y = y.get();
                a.y_stride = ld;
                a.n_rows = rows;
                a.dim = dim;
                CUDA_OK(kernels::rmsnorm_offset(a, nullptr));
                CUDA_OK(cudaDeviceSynchronize());
                CHECK(y.guards_intact());
                CHECK(h.guards_intact());
                const auto yg = y.download(), hg = h.download();
                int bad = 0;
                for (int r = 0; r < rows; ++r) {
                    std::vector<double> hv(dim);
                    double ss = 0;
                    for (int i = 0; i < dim; ++i) {
                        const size_t idx = size_t(r * ld + i);
                        hv[i] = add ? round_bf16(double(to_f(xh[idx])) + to_f(ah[idx])) : to_f(xh[idx]);
                        if (add && to_f(hg[idx]) != float(hv[i]) && bad++ < 5) FAIL_CHECK("h " << r << "," << i);
                        ss += hv[i] * hv[i];
                    }
                    const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
                    for (int i = 0; i < dim; ++i) {
                        const double want = hv[i] * inv * (1.0 + to_f(wh[i]));
                        const double got = to_f(yg[size_t(r * ld + i)]);
                        if (!(std::fabs(got - want) <= std::ldexp(std::fabs(want), -7) + 1e-6) && bad++ < 5)
                            FAIL_CHECK("y " << r << "," << i << " got " << got << " want " << want);
                    }
                    for (int i = dim; i < ld; ++i)
                        if (!std::isnan(to_f(yg[size_t(r * ld + i)])) && bad++ < 5) FAIL_CHECK("padding written");
                }
                CHECK(bad == 0);
            }
}

// The CUDA runner's f32 residual stream norm (runner_ops.h add_rmsnorm): the register path (dim a
// multiple of 4) and the strided fallback, with y32 and the low halves y_lo.
TEST_CASE("add_rmsnorm on the f32 residual matches fp64, with f32 copy and low halves", "[rmsnorm]") {
    require_gpu();
    Rng rng(4);
    for (int dim : {6, 64, 2048, 5120, 16384, 17000})
        for (int rows : {1, 8})
            for (bool add : {false, true}) {
                INFO("dim " << dim << " rows " << rows << " add " << add);
                const int64_t ld = dim + 4 - dim % 4 + 8;
                std::vector<float> xh(static_cast<size_t>(rows * ld)), ah(xh.size()), wh(static_cast<size_t>(dim));
                for (float& v : xh) v = rng.uniform(-3.f, 3.f);
                for (float& v : ah) v = rng.uniform(-3.f, 3.f);
                for (float& v : wh) v = rng.uniform(-0.5f, 0.5f);
                DeviceBuffer<float> x(xh), ad(ah), w(wh), y32(size_t(rows * ld), 0xff);
                DeviceBuffer<bf16> y(size_t(rows * ld), 0xff), ylo(size_t(rows * ld), 0xff);
                CUDA_OK(kernels::add_rmsnorm(x.get(), ld, add ? ad.get() : nullptr, ld, w.get(), y.get(), ld, y32.get(),
                                             rows, dim, 1e-6f, nullptr, ylo.get()));
                CUDA_OK(cudaDeviceSynchronize());
                CHECK(y.guards_intact());
                CHECK(y32.guards_intact());
                CHECK(ylo.guards_intact());
                const auto xg = x.download(), y32g = y32.download();
                const auto yg = y.download(), ylg = ylo.download();
                int bad = 0;
                for (int r = 0; r < rows; ++r) {
                    std::vector<double> hv(static_cast<size_t>(dim));
                    double ss = 0;
                    for (int i = 0; i < dim; ++i) {
                        const size_t idx = size_t(r * ld + i);
                        hv[size_t(i)] = double(add ? xh[idx] + ah[idx] : xh[idx]);
                        if (std::fabs(xg[idx] - hv[size_t(i)]) > 1e-6 && bad++ < 5) FAIL_CHECK("x " << r << "," << i);
                        ss += hv[size_t(i)] * hv[size_t(i)];
                    }
                    const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
                    for (int i = 0; i < dim; ++i) {
                        const size_t idx = size_t(r * ld + i);
                        const double want = hv[size_t(i)] * inv * (1.0 + wh[size_t(i)]);
                        // y = bf16(v), y_lo = bf16(v - y): together v to ~16 bits.
                        const double got32 = y32g[idx], hi = to_f(yg[idx]), lo = to_f(ylg[idx]);
                        if (!(std::fabs(got32 - want) <= 1e-5 * std::fabs(want) + 1e-6) ||
                            hi != double(round_bf16(got32)) || lo != double(round_bf16(got32 - hi)) ||
                            !(std::fabs(hi + lo - want) <= std::ldexp(std::fabs(want), -15) + 1e-6)) {
                            if (bad++ < 5)
                                FAIL_CHECK("y " << r << "," << i << " want " << want << " y32 " << got32 << " hi " << hi
                                                << " lo " << lo);
                        }
                    }
                    for (int i = dim; i < ld; ++i)
                        if (!std::isnan(y32g[size_t(r * ld + i)]) && bad++ < 5) FAIL_CHECK("padding written");
                }
                CHECK(bad == 0);
            }
}
