// ninfer::core - CUDA graph capture and the bounded cache of graphs by key (graph_cache.h).
#include "core/cuda/graph_cache.h"

#include "core/cuda/device_weights.h"

#include <string>

namespace ninfer::core::cuda {

cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& body, const char* what) {
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
    cuda_check(cudaStreamEndCapture(stream, &graph), std::string(what) + " capture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    cuda_check(err, std::string(what) + " instantiation");
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
        if (graphs_.size() >= max_)
            return false;
        it = graphs_.emplace(key, capture_graph(stream, body, what)).first;
    }
    cuda_check(cudaGraphLaunch(it->second, stream), what);
    return true;
}

} // namespace ninfer::core::cuda
