// ninfer::kernels - the L2 prefetch hint: bulk prefetches of weight ranges, launched or hung off a
// captured graph as an unjoined branch.
#include "ninfer/kernels/l2_prefetch.h"

namespace ninfer::kernels {

namespace detail {

constexpr uint64_t kL2PrefetchChunk = 32 << 10;

__device__ __forceinline__ uint64_t range_first(const L2Range& r) {
    return (reinterpret_cast<uint64_t>(r.data) + 15) & ~uint64_t(15);
}
__device__ __forceinline__ uint64_t range_last(const L2Range& r) {
    return (reinterpret_cast<uint64_t>(r.data) + r.bytes) & ~uint64_t(15);
}

// Chunk c goes to block c % grid, so a window's chunks spread over every block (and SM) first.
__global__ void __launch_bounds__(32) l2_prefetch_kernel(L2PrefetchList list) {
    const uint64_t threads = uint64_t(gridDim.x) * 32, tid = uint64_t(threadIdx.x) * gridDim.x + blockIdx.x;
    uint64_t base = 0; // chunks of the ranges before this one
    for (int i = 0; i < list.count; ++i) {
        const uint64_t first = range_first(list.range[i]), last = range_last(list.range[i]);
        const uint64_t n = last > first ? (last - first + kL2PrefetchChunk - 1) / kL2PrefetchChunk : 0;
        // This thread's chunks of range i: c = tid + j * threads, base <= c < base + n.
        uint64_t c = tid >= base ? tid : tid + (base - tid + threads - 1) / threads * threads;
        for (; c < base + n; c += threads) {
            const uint64_t at = first + (c - base) * kL2PrefetchChunk;
            const uint32_t size = uint32_t(last - at < kL2PrefetchChunk ? last - at : kL2PrefetchChunk);
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(at), "r"(size) : "memory");
        }
        base += n;
    }
}

uint64_t chunks_of(const L2PrefetchList& list) {
    uint64_t total = 0;
    for (int i = 0; i < list.count; ++i) {
        const uint64_t a = reinterpret_cast<uint64_t>(list.range[i].data);
        const uint64_t first = (a + 15) & ~uint64_t(15), last = (a + list.range[i].bytes) & ~uint64_t(15);
        if (last > first) total += (last - first + kL2PrefetchChunk - 1) / kL2PrefetchChunk;
    }
    return total;
}

unsigned blocks_for(const L2PrefetchList& list) {
    const uint64_t chunks = chunks_of(list);
    return unsigned(chunks < 1 ? 1 : chunks > uint64_t(kL2PrefetchMaxBlocks) ? kL2PrefetchMaxBlocks : chunks);
}

} // namespace detail

cudaError_t l2_prefetch(const L2PrefetchList& list, cudaStream_t stream) {
    if (list.count < 0 || list.count > kL2PrefetchMaxRanges) return cudaErrorInvalidValue;
    detail::l2_prefetch_kernel<<<detail::blocks_for(list), 32, 0, stream>>>(list);
    return cudaGetLastError();
}

cudaError_t l2_prefetch_branch(const L2PrefetchList& list, cudaStream_t stream) {
    if (list.count < 0 || list.count > kL2PrefetchMaxRanges) return cudaErrorInvalidValue;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    const cudaGraphNode_t* deps = nullptr;
    const cudaGraphEdgeData* edges = nullptr; // asked for so that the query is never lossy; unused
    size_t n_deps = 0;
    cudaError_t err = cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &deps, &edges, &n_deps);
    if (err != cudaSuccess || status != cudaStreamCaptureStatusActive) return err;
    L2PrefetchList copy = list;
    void* args[] = {&copy};
    cudaKernelNodeParams p{};
    p.func = reinterpret_cast<void*>(&detail::l2_prefetch_kernel);
    p.gridDim = dim3(detail::blocks_for(list));
    p.blockDim = dim3(32);
    p.sharedMemBytes = 0;
    p.kernelParams = args;
    cudaGraphNode_t node = nullptr;
    // Full (not programmatic) edges from the current dependencies; the stream's set is untouched.
    return cudaGraphAddKernelNode(&node, graph, deps, n_deps, &p);
}

} // namespace ninfer::kernels
