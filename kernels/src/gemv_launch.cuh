// ninfer::kernels - launching a decode GEMV kernel: with split-K, the splits of each row tile as one
// cluster (gemv_store reduces their partials through distributed shared memory) when clusters of
// that size can be resident, else the counter path (partials through L2, the last block sums).
// Both give the same bits. gemv_set_cluster_reduce(false) (a test hook) keeps the counter path
// everywhere.
#pragma once

#include "gemv_kernel.cuh"

namespace ninfer::kernels::detail {

// gemv.cu: the hook's switch, and whether clusters of grid.y blocks of `kernel` (block threads, smem
// dynamic bytes) can be resident at all (asked once per shape; sets the non-portable cluster
// attribute for sizes above 8).
bool gemv_cluster_reduce_on();
bool gemv_cluster_fits(const void* kernel, dim3 grid, dim3 block, size_t smem);

// Whether a launch of `kernel` for p will reduce its splits in clusters.
inline bool gemv_cluster_wanted(const void* kernel, dim3 grid, dim3 block, size_t smem, const GemvParams& p) {
    return p.splits > 1 && p.splits <= kGemvMaxClusterSplits && gemv_cluster_reduce_on() &&
           gemv_cluster_fits(kernel, grid, block, smem);
}

// p launched with its splits as clusters (cluster true: the caller asked gemv_cluster_wanted) or
// as a plain PDL launch.
template <class... Params>
cudaError_t launch_gemv_as(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                           GemvParams p, bool cluster) {
    p.cluster_reduce = cluster;
    return cluster ? launch_pdl_cluster(kernel, grid, block, smem, stream, p.splits, p)
                   : launch_pdl(kernel, grid, block, smem, stream, p);
}

template <class... Params>
cudaError_t launch_gemv(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                        const GemvParams& p) {
    return launch_gemv_as(kernel, grid, block, smem, stream, p,
                          gemv_cluster_wanted(reinterpret_cast<const void*>(kernel), grid, block, smem, p));
}

} // namespace ninfer::kernels::detail
