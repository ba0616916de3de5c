// ninfer tests - the device buffers of one kernels::sample call (shared by the sampler's tests).
//
// Contract: SampleBuffers(logits, rows, vocab) uploads rows x vocab logits (row stride vocab) and
// allocates zeroed per-row count and bias rows (lane = row), guarded outputs and the workspace;
// args(params) returns SampleArgs over them with the given device row parameters.
// SampleGraph captures one kernels::sample call on its own stream; replay(n) launches it n times.
// draw_margin(z, params) says how close core::sample_token's draw came to a boundary.
#pragma once

#include "core/backend/sampling.h"
#include "gpu_test_util.h"
#include "ninfer/kernels/sample.h"

#include <algorithm>

namespace ninfer::test {

struct SampleBuffers {
    SampleBuffers(const std::vector<float>& host_logits, int rows, int vocab)
        : n_rows(rows), V(vocab), logits(host_logits), counts(size_t(rows) * vocab, 0),
          bias(size_t(rows) * vocab, 0), ids(size_t(rows)), logprobs(size_t(rows)),
          top_ids(size_t(rows) * kernels::kSampleMaxTopLogprobs),
          top_logprobs(size_t(rows) * kernels::kSampleMaxTopLogprobs),
          workspace(kernels::sample_workspace_bytes(rows, vocab)) {}

    kernels::SampleArgs args(const kernels::SampleRowParams* params) const {
        kernels::SampleArgs a;
        a.logits = logits.get();
        a.stride = V;
        a.vocab = V;
        a.n_rows = n_rows;
        a.rows = params;
        a.counts = counts.get();
        a.bias = bias.get();
        a.workspace = workspace.get();
        a.ids = ids.get();
        a.logprobs = logprobs.get();
        a.top_ids = top_ids.get();
        a.top_logprobs = top_logprobs.get();
        return a;
    }

    int n_rows, V;
    DeviceBuffer<float> logits;
    DeviceBuffer<int32_t> counts;
    DeviceBuffer<float> bias;
    DeviceBuffer<int32_t> ids;
    DeviceBuffer<float> logprobs;
    DeviceBuffer<int32_t> top_ids;
    DeviceBuffer<float> top_logprobs;
    DeviceBuffer<uint8_t> workspace;
};

struct SampleGraph {
    explicit SampleGraph(const kernels::SampleArgs& a) {
        CUDA_OK(cudaStreamCreate(&stream));
        cudaGraph_t graph = nullptr;
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        CUDA_OK(kernels::sample(a, stream));
        CUDA_OK(cudaStreamEndCapture(stream, &graph));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        cudaGraphDestroy(graph);
    }
    ~SampleGraph() {
        cudaGraphExecDestroy(exec);
        cudaStreamDestroy(stream);
    }
    SampleGraph(const SampleGraph&) = delete;
    SampleGraph& operator=(const SampleGraph&) = delete;
    void replay(int n) {
        for (int i = 0; i < n; ++i) CUDA_OK(cudaGraphLaunch(exec, stream));
    }
    cudaStream_t stream = nullptr;
    cudaGraphExec_t exec = nullptr;
};

// How close (relative) the CPU's draw came to a boundary it compares against: the top_p cut, a
// min_p floor, or the draw target against a running sum. z: logits after sample_token's in-place
// bias, penalties and temperature. Within ~1e-12 the f64 summation order decides (and exact ties,
// such as two equal tokens under top_p 0.5, sit at 0), so a different token there is tolerated.
inline double draw_margin(const std::vector<float>& z, const core::SamplingParams& p) {
    const int V = int(z.size());
    const double top = *std::max_element(z.begin(), z.end());
    if (!std::isfinite(top)) return 0;
    std::vector<int> idx;
    for (int i = 0; i < V; ++i)
        if (double(z[size_t(i)]) - top >= -40.0) idx.push_back(i);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    const size_t n = p.top_k > 0 && p.top_k < V ? size_t(p.top_k) : size_t(V);
    idx.resize(std::min(idx.size(), n));
    std::vector<double> prob(idx.size());
    double sum = 0;
    for (size_t i = 0; i < idx.size(); ++i) sum += prob[i] = std::exp(double(z[size_t(idx[i])]) - top);
    for (double& q : prob) q /= sum;
    double margin = 1;
    size_t keep = idx.size();
    if (p.top_p < 1.f) {
        double cum = 0;
        for (size_t i = 0; i < idx.size(); ++i) {
            cum += prob[i];
            margin = std::min(margin, std::fabs(cum - double(p.top_p)));
            if (cum >= double(p.top_p)) { keep = i + 1; break; }
        }
    }
    if (p.min_p > 0.f) {
        const double floor = double(p.min_p) * prob[0];
        for (size_t i = 1; i < keep; ++i) {
            margin = std::min(margin, std::fabs(prob[i] - floor) / floor);
            if (prob[i] < floor) { keep = i; break; }
        }
    }
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += prob[i];
    const double target = core::sampling_uniform(p.seed, p.step) * total;
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
        cum += prob[i];
        margin = std::min(margin, std::fabs(cum - target) / total);
        if (target < cum) break;
    }
    return margin;
}

} // namespace ninfer::test
