// ninfer::kernels - device helpers of the speculative round (issue 28): the greedy pick of logit
// rows, so only ids leave the GPU, and batched copies (the GDN state snapshots of a verify window
// and their rollback) as one launch instead of one copy per layer and state.
//
// Contract:
// - argmax_rows(logits, stride, n_rows, vocab, work, out): out[r] = the greedy pick of row r
//   (logits + r * stride, vocab floats): the first index of the largest value; a NaN never wins
//   unless it is the row's first value (then 0): core/backend/sampling.h argmax_token, exactly.
//   work: argmax_work_bytes(n_rows) bytes of device memory, zeroed once before its first use
//   (it holds per-row counters that return to zero after every launch); launches sharing it must
//   be stream-ordered. Requirements: 0 <= n_rows <= kArgmaxMaxRows, vocab >= 1, stride >= vocab,
//   non-null pointers; else cudaErrorInvalidValue and nothing is launched.
// - copy_spans(spans, n, stream) copies n (<= kCopySpansMax) byte spans given by value (host
//   array; dst/src device pointers, spans not overlapping each other's destinations) in one launch;
//   copy_span_table(table, n, max_bytes, stream) does the same from a device array of n spans of at
//   most max_bytes each (the table is read on the device when the kernel runs). 16-byte words where
//   a span's addresses and size allow, else bytes: every byte is copied as is.
// - Plain launches (no PDL): each starts after the kernel before it has finished, and a PDL kernel
//   after it waits for it. Stream-ordered, graph-capturable, no synchronisation.
// Thread safety: stateless apart from `work`; any host thread, any stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::kernels {

constexpr int kArgmaxMaxRows = 64;
size_t argmax_work_bytes(int n_rows);
cudaError_t argmax_rows(const float* logits, int64_t stride, int n_rows, int vocab, void* work, int32_t* out,
                        cudaStream_t stream);

struct CopySpan {
    void* dst = nullptr;
    const void* src = nullptr;
    uint64_t bytes = 0;
};
constexpr int kCopySpansMax = 24;
cudaError_t copy_spans(const CopySpan* spans, int n, cudaStream_t stream);
cudaError_t copy_span_table(const CopySpan* table, int n, uint64_t max_bytes, cudaStream_t stream);

} // namespace ninfer::kernels
