// ninfer::kernels - the MTP head's glue kernels: the hidden-row ring, greedy argmax, draft feedback.
#include "common.cuh"
#include "ninfer/kernels/mtp_ops.h"

#include <algorithm>

namespace ninfer::kernels {

namespace detail {

__device__ __forceinline__ int64_t ring_row(int32_t lane, int64_t position, int ring_rows) {
    const int64_t slot = ((position % ring_rows) + ring_rows) % ring_rows;
    return int64_t(lane) * ring_rows + slot;
}

__global__ void mtp_keep_rows_kernel(const float* src, int64_t src_stride, const int32_t* lanes,
                                     const int32_t* positions, int position_offset, float* ring, int ring_rows,
                                     int64_t ring_stride, int64_t n) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    const int t = blockIdx.y;
    float* dst = ring + ring_row(lanes[t], int64_t(positions[t]) + position_offset, ring_rows) * ring_stride;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        dst[i] = src[t * src_stride + i];
}

__global__ void mtp_take_rows_kernel(const float* ring, int ring_rows, int64_t ring_stride, const int32_t* lanes,
                                     const int32_t* positions, float* out, int64_t out_stride, int64_t n) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    const int t = blockIdx.y;
    const float* src = ring + ring_row(lanes[t], positions[t], ring_rows) * ring_stride;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[t * out_stride + i] = src[i];
}

constexpr int kArgmaxThreads = 1024;

// (value, index) of the better of two: the larger value, the lower index on ties.
__device__ __forceinline__ void better(float& v, int& id, float v2, int id2) {
    if (v2 > v || (v2 == v && id2 < id)) {
        v = v2;
        id = id2;
    }
}

__global__ void mtp_argmax_kernel(const float* logits, int64_t logits_stride, int vocab, const int32_t* lanes,
                                  int32_t* drafts, int drafts_stride, int column) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    const int t = blockIdx.x;
    const float* row = logits + t * logits_stride;
    float v = -INFINITY;
    int id = vocab; // beaten by any real entry, -inf included (index order)
    for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        better(v, id, row[i], i);
    for (int off = 16; off > 0; off >>= 1)
        better(v, id, __shfl_down_sync(0xffffffffu, v, off), __shfl_down_sync(0xffffffffu, id, off));
    __shared__ float sv[kArgmaxThreads / 32];
    __shared__ int sid[kArgmaxThreads / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        sv[warp] = v;
        sid[warp] = id;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? sv[lane] : -INFINITY;
        id = lane < blockDim.x / 32 ? sid[lane] : vocab;
        for (int off = 16; off > 0; off >>= 1)
            better(v, id, __shfl_down_sync(0xffffffffu, v, off), __shfl_down_sync(0xffffffffu, id, off));
        if (lane == 0)
            drafts[int64_t(lanes[t]) * drafts_stride + column] = id < vocab ? id : 0;
    }
}

__global__ void mtp_draft_tokens_kernel(int32_t* tokens, const int32_t* lanes, const int32_t* drafts, int drafts_stride,
                                        int column, int n_tokens) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    const int t = threadIdx.x;
    if (t < n_tokens)
        tokens[t] = drafts[int64_t(lanes[t]) * drafts_stride + column];
}

dim3 row_grid(int64_t n, int n_tokens) { return dim3(unsigned(std::min<int64_t>(256, (n + 255) / 256)), unsigned(n_tokens)); }

} // namespace detail

cudaError_t mtp_keep_rows(const float* src, int64_t src_stride, const int32_t* lanes, const int32_t* positions,
                          int position_offset, float* ring, int ring_rows, int64_t ring_stride, int64_t n,
                          int n_tokens, cudaStream_t stream) {
    if (!src || !lanes || !positions || !ring || ring_rows < 1 || n < 1 || n > ring_stride || n_tokens < 1 ||
        n_tokens > 65535)
        return cudaErrorInvalidValue;
    return launch_pdl(detail::mtp_keep_rows_kernel, detail::row_grid(n, n_tokens), dim3(256), 0, stream, src,
                      src_stride, lanes, positions, position_offset, ring, ring_rows, ring_stride, n);
}

cudaError_t mtp_take_rows(const float* ring, int ring_rows, int64_t ring_stride, const int32_t* lanes,
                          const int32_t* positions, float* out, int64_t out_stride, int64_t n, int n_tokens,
                          cudaStream_t stream) {
    if (!ring || !lanes || !positions || !out || ring_rows < 1 || n < 1 || n > ring_stride || n_tokens < 1 ||
        n_tokens > 65535)
        return cudaErrorInvalidValue;
    return launch_pdl(detail::mtp_take_rows_kernel, detail::row_grid(n, n_tokens), dim3(256), 0, stream, ring,
                      ring_rows, ring_stride, lanes, positions, out, out_stride, n);
}

cudaError_t mtp_argmax(const float* logits, int64_t logits_stride, int vocab, const int32_t* lanes, int32_t* drafts,
                       int drafts_stride, int column, int n_tokens, cudaStream_t stream) {
    if (!logits || !lanes || !drafts || vocab < 1 || logits_stride < vocab || column < 0 || column >= drafts_stride ||
        n_tokens < 1 || n_tokens > 65535)
        return cudaErrorInvalidValue;
    return launch_pdl(detail::mtp_argmax_kernel, dim3(unsigned(n_tokens)), dim3(detail::kArgmaxThreads), 0, stream,
                      logits, logits_stride, vocab, lanes, drafts, drafts_stride, column);
}

cudaError_t mtp_draft_tokens(int32_t* tokens, const int32_t* lanes, const int32_t* drafts, int drafts_stride,
                             int column, int n_tokens, cudaStream_t stream) {
    if (!tokens || !lanes || !drafts || column < 0 || column >= drafts_stride || n_tokens < 1 || n_tokens > 1024)
        return cudaErrorInvalidValue;
    return launch_pdl(detail::mtp_draft_tokens_kernel, dim3(1), dim3(unsigned(n_tokens)), 0, stream, tokens, lanes,
                      drafts, drafts_stride, column, n_tokens);
}

} // namespace ninfer::kernels
