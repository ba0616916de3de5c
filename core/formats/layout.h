// ninfer::core - byte geometry of the quantized layouts (docs/ARTIFACT_FORMAT.md §3.2-3.4).
//
// Contract:
// - row_split_geometry(format, N, K) for q4/q5/q6/q8 (row_split_k128_v1): planes base | high |
//   scales with the offsets of §3.2; throws ninfer::Error for other formats or on overflow.
// - nvfp4_geometry(N, K) (block_scale_k16_m128x4_v1): throws unless N%128==0 and K%64==0.
//   nvfp4_scale_index(K, n, g) is the swizzled byte index (relative to scale_off) of the E4M3
//   scale of row n, 16-group g.
// - row_scale_geometry(N, K) (row_scale_v1, fp8_e4m3fn_row_bf16).
// - shape_elements(shape): product of dims with overflow check ([] -> 1).
// Used by codecs, the artifact reader and backends that address planes directly. Pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "core/formats/tensor.h"

namespace ninfer::core {

struct RowSplitGeometry {
    uint32_t bits, group, base_group_bytes, high_group_bytes;
    uint64_t n, k;
    uint64_t groups_per_row; // physical groups: align_up(K,128)/G
    uint64_t base_row, high_row, scale_row;
    uint64_t high_off, scale_off, bytes;
};

struct Nvfp4Geometry {
    uint64_t n, k;
    uint64_t code_bytes, scale_off, scale_bytes, div_off, bytes;
};

struct RowScaleGeometry {
    uint64_t n, k;
    uint64_t scale_off, bytes;
};

RowSplitGeometry row_split_geometry(TensorFormat format, uint64_t n, uint64_t k);
Nvfp4Geometry nvfp4_geometry(uint64_t n, uint64_t k);
RowScaleGeometry row_scale_geometry(uint64_t n, uint64_t k);
uint64_t shape_elements(std::span<const uint64_t> shape);

inline uint64_t nvfp4_scale_index(uint64_t k, uint64_t n, uint64_t g) {
    uint64_t rt = n / 128, ri = n % 128, kt = g / 4, lane = g % 4;
    return (rt * (k / 64) + kt) * 512 + (ri % 32) * 16 + (ri / 32) * 4 + lane;
}

} // namespace ninfer::core
