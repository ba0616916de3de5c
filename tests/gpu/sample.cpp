// ninfer tests - GPU sampling: greedy argmax with ties, top-k/top-p/min-p draws against fp64.
#include "gpu_test_util.h"
#include "core/engine/sampling.h"
#include "ninfer/kernels/sample.h"

#include <algorithm>
#include <numeric>

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct HostChoice {
    int id;
    double margin; // distance of the draw target from the nearest cumulative boundary (relative)
};

HostChoice host_sample(const std::vector<float>& l, const kernels::SampleRowParams& p) {
    const int V = int(l.size());
    std::vector<int> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return l[a] > l[b]; });
    const int k = std::min(V, p.top_k <= 0 || p.top_k > kernels::kSampleMaxTopK ? kernels::kSampleMaxTopK : p.top_k);
    std::vector<double> pr(k);
    const float inv_t = 1.f / p.temperature;
    for (int i = 0; i < k; ++i) pr[i] = std::exp(double(l[idx[i]] * inv_t) - double(l[idx[0]] * inv_t));
    const double kept = std::accumulate(pr.begin(), pr.end(), 0.0);
    int n_keep = k;
    if (p.top_p < 1.f) {
        double run = 0;
        for (int i = 0; i < k; ++i)
            if ((run += pr[i] / kept) >= double(p.top_p)) { n_keep = i + 1; break; }
    }
    if (p.min_p > 0.f) {
        int m = 1;
        while (m < n_keep && pr[m] >= p.min_p) ++m;
        n_keep = m;
    }
    const double mass = std::accumulate(pr.begin(), pr.begin() + n_keep, 0.0);
    const double target = kernels::sample_uniform(p.seed, p.step) * mass;
    double run = 0, margin = 1;
    int chosen = n_keep - 1;
    for (int i = 0; i < n_keep; ++i) {
        run += pr[i];
        margin = std::min(margin, std::fabs(run - target) / mass);
        if (target < run) { chosen = i; break; }
    }
    return {idx[chosen], margin};
}

} // namespace

TEST_CASE("sampling: greedy argmax and seeded top-k/top-p/min-p draws", "[sample]") {
    require_gpu();
    Rng rng(31);
    for (int V : {1, 7, 1000, 248320}) {
        const int rows = 8;
        std::vector<float> logits(size_t(rows) * V);
        for (auto& v : logits) v = rng.uniform(-8.f, 8.f);
        // Ties: row 1 has its maximum twice; the lower id must win.
        if (V >= 7) {
            logits[size_t(V) + 3] = 20.f;
            logits[size_t(V) + 5] = 20.f;
        }
        std::vector<kernels::SampleRowParams> prm(rows);
        for (int r = 0; r < rows; ++r) {
            prm[r].seed = 1000 + r;
            prm[r].step = uint64_t(r * 7);
            if (r >= 2) {
                prm[r].temperature = rng.uniform(0.3f, 1.5f);
                prm[r].top_k = std::vector<int>{1, 5, 40, 1024, 0, 300}[r - 2];
                prm[r].top_p = r % 2 ? 0.9f : 1.f;
                prm[r].min_p = r == 4 ? 0.05f : 0.f;
            }
        }
        DeviceBuffer<float> ld(logits);
        DeviceBuffer<kernels::SampleRowParams> pd(prm);
        DeviceBuffer<int32_t> ids(rows, 0xff);
        DeviceBuffer<float> lp(rows, 0xff);
        CUDA_OK(kernels::sample({ld.get(), V, V, rows, pd.get(), ids.get(), lp.get()}, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        const auto ig = ids.download();
        const auto lg = lp.download();
        CHECK(ids.guards_intact());
        for (int r = 0; r < rows; ++r) {
            INFO("vocab " << V << " row " << r);
            const std::vector<float> row(logits.begin() + size_t(r) * V, logits.begin() + size_t(r + 1) * V);
            const double mx = *std::max_element(row.begin(), row.end());
            double z = 0;
            for (float v : row) z += std::exp(double(v) - mx);
            int want;
            if (prm[r].temperature <= 0.f) {
                want = int(std::max_element(row.begin(), row.end()) - row.begin()); // first maximum
                CHECK(ig[r] == want);
            } else {
                const auto hc = host_sample(row, prm[r]);
                want = hc.id;
                if (hc.margin > 1e-5) CHECK(ig[r] == want);
                // core's CPU sampler is the reference; it has no top-k cap.
                if (hc.margin > 1e-5 && prm[r].top_k > 0 && prm[r].top_k <= kernels::kSampleMaxTopK) {
                    core::SamplingParams sp;
                    sp.temperature = prm[r].temperature;
                    sp.top_k = prm[r].top_k;
                    sp.top_p = prm[r].top_p;
                    sp.min_p = prm[r].min_p;
                    sp.seed = prm[r].seed;
                    sp.step = prm[r].step;
                    std::vector<float> cpu_row = row;
                    CHECK(core::sample_token(cpu_row, sp, {}) == ig[r]);
                }
            }
            REQUIRE(ig[r] >= 0);
            REQUIRE(ig[r] < V);
            CHECK(std::fabs(lg[r] - (row[ig[r]] - mx - std::log(z))) < 1e-3);
        }
    }
}

TEST_CASE("sampling: draw frequencies follow the top-k distribution", "[sample]") {
    require_gpu();
    const int V = 50, rows = 4000;
    std::vector<float> base(V);
    Rng rng(5);
    for (auto& v : base) v = rng.uniform(-2.f, 2.f);
    std::vector<float> logits;
    std::vector<kernels::SampleRowParams> prm(rows);
    for (int r = 0; r < rows; ++r) {
        logits.insert(logits.end(), base.begin(), base.end());
        prm[r] = {1.0f, 4, 1.f, 0.f, 99, uint64_t(r)};
    }
    DeviceBuffer<float> ld(logits);
    DeviceBuffer<kernels::SampleRowParams> pd(prm);
    DeviceBuffer<int32_t> ids(rows);
    CUDA_OK(kernels::sample({ld.get(), V, V, rows, pd.get(), ids.get(), nullptr}, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto ig = ids.download();
    std::vector<int> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return base[a] > base[b]; });
    double z = 0;
    for (int i = 0; i < 4; ++i) z += std::exp(double(base[idx[i]]));
    for (int i = 0; i < 4; ++i) {
        const double p = std::exp(double(base[idx[i]])) / z;
        const double f = double(std::count(ig.begin(), ig.end(), idx[i])) / rows;
        INFO("rank " << i << " p " << p << " freq " << f);
        CHECK(std::fabs(f - p) < 4 * std::sqrt(p * (1 - p) / rows) + 1e-3);
    }
    CHECK(std::count_if(ig.begin(), ig.end(), [&](int id) { return std::find(idx.begin(), idx.begin() + 4, id) == idx.begin() + 4; }) == 0);
}
