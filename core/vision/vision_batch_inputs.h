// ninfer::core - the host half of the GPU vision tower's batches (core/cuda/vision_tower_gpu.h):
// how a request's frame pairs are packed into batches, and one batch's inputs built on the host
// (patches rounded to bf16, position taps, rotary tables), written straight into the caller's
// buffers (the GPU tower's pinned staging). Plain host code, so it is tested on the CPU build.
//
// Contract:
// - VisionBatchPiece: frame pairs [t0, t0 + nt) of item `item` (`frame` = grid_h * grid_w
//   patches each) at rows [row, row + nt * frame) of its batch.
// - pack_vision_batches(items, rows): every item's frame pairs in order, packed into batches of at
//   most `rows` rows: whole frame pairs, a batch ends where the next frame pair does not fit, so a
//   batch's pieces are contiguous from row 0 and an item's pieces come in frame-pair order across
//   batches. No batches for no items. A frame of more than `rows` patches:
//   ninfer::Error("vision: a frame of N patches; the GPU tower takes at most ROWS").
//   vision_batch_rows(batch) is the batch's row count (its last piece's end).
// - to_bf16_rne(src, n, dst): dst[i] = the bf16 bits of src[i] rounded to nearest even: for every
//   non-NaN value exactly the device's __float2bfloat16 (cvt.rn.bf16.f32: ties to even,
//   subnormals kept, overflow to infinity); NaN gives 0x7fff (the canonical quiet NaN).
//   SSE2 eight values at a time where the compiler targets it, else a scalar loop.
// - VisionBatchInputs: one batch's inputs, row-major; row r: patches [r * patch_dim, +patch_dim)
//   (bf16 bits), taps and tap_w [4r, 4r + 4) (the position table rows and bilinear weights of
//   position_taps), cos and sin [r * head_dim/2, +head_dim/2) (vision_rope_tables of r's cell).
// - fill_vision_batch(c, batch, items, dst, pool): writes rows [0, vision_batch_rows(batch)) of
//   dst. The items were checked (check_vision_input) and packed by pack_vision_batches. The
//   patches are rounded over the pool's threads when one is given (the same bits: element-wise);
//   the tables are built on the caller's thread, per piece for its first frame pair (the rotary
//   from grid_h + grid_w axis evaluations) and copied to its other frame pairs: they depend on
//   the patch's cell only.
// - for_batch_rows(batch, r0, r1, fn): fn(piece, k0, k1) for each piece that rows [r0, r1) of the
//   batch reach, with [k0, k1) the piece's own rows among them (0 = its first), in order: how a
//   split of a batch's rows over threads finds its pieces.
// Thread safety: pure functions of their arguments (fill_vision_batch: the pool, one caller).
#pragma once

#include "core/cpu/thread_pool.h"
#include "core/model/vision_weights.h"
#include "core/vision/vision_input.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ninfer::core {

struct VisionBatchPiece {
    size_t item = 0, t0 = 0, nt = 0, frame = 0, row = 0;
};

std::vector<std::vector<VisionBatchPiece>> pack_vision_batches(std::span<const VisionInput* const> items, size_t rows);
size_t vision_batch_rows(std::span<const VisionBatchPiece> batch);
void for_batch_rows(std::span<const VisionBatchPiece> batch, size_t r0, size_t r1,
                    const std::function<void(const VisionBatchPiece&, size_t, size_t)>& fn);

void to_bf16_rne(const float* src, size_t n, uint16_t* dst);

struct VisionBatchInputs {
    uint16_t* patches = nullptr;
    int32_t* taps = nullptr;
    float* tap_w = nullptr;
    float* cos = nullptr;
    float* sin = nullptr;
};

void fill_vision_batch(const VisionConfig& c, std::span<const VisionBatchPiece> batch,
                       std::span<const VisionInput* const> items, const VisionBatchInputs& dst,
                       ThreadPool* pool = nullptr);

} // namespace ninfer::core
