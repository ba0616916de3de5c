// ninfer::kernels - pulling constant device memory (weights) into L2 ahead of its use, as a hint:
// cp.async.bulk.prefetch.L2 (sm_90 TMA), fire and forget. Nothing is written, so no result can
// depend on whether, when or how much of it happened.
//
// Contract:
// - L2PrefetchList: up to kL2PrefetchMaxRanges ranges of device memory (count of them used); a
//   range's start is rounded up and its end down to 16 bytes (the instruction's granularity), so
//   nothing outside [data, data + bytes) is touched; empty ranges are allowed.
// - l2_prefetch(list, stream): launches the prefetch kernel on stream (an ordinary launch: it
//   starts after the work before it and the next work waits for it).
// - l2_prefetch_branch(list, stream): while stream is capturing a graph, adds the prefetch kernel
//   as a node of the captured graph that depends on the stream's current dependencies (it starts
//   when the work captured so far has finished) WITHOUT becoming a dependency of anything: the
//   stream's dependency set is left as it was, so the next captured launch (and its programmatic
//   edge to its predecessor) is exactly what it would be without the prefetch, and the branch is
//   never joined (CUDA allows nodes added to the capturing graph directly to end unjoined). A
//   list with count 0 still adds its (empty) node: it measures the cost of the branch alone.
//   When stream is not capturing it does nothing: the prefetch is a property of the decode graph.
// - Blocks are 32 threads; the ranges are cut into 32 KiB chunks dealt round-robin over up to
//   kL2PrefetchMaxBlocks blocks, so a few MB are requested from many SMs' TMA units at once.
// Errors: the launch's or the graph call's cudaError_t; cudaErrorInvalidValue for count outside
// 0..kL2PrefetchMaxRanges (nothing enqueued).
// Thread safety: stateless; any host thread, any stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

constexpr int kL2PrefetchMaxRanges = 8;
constexpr int kL2PrefetchMaxBlocks = 64;

struct L2Range {
    const void* data = nullptr;
    uint64_t bytes = 0;
};

struct L2PrefetchList {
    L2Range range[kL2PrefetchMaxRanges];
    int count = 0;
};

cudaError_t l2_prefetch(const L2PrefetchList& list, cudaStream_t stream);
cudaError_t l2_prefetch_branch(const L2PrefetchList& list, cudaStream_t stream);

} // namespace ninfer::kernels
