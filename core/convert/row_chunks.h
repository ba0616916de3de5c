// ninfer::core - encode a tensor a band of rows at a time and place each band's bytes in the
// whole tensor's encoding (docs/ARTIFACT_FORMAT.md §3.2 "Row view"), so the converter never
// holds a whole encoded object.
//
// Contract:
// - A tensor is viewed as [rows, cols] (cols = last dim). write_row_chunk(f, rows, cols, r0, n,
//   values, whole_amax, sink) encodes rows [r0, r0+n) (values: n*cols f32) and calls
//   sink(offset, bytes) for each piece of the whole encoding those rows own: one span for
//   bf16/fp32/int32; codes and row scales for fp8_e4m3fn_row_bf16; base, high (q5/q6) and scales
//   for q4/q5/q6/q8; codes and swizzled scales for nvfp4, plus the divisor with the chunk at r0 = 0.
//   The bytes are exactly those encode(f, whole shape, all values) puts there.
// - nvfp4's divisor depends on the whole matrix: pass whole_amax = max |x| over the tensor (other
//   formats ignore it); r0 and n must be multiples of 128 unless n == rows.
// - write_plane_padding(f, rows, cols, sink) writes the zero bytes that align planes (the only
//   bytes no row owns). Chunks covering every row once plus the padding cover the object exactly
//   once. Errors (non-finite input, bad geometry) throw ninfer::Error from the codec.
// Thread safety: pure functions.
#pragma once

#include "core/formats/tensor.h"

#include <cstdint>
#include <functional>
#include <span>

namespace ninfer::core {

// Receives encoded bytes at an offset within one object's encoding.
using ObjectSink = std::function<void(uint64_t offset, std::span<const uint8_t> bytes)>;

void write_row_chunk(TensorFormat format, uint64_t rows, uint64_t cols, uint64_t r0, uint64_t n,
                     std::span<const float> values, float whole_amax, const ObjectSink& sink);
void write_plane_padding(TensorFormat format, uint64_t rows, uint64_t cols, const ObjectSink& sink);

} // namespace ninfer::core
