// ninfer::kernels - MoE prefill glue: counting sort of (token, slot) pairs by expert, row gather,
// and the combine back per token (moe_prefill.h).
#include "moe_combine.cuh"
#include "ninfer/kernels/moe_prefill.h"

#include <cstdint>

namespace ninfer::kernels {
namespace detail {

constexpr int kSortThreads = 256;

// Block e counts the pairs routed to expert e. One block per expert reads every id (n_pairs is at
// most a chunk times top_k, a few hundred KB from L2) and needs no atomics, so counts are exact
// and the launch is deterministic.
__global__ void __launch_bounds__(kSortThreads) count_kernel(const int32_t* ids, int n_pairs, int32_t* counts) {
    const int e = blockIdx.x;
    int n = 0;
    for (int s = threadIdx.x; s < n_pairs; s += kSortThreads)
        n += ids[s] == e;
    __shared__ int warp_n[kSortThreads / 32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) n += __shfl_xor_sync(0xffffffffu, n, o);
    if (threadIdx.x % 32 == 0)
        warp_n[threadIdx.x / 32] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        int total = 0;
        for (int w = 0; w < kSortThreads / 32; ++w) total += warp_n[w];
        counts[e] = total;
    }
}

// Exclusive prefix sum of counts (one block of 1024 threads, n_experts <= 1024).
__global__ void __launch_bounds__(1024) offsets_kernel(const int32_t* counts, int n_experts, int32_t* offsets) {
    __shared__ int32_t s[1024];
    const int i = threadIdx.x;
    s[i] = i < n_experts ? counts[i] : 0;
    __syncthreads();
    for (int d = 1; d < 1024; d <<= 1) {
        const int32_t v = i >= d ? s[i - d] : 0;
        __syncthreads();
        s[i] += v;
        __syncthreads();
    }
    if (i < n_experts)
        offsets[i + 1] = s[i];
    if (i == 0)
        offsets[0] = 0;
}

// Block e walks the pairs in ascending order, tile by tile, and gives each of its pairs the next
// row of expert e's block: a stable sort, the same on every run.
__global__ void __launch_bounds__(kSortThreads) order_kernel(const int32_t* ids, int n_pairs, const int32_t* offsets,
                                                             int32_t* order, int32_t* position) {
    const int e = blockIdx.x;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __shared__ int warp_base[kSortThreads / 32 + 1];
    int next = offsets[e];
    for (int base = 0; base < n_pairs; base += kSortThreads) {
        const int s = base + threadIdx.x;
        const bool mine = s < n_pairs && ids[s] == e;
        const unsigned ballot = __ballot_sync(0xffffffffu, mine);
        if (lane == 0)
            warp_base[warp + 1] = __popc(ballot);
        __syncthreads();
        if (threadIdx.x == 0) {
            warp_base[0] = 0;
            for (int w = 1; w <= kSortThreads / 32; ++w) warp_base[w] += warp_base[w - 1];
        }
        __syncthreads();
        if (mine) {
            const int r = next + warp_base[warp] + __popc(ballot & ((1u << lane) - 1u));
            order[r] = s;
            position[s] = r;
        }
        next += warp_base[kSortThreads / 32];
        __syncthreads();
    }
}

__global__ void gather_kernel(const __nv_bfloat16* src, int64_t src_stride, const int32_t* order, int top_k,
                              int width, __nv_bfloat16* dst, int64_t dst_stride) {
    const int r = blockIdx.x;
    const int64_t t = order[r] / top_k;
    const uint4* from = reinterpret_cast<const uint4*>(src + t * src_stride);
    uint4* to = reinterpret_cast<uint4*>(dst + int64_t(r) * dst_stride);
    for (int v = threadIdx.x; v < width / 8; v += blockDim.x)
        to[v] = from[v];
}

__global__ void combine_kernel(const float* y, int64_t y_stride, const int32_t* position, const float* weights,
                               int top_k, const float* shared, int64_t shared_stride, const float* score,
                               int64_t score_stride, float* out, int64_t out_stride, int dim) {
    moe_combine_token(
        y, y_stride, [=](int pair) { return int64_t(position[pair]); }, weights, top_k, shared, shared_stride, score,
        score_stride, out, out_stride, dim);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

} // namespace detail

cudaError_t moe_group_by_expert(const int32_t* ids, int n_tokens, int top_k, int n_experts, int32_t* counts,
                                int32_t* offsets, int32_t* order, int32_t* position, cudaStream_t stream) {
    if (!ids || !counts || !offsets || !order || !position || n_tokens < 1 || top_k < 1 || n_experts < 1 ||
        n_experts > 1024 || int64_t(n_tokens) * top_k > (int64_t(1) << 30))
        return cudaErrorInvalidValue;
    const int n_pairs = n_tokens * top_k;
    detail::count_kernel<<<n_experts, detail::kSortThreads, 0, stream>>>(ids, n_pairs, counts);
    detail::offsets_kernel<<<1, 1024, 0, stream>>>(counts, n_experts, offsets);
    detail::order_kernel<<<n_experts, detail::kSortThreads, 0, stream>>>(ids, n_pairs, offsets, order, position);
    return cudaGetLastError();
}

cudaError_t moe_gather_rows(const __nv_bfloat16* src, int64_t src_stride, const int32_t* order, int top_k,
                            int n_pairs, int width, __nv_bfloat16* dst, int64_t dst_stride, cudaStream_t stream) {
    if (!src || !order || !dst || top_k < 1 || n_pairs < 1 || width < 8 || width % 8 || src_stride % 8 ||
        dst_stride % 8 || !detail::aligned16(src) || !detail::aligned16(dst))
        return cudaErrorInvalidValue;
    detail::gather_kernel<<<n_pairs, 128, 0, stream>>>(src, src_stride, order, top_k, width, dst, dst_stride);
    return cudaGetLastError();
}

cudaError_t moe_combine_grouped(const float* y, int64_t y_stride, const int32_t* position, const float* weights,
                                int top_k, const float* shared, int64_t shared_stride, const float* score,
                                int64_t score_stride, float* out, int64_t out_stride, int dim, int n_tokens,
                                cudaStream_t stream) {
    if (!y || !position || !weights || !shared || !score || !out || top_k < 1 || dim < 1 || n_tokens < 1 ||
        n_tokens > 65535)
        return cudaErrorInvalidValue;
    const int threads = 256;
    const dim3 grid(unsigned((dim + threads - 1) / threads), unsigned(n_tokens));
    detail::combine_kernel<<<grid, threads, 0, stream>>>(y, y_stride, position, weights, top_k, shared, shared_stride,
                                                         score, score_stride, out, out_stride, dim);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
