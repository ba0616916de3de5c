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
// - The greedy round on the device (Backend::verify_accept_greedy, core/cuda/verify_window.h): a
//   round table holds per entry i a row of `width` int32: lane, count (the window's tokens, 1..
//   width - kRoundTableHead), start (the window's first position), forced keep (0: greedy), then
//   the window's tokens. greedy_accept(table, width, n, ids, ids_stride, n_keep, starts): per entry,
//   m = the longest prefix of drafts (tokens 1..count-1) with token[j + 1] == ids[lane *
//   ids_stride + j]; n_keep[lane] = the forced keep, or m + 1; starts[lane] = start (accept_greedy_ids).
//   copy_span_table_kept(spans, per_entry, per_lane, table, width, n, n_keep, max_bytes): for entry
//   i of lane l and count c with k = n_keep[l] < c, copies the per_entry spans at spans + (l *
//   per_lane + k - 1) * per_entry (a verify window's rollback, chosen on the device).
//   round_draft_inputs(tokens, lanes, positions, n, starts, n_keep, ids, ids_stride, drafts,
//   drafts_stride, column): for row r of lane l = lanes[r], positions[r] = starts[l] + n_keep[l] - 1
//   + column, tokens[r] = column == 0 ? ids[l * ids_stride + n_keep[l] - 1] (the token after the
//   kept ones) : drafts[l * drafts_stride + column - 1] (the MTP head's draft step inputs).
//   cudaErrorInvalidValue for null pointers or sizes out of range (nothing launched); n = 0 launches nothing.
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

constexpr int kRoundTableHead = 4; // lane, count, start, forced keep
cudaError_t greedy_accept(const int32_t* table, int width, int n, const int32_t* ids, int ids_stride, int32_t* n_keep,
                          int32_t* starts, cudaStream_t stream);
cudaError_t copy_span_table_kept(const CopySpan* spans, int per_entry, int per_lane, const int32_t* table, int width,
                                 int n, const int32_t* n_keep, uint64_t max_bytes, cudaStream_t stream);
cudaError_t round_draft_inputs(int32_t* tokens, const int32_t* lanes, int32_t* positions, int n, const int32_t* starts,
                               const int32_t* n_keep, const int32_t* ids, int ids_stride, const int32_t* drafts,
                               int drafts_stride, int column, cudaStream_t stream);

} // namespace ninfer::kernels
