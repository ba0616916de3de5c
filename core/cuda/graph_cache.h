// ninfer::core - CUDA graphs captured from a stream's launches and replayed: the capture itself
// and a bounded cache of graphs by a key of host-known shape values.
//
// Contract:
// - capture_graph(stream, body, what) runs body with the stream in thread-local capture mode and
//   returns the instantiated graph (the caller owns it: cudaGraphExecDestroy). However body ends,
//   the capture ends: a throw from body goes on as it is, a failed capture or instantiation
//   throws ninfer::Error (cuda_check; "what" names it). body must enqueue only capturable work: kernels,
//   copies between device memory and from or to pinned host memory, no synchronisation.
// - GraphCache(max) holds at most max graphs by key (a list of ints: whatever shapes the launches,
//   the values that change from one replay to the next read from device or pinned memory).
//   run(stream, key, body) replays the key's graph, captured from body first when the key is new
//   and the cache has room, and returns true; for a new key with the cache full it enqueues nothing
//   and returns false (the caller then enqueues the work eagerly, its own way). A capture or
//   instantiation that fails (the device out of memory for the graph, say) is not an error of the
//   work: the CUDA error is cleared, nothing is enqueued, the cache captures no more (its graphs
//   still replay), failures() counts it, and run returns false. A throw
//   from body goes on as it is. A graph reads its pinned sources when it runs: the host must not
//   rewrite them while a replay may still be reading (the callers synchronise the stream in
//   between). fail_next_capture() makes the next capture fail that way (the GPU tests).
// - The destructor destroys every graph (the caller keeps the stream idle by then).
// Thread safety: engine thread only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <map>
#include <vector>

namespace ninfer::core::cuda {

cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& body, const char* what);

class GraphCache {
  public:
    explicit GraphCache(size_t max) : max_(max) {}
    ~GraphCache();
    GraphCache(const GraphCache&) = delete;
    GraphCache& operator=(const GraphCache&) = delete;

    bool run(cudaStream_t stream, const std::vector<int>& key, const std::function<void()>& body, const char* what);
    size_t size() const { return graphs_.size(); }
    size_t max() const { return max_; }
    size_t failures() const { return failures_; }
    void fail_next_capture() { fail_next_ = true; }

  private:
    size_t max_ = 0;
    size_t failures_ = 0;
    bool closed_ = false, fail_next_ = false;
    std::map<std::vector<int>, cudaGraphExec_t> graphs_;
};

} // namespace ninfer::core::cuda
