// ninfer tests - the device buffers of one kernels::sample call (shared by the sampler's tests).
//
// Contract: SampleBuffers(logits, rows, vocab) uploads rows x vocab logits (row stride vocab) and
// allocates zeroed per-row count and bias rows (lane = row), guarded outputs and the workspace;
// args(params) returns SampleArgs over them with the given device row parameters.
// SampleGraph captures one kernels::sample call on its own stream; replay(n) launches it n times.
#pragma once

#include "gpu_test_util.h"
#include "ninfer/kernels/sample.h"

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

} // namespace ninfer::test
