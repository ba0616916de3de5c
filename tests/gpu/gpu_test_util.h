// ninfer tests - GPU test helpers: device buffers with 0xa5 guard bytes, bf16 rounding, random data.
//
// Contract: DeviceBuffer<T> owns count elements plus kGuardBytes of 0xa5 on each side; download()
// copies the elements back and guards_intact() says whether a kernel wrote outside them. Every
// CUDA call is checked with CUDA_OK (a Catch2 REQUIRE naming the call and the error string).
// require_gpu() fails the test with cuda_probe()'s reason when no usable device is present.
// CapturedGraph records a CUDA graph from a callback; replay_graph() replays one (graph-vs-eager
// tests), graph_us() times one for the timing tests' RESULT lines (never asserted).
#pragma once

#include "ninfer/kernels/device.h"

#include <catch2/catch.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        const cudaError_t err_ = (call);                                                           \
        INFO(#call << ": " << cudaGetErrorString(err_));                                           \
        REQUIRE(err_ == cudaSuccess);                                                              \
    } while (0)

namespace ninfer::test {

inline void require_gpu() {
    const auto probe = kernels::cuda_probe();
    INFO("cuda unavailable: " << probe.reason);
    REQUIRE(probe.ok);
}

constexpr size_t kGuardBytes = 256;

template <typename T> class DeviceBuffer {
  public:
    explicit DeviceBuffer(size_t count, uint8_t fill = 0xa5) : count_(count) {
        const size_t bytes = count * sizeof(T) + 2 * kGuardBytes;
        CUDA_OK(cudaMalloc(&base_, bytes));
        CUDA_OK(cudaMemset(base_, 0xa5, bytes));
        if (fill != 0xa5) CUDA_OK(cudaMemset(base_ + kGuardBytes, fill, count * sizeof(T)));
    }
    DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
    ~DeviceBuffer() { cudaFree(base_); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    T* get() const { return reinterpret_cast<T*>(base_ + kGuardBytes); }
    size_t size() const { return count_; }
    void upload(const std::vector<T>& host) {
        REQUIRE(host.size() <= count_);
        CUDA_OK(cudaMemcpy(get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> host(count_);
        CUDA_OK(cudaMemcpy(host.data(), get(), count_ * sizeof(T), cudaMemcpyDeviceToHost));
        return host;
    }
    bool guards_intact() const {
        std::vector<uint8_t> g(kGuardBytes);
        for (const uint8_t* p : {base_, base_ + kGuardBytes + count_ * sizeof(T)}) {
            if (cudaMemcpy(g.data(), p, kGuardBytes, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
            for (uint8_t b : g)
                if (b != 0xa5) return false;
        }
        return true;
    }

  private:
    uint8_t* base_ = nullptr;
    size_t count_ = 0;
};

using bf16 = __nv_bfloat16;

inline float to_f(bf16 v) { return __bfloat162float(v); }
inline bf16 to_bf16(float v) { return __float2bfloat16(v); }
inline float round_bf16(double v) { return __bfloat162float(__float2bfloat16(float(v))); }

struct Rng {
    explicit Rng(uint64_t seed) : gen(seed) {}
    std::mt19937_64 gen;
    float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); }
    int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
    uint64_t bits() { return gen(); }
    std::vector<bf16> bf16s(size_t n, float lo, float hi) {
        std::vector<bf16> v(n);
        for (auto& e : v) e = to_bf16(uniform(lo, hi));
        return v;
    }
};

// ||a - b|| / ||b|| over two equally long float sequences.
inline double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// A CUDA graph recorded from body(stream) on a fresh stream made with `flags`, released at scope end.
struct CapturedGraph {
    cudaStream_t stream = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CapturedGraph(const std::function<void(cudaStream_t)>& body, unsigned flags) {
        CUDA_OK(cudaStreamCreateWithFlags(&stream, flags));
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        body(stream);
        CUDA_OK(cudaStreamEndCapture(stream, &graph));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    }
    ~CapturedGraph() {
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaStreamDestroy(stream);
    }
    CapturedGraph(const CapturedGraph&) = delete;
    CapturedGraph& operator=(const CapturedGraph&) = delete;
};

// Replays body's graph `replays` times and waits. The stream is a blocking one, so the replays
// follow work on the legacy default stream (DeviceBuffer's memsets).
inline void replay_graph(const std::function<void(cudaStream_t)>& body, int replays) {
    CapturedGraph g(body, cudaStreamDefault);
    for (int i = 0; i < replays; ++i) CUDA_OK(cudaGraphLaunch(g.exec, g.stream));
    CUDA_OK(cudaStreamSynchronize(g.stream));
}

// Microseconds per replay of a graph that records body(stream) on a fresh non-blocking stream:
// one warm-up replay, then `batches` event-timed batches of `reps` back-to-back replays each; the
// median batch's mean (with one batch, simply the mean of its reps).
inline double graph_us(const std::function<void(cudaStream_t)>& body, int batches, int reps) {
    CapturedGraph g(body, cudaStreamNonBlocking);
    CUDA_OK(cudaGraphLaunch(g.exec, g.stream)); // warm-up
    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    std::vector<double> runs;
    for (int b = 0; b < batches; ++b) {
        CUDA_OK(cudaEventRecord(t0, g.stream));
        for (int r = 0; r < reps; ++r) CUDA_OK(cudaGraphLaunch(g.exec, g.stream));
        CUDA_OK(cudaEventRecord(t1, g.stream));
        CUDA_OK(cudaEventSynchronize(t1));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
        runs.push_back(1e3 * ms / reps);
    }
    std::sort(runs.begin(), runs.end());
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return runs[runs.size() / 2];
}

} // namespace ninfer::test
