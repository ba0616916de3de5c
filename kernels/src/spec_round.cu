// ninfer::kernels - the speculative round's greedy picks and batched copies (spec_round.h).
#include "ninfer/kernels/spec_round.h"

namespace ninfer::kernels {

namespace {

constexpr int kArgmaxChunks = 64;   // blocks per row
constexpr int kArgmaxThreads = 256;

struct Pick {
    float v;
    int i;
};

// b replaces a when it is larger, or equal with a lower index (a NaN is never larger nor equal).
__device__ __forceinline__ Pick better(Pick a, Pick b) { return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a; }

__device__ __forceinline__ Pick warp_best(Pick p) {
    for (int o = 16; o > 0; o /= 2) {
        const Pick q{__shfl_xor_sync(0xffffffffu, p.v, o), __shfl_xor_sync(0xffffffffu, p.i, o)};
        p = better(p, q);
    }
    return p;
}

// The block's best pick (every thread gets it).
__device__ Pick block_best(Pick p) {
    __shared__ Pick warps[kArgmaxThreads / 32];
    __shared__ Pick result;
    p = warp_best(p);
    if (threadIdx.x % 32 == 0)
        warps[threadIdx.x / 32] = p;
    __syncthreads();
    if (threadIdx.x < 32) {
        Pick q = threadIdx.x < kArgmaxThreads / 32 ? warps[threadIdx.x] : warps[0];
        q = warp_best(q);
        if (threadIdx.x == 0)
            result = q;
    }
    __syncthreads();
    return result;
}

// Block (c, r) picks over chunk c of row r; the last block of a row to finish (its counter wraps
// back to 0) reduces the chunks' picks in chunk order. Every pick starts from (row[0], 0), so a
// NaN first value stays the answer and other NaNs never win, as argmax_token.
__global__ void argmax_kernel(const float* __restrict__ logits, int64_t stride, int vocab, Pick* partial,
                              unsigned* counter, int32_t* out) {
    const int r = blockIdx.y, c = blockIdx.x;
    const float* row = logits + int64_t(r) * stride;
    const int per = (vocab + kArgmaxChunks - 1) / kArgmaxChunks;
    const int begin = c * per, end = min(vocab, begin + per);
    Pick p{row[0], 0};
    for (int i = begin + int(threadIdx.x); i < end; i += kArgmaxThreads)
        p = better(p, Pick{row[i], i});
    p = block_best(p);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partial[r * kArgmaxChunks + c] = p;
        __threadfence();
        last = atomicInc(&counter[r], kArgmaxChunks - 1) == kArgmaxChunks - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    Pick q{row[0], 0};
    for (int k = int(threadIdx.x); k < kArgmaxChunks; k += kArgmaxThreads) {
        const volatile Pick* v = partial + r * kArgmaxChunks + k;
        q = better(q, Pick{v->v, v->i});
    }
    q = block_best(q);
    if (threadIdx.x == 0)
        out[r] = q.i;
}

struct SpanArgs {
    CopySpan span[kCopySpansMax];
};

__device__ __forceinline__ void copy_one(const CopySpan& s) {
    const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
    const uint64_t t = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const bool wide = ((reinterpret_cast<uintptr_t>(s.dst) | reinterpret_cast<uintptr_t>(s.src) | s.bytes) & 15) == 0;
    if (wide) {
        uint4* d = static_cast<uint4*>(s.dst);
        const uint4* src = static_cast<const uint4*>(s.src);
        for (uint64_t i = t; i < s.bytes / 16; i += stride)
            d[i] = src[i];
    } else {
        uint8_t* d = static_cast<uint8_t*>(s.dst);
        const uint8_t* src = static_cast<const uint8_t*>(s.src);
        for (uint64_t i = t; i < s.bytes; i += stride)
            d[i] = src[i];
    }
}

__global__ void copy_spans_kernel(SpanArgs a) { copy_one(a.span[blockIdx.y]); }
__global__ void copy_table_kernel(const CopySpan* table) { copy_one(table[blockIdx.y]); }

constexpr int kCopyThreads = 256;

// One thread per entry: the entry's accepted drafts against its lane's greedy ids.
__global__ void greedy_accept_kernel(const int32_t* table, int width, int n, const int32_t* ids, int ids_stride,
                                     int32_t* n_keep, int32_t* starts) {
    const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n)
        return;
    const int32_t* e = table + int64_t(i) * width;
    const int lane = e[0], count = e[1];
    const int32_t* tokens = e + kRoundTableHead;
    const int32_t* lane_ids = ids + int64_t(lane) * ids_stride;
    int m = 0;
    while (m + 1 < count && tokens[m + 1] == lane_ids[m])
        ++m;
    n_keep[lane] = e[3] > 0 ? e[3] : m + 1;
    starts[lane] = e[2];
}

// Block row y = entry * per_entry + span: that span of the entry's rollback, if its lane keeps
// fewer than the window's tokens.
__global__ void copy_table_kept_kernel(const CopySpan* spans, int per_entry, int per_lane, const int32_t* table,
                                       int width, const int32_t* n_keep) {
    const int entry = int(blockIdx.y) / per_entry, span = int(blockIdx.y) % per_entry;
    const int32_t* e = table + int64_t(entry) * width;
    const int lane = e[0], count = e[1], keep = n_keep[lane];
    if (keep < 1 || keep >= count)
        return;
    copy_one(spans[(int64_t(lane) * per_lane + keep - 1) * per_entry + span]);
}

__global__ void round_draft_inputs_kernel(int32_t* tokens, const int32_t* lanes, int32_t* positions, int n,
                                          const int32_t* starts, const int32_t* n_keep, const int32_t* ids,
                                          int ids_stride, const int32_t* drafts, int drafts_stride, int column) {
    const int r = int(threadIdx.x);
    if (r >= n)
        return;
    const int lane = lanes[r], keep = n_keep[lane];
    positions[r] = starts[lane] + keep - 1 + column;
    tokens[r] = column == 0 ? ids[int64_t(lane) * ids_stride + keep - 1]
                            : drafts[int64_t(lane) * drafts_stride + column - 1];
}

// Blocks per span: about 16 KB each (a 27B GDN state of 3 MiB spreads over every SM), 1..1024.
unsigned copy_blocks(uint64_t max_bytes) {
    const uint64_t b = (max_bytes + (16u << 10) - 1) / (16u << 10);
    return unsigned(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

} // namespace

size_t argmax_work_bytes(int n_rows) {
    return kArgmaxMaxRows * sizeof(unsigned) + size_t(n_rows < 0 ? 0 : n_rows) * kArgmaxChunks * sizeof(Pick);
}

cudaError_t argmax_rows(const float* logits, int64_t stride, int n_rows, int vocab, void* work, int32_t* out,
                        cudaStream_t stream) {
    if (!logits || !work || !out || n_rows < 0 || n_rows > kArgmaxMaxRows || vocab < 1 || stride < vocab)
        return cudaErrorInvalidValue;
    if (n_rows == 0)
        return cudaSuccess;
    // Counters first (kArgmaxMaxRows of them, zeroed once), then the picks.
    unsigned* counter = static_cast<unsigned*>(work);
    Pick* partial = reinterpret_cast<Pick*>(counter + kArgmaxMaxRows);
    argmax_kernel<<<dim3(kArgmaxChunks, unsigned(n_rows)), kArgmaxThreads, 0, stream>>>(logits, stride, vocab, partial,
                                                                                        counter, out);
    return cudaGetLastError();
}

cudaError_t copy_spans(const CopySpan* spans, int n, cudaStream_t stream) {
    if (n < 0 || n > kCopySpansMax || (n > 0 && !spans))
        return cudaErrorInvalidValue;
    SpanArgs a{};
    uint64_t max_bytes = 0;
    for (int i = 0; i < n; ++i) {
        if (spans[i].bytes && (!spans[i].dst || !spans[i].src))
            return cudaErrorInvalidValue;
        a.span[i] = spans[i];
        max_bytes = spans[i].bytes > max_bytes ? spans[i].bytes : max_bytes;
    }
    if (n == 0 || max_bytes == 0)
        return cudaSuccess;
    copy_spans_kernel<<<dim3(copy_blocks(max_bytes), unsigned(n)), kCopyThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

cudaError_t copy_span_table(const CopySpan* table, int n, uint64_t max_bytes, cudaStream_t stream) {
    if (n < 0 || n > 65535 || (n > 0 && !table))
        return cudaErrorInvalidValue;
    if (n == 0 || max_bytes == 0)
        return cudaSuccess;
    copy_table_kernel<<<dim3(copy_blocks(max_bytes), unsigned(n)), kCopyThreads, 0, stream>>>(table);
    return cudaGetLastError();
}

cudaError_t greedy_accept(const int32_t* table, int width, int n, const int32_t* ids, int ids_stride, int32_t* n_keep,
                          int32_t* starts, cudaStream_t stream) {
    if (n < 0 || (n > 0 && (!table || !ids || !n_keep || !starts)) || width <= kRoundTableHead || ids_stride < 1)
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    greedy_accept_kernel<<<unsigned((n + 63) / 64), 64, 0, stream>>>(table, width, n, ids, ids_stride, n_keep, starts);
    return cudaGetLastError();
}

cudaError_t copy_span_table_kept(const CopySpan* spans, int per_entry, int per_lane, const int32_t* table, int width,
                                 int n, const int32_t* n_keep, uint64_t max_bytes, cudaStream_t stream) {
    if (n < 0 || per_entry < 1 || per_lane < 1 || width <= kRoundTableHead || int64_t(n) * per_entry > 65535 ||
        (n > 0 && (!spans || !table || !n_keep)))
        return cudaErrorInvalidValue;
    if (n == 0 || max_bytes == 0)
        return cudaSuccess;
    copy_table_kept_kernel<<<dim3(copy_blocks(max_bytes), unsigned(n * per_entry)), kCopyThreads, 0, stream>>>(
        spans, per_entry, per_lane, table, width, n_keep);
    return cudaGetLastError();
}

cudaError_t round_draft_inputs(int32_t* tokens, const int32_t* lanes, int32_t* positions, int n, const int32_t* starts,
                               const int32_t* n_keep, const int32_t* ids, int ids_stride, const int32_t* drafts,
                               int drafts_stride, int column, cudaStream_t stream) {
    if (n < 0 || n > 1024 || column < 0 || ids_stride < 1 || drafts_stride < 1 ||
        (n > 0 && (!tokens || !lanes || !positions || !starts || !n_keep || !ids || !drafts)))
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    round_draft_inputs_kernel<<<1, 32 * unsigned((n + 31) / 32), 0, stream>>>(tokens, lanes, positions, n, starts, n_keep,
                                                                           ids, ids_stride, drafts, drafts_stride, column);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
