// ninfer::core - CUDA graph capture and the bounded cache of graphs by key (graph_cache.h).
#include "core/cuda/graph_cache.h"

#include "core/cuda/device_weights.h"
#include "core/util/error.h"

#include <string>
#include <utility>

namespace ninfer::core::cuda {

namespace {

// The capture of body as an instantiated graph, or null with *why set when the capture or the
// instantiation failed (the CUDA error cleared); a throw from body goes on as it is.
cudaGraphExec_t try_capture(cudaStream_t stream, const std::function<void()>& body, const char* what,
                            bool fail_instantiation, std::string* why) {
    cudaGraph_t graph = nullptr;
    cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), std::string(what) + " capture");
    try {
        body();
    } catch (...) {
        cudaStreamEndCapture(stream, &graph);
        if (graph)
            cudaGraphDestroy(graph);
        throw;
    }
    cudaError_t err = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    if (err == cudaSuccess) {
        err = cudaGraphInstantiate(&exec, graph, 0);
        if (err == cudaSuccess && fail_instantiation) { // the tests' stand-in for a real failure
            cudaGraphExecDestroy(exec);
            exec = nullptr;
            err = cudaErrorMemoryAllocation;
        }
    }
    if (graph)
        cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
        cudaGetLastError(); // not sticky: the stream and the context stay usable
        *why = std::string(what) + ": " + cudaGetErrorString(err);
        return nullptr;
    }
    return exec;
}

} // namespace

cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& body, const char* what) {
    std::string why;
    const cudaGraphExec_t exec = try_capture(stream, body, what, false, &why);
    if (!exec)
        throw Error("cuda: " + why);
    return exec;
}

GraphCache::~GraphCache() {
    for (const auto& [key, exec] : graphs_)
        cudaGraphExecDestroy(exec);
}

bool GraphCache::run(cudaStream_t stream, const std::vector<int>& key, const std::function<void()>& body,
                     const char* what) {
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
        if (graphs_.size() >= max_ || closed_)
            return false;
        std::string why;
        const cudaGraphExec_t exec = try_capture(stream, body, what, std::exchange(fail_next_, false), &why);
        if (!exec) {
            closed_ = true;
            ++failures_;
            return false;
        }
        it = graphs_.emplace(key, exec).first;
    }
    cuda_check(cudaGraphLaunch(it->second, stream), what);
    return true;
}

} // namespace ninfer::core::cuda
