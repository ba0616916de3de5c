// ninfer tests - GPU sampler time per decode step (vocab 248,320, batch 1 and 8): printed as RESULT lines.
#include "sample_buffers.h"

#include <algorithm>

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Config {
    const char* name;
    bool draw;
    int n_top;
};

// Median microseconds of one replay of a graph holding one kernels::sample call.
double time_sample(const kernels::SampleArgs& args, int replays) {
    SampleGraph g(args);
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    g.replay(10); // warm-up
    std::vector<float> us;
    for (int i = 0; i < replays; ++i) {
        CUDA_OK(cudaEventRecord(a, g.stream));
        g.replay(1);
        CUDA_OK(cudaEventRecord(b, g.stream));
        CUDA_OK(cudaEventSynchronize(b));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, a, b));
        us.push_back(ms * 1000.f);
    }
    std::sort(us.begin(), us.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return us[us.size() / 2];
}

} // namespace

TEST_CASE("sampling: time per step at vocab 248,320", "[sample_timing]") {
    require_gpu();
    const int V = 248320, max_rows = 8;
    Rng rng(3);
    // "peaked": N(0, 2.5) with six favourites at 12..18, like a model's logits; "uniform": U(-8, 8),
    // a flat head that spreads top_p 0.95 over ~30k candidates (the sampler's slow case).
    for (const char* shape : {"peaked", "uniform"}) {
        std::vector<float> logits(size_t(max_rows) * V);
        std::normal_distribution<float> normal(0.f, 2.5f);
        for (float& v : logits) v = shape[0] == 'p' ? normal(rng.gen) : rng.uniform(-8.f, 8.f);
        if (shape[0] == 'p')
            for (int r = 0; r < max_rows; ++r)
                for (int j = 0; j < 6; ++j) logits[size_t(r) * V + size_t(rng.integer(0, V - 1))] = rng.uniform(12.f, 18.f);
        SampleBuffers buf(logits, max_rows, V);
        std::vector<int32_t> history(size_t(max_rows) * 200);
        for (auto& t : history) t = rng.integer(0, V - 1);
        DeviceBuffer<int32_t> hd(history);
        for (int r = 0; r < max_rows; ++r)
            CUDA_OK(kernels::sample_counts_add(buf.counts.get() + size_t(r) * V, hd.get() + r * 200, 200, V, nullptr));
        for (const Config& c : {Config{"greedy", false, 0}, Config{"greedy_top20", false, 20},
                                Config{"t0.7_top_p0.95_top_k0_penalties", true, 0}}) {
            for (int rows : {1, 8}) {
                std::vector<kernels::SampleRowParams> prm(static_cast<size_t>(rows));
                for (int r = 0; r < rows; ++r) {
                    auto& p = prm[size_t(r)];
                    p.lane = r;
                    p.seed = 1234 + r;
                    p.n_top_logprobs = c.n_top;
                    if (c.draw) {
                        p.temperature = 0.7f;
                        p.top_p = 0.95f;
                        p.repetition_penalty = 1.1f;
                        p.presence_penalty = 0.5f;
                        p.frequency_penalty = 0.2f;
                        p.flags = kernels::kSampleUseCounts;
                    }
                }
                DeviceBuffer<kernels::SampleRowParams> pd(prm);
                kernels::SampleArgs a = buf.args(pd.get());
                a.n_rows = rows; // the first rows of the buffers
                a.plan = {c.draw, c.n_top > 0};
                const double us = time_sample(a, 200);
                const auto got = buf.ids.download();
                for (int r = 0; r < rows; ++r) CHECK((got[size_t(r)] >= 0 && got[size_t(r)] < V));
                std::printf("RESULT sample vocab %d batch %d %s logits %s us_per_step %.1f\n", V, rows, c.name, shape, us);
            }
        }
    }
}
