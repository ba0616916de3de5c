// ninfer tests - offset RMSNorm with and without the fused residual add, against fp64.
#include "gpu_test_util.h"
#include "ninfer/kernels/rmsnorm.h"

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
