// ninfer::kernels - a lane's KV rows between the paged pool and the lane-image layout, on the GPU,
// so a checkpoint or a restore moves one contiguous block over PCIe instead of one copy per page.
//
// Contract:
// - A pool page of one layer's K (or V) holds codes [n_kv_heads][64][code_bytes] then scales
//   [n_kv_heads][64][scale_bytes] (attention_decode.h); page_bytes is its size. An image row is
//   the row's codes followed by its scales (row_bytes = code_bytes + scale_bytes), rows in
//   (position, head) order: row (p - pos0) * n_kv_heads + h of `image` is position p, head h.
// - kv_rows_gather copies positions [pos0, pos0 + n_pos) of a lane whose page list is `pages`
//   (device memory, page id of position p at pages[p / 64]) from `pool` into `image`;
//   kv_rows_scatter writes them back into the pool (only those rows' bytes). Every byte is copied
//   as is (the image is the CPU backend's byte layout, memory_plan.h).
// - Requirements: n_kv_heads >= 1, code_bytes >= 1, scale_bytes >= 0, n_pos >= 0, pos0 >= 0;
//   else cudaErrorInvalidValue (nothing launched). n_pos == 0 launches nothing.
// - Stream-ordered, graph-capturable, no synchronisation; plain launches (no PDL): they run
//   between steps or on a copy stream, never inside a decode graph.
// Thread safety: stateless; any host thread, any stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

struct KvRowGeometry {
    int n_kv_heads = 0;
    int code_bytes = 0;
    int scale_bytes = 0;
    uint64_t page_bytes = 0;
};

cudaError_t kv_rows_gather(const uint8_t* pool, const int32_t* pages, int pos0, int n_pos, const KvRowGeometry& g,
                           uint8_t* image, cudaStream_t stream);
cudaError_t kv_rows_scatter(uint8_t* pool, const int32_t* pages, int pos0, int n_pos, const KvRowGeometry& g,
                            const uint8_t* image, cudaStream_t stream);

} // namespace ninfer::kernels
