// ninfer::core - encode and decode every tensor format on the CPU (docs/ARTIFACT_FORMAT.md §2, §3).
//
// Contract:
// - encode(format, shape, values) applies the canonical encoder of docs/ARTIFACT_FORMAT.md §2
//   (grouped_absmax with reciprocal multiply and RNE, fp8_row_maxabs, nvfp4_absmax, bf16 RNE) to
//   C-order f32 values and returns exactly encoded_size(format, shape) bytes, bit-exact with the
//   worked vectors of §2-§3. Non-finite input to a quantized format throws ninfer::Error.
// - encode_bf16_words copies bf16 words verbatim (bit-exact, NaN payloads kept).
// - decode_rows(t, row_begin, n_rows, out) writes n_rows * cols f32 values, where a tensor of shape
//   [d0,...,dk] is viewed as rows = d0*...*d(k-1), cols = dk (a scalar or vector is one row).
//   decode_elements works on any element range (quantized formats decode the covering rows).
//   Both throw ninfer::Error when the range is out of bounds or t.bytes != encoded_size.
// - dot_rows(t, row_begin, n_rows, x, y): y[r] = sum_k decode(t)[row_begin+r][k] * x[k], in f32,
//   without materialising the decoded row (the CPU backend's hot path).
// Thread safety: pure functions.
#pragma once

#include "core/formats/tensor.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ninfer::core {

std::vector<uint8_t> encode(TensorFormat format, std::span<const uint64_t> shape,
                            std::span<const float> values);
std::vector<uint8_t> encode_bf16_words(std::span<const uint16_t> words);

// Row view of any tensor: cols = last dim (1 for a scalar), rows = product of the others.
uint64_t tensor_rows(const StoredTensor& t);
uint64_t tensor_cols(const StoredTensor& t);

void decode_rows(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, float* out);
void decode_elements(const StoredTensor& t, uint64_t elem_begin, uint64_t elem_end, float* out);
void dot_rows(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x, float* y);

// Scalar conversions shared by codecs, tests and kernels' CPU references.
float bf16_to_f32(uint16_t w);
uint16_t f32_to_bf16(float f); // RNE, NaN kept quiet
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f); // RNE, subnormals kept
float e4m3_to_f32(uint8_t b);
uint8_t f32_to_e4m3(float f); // RNE, saturating at 448, no NaN produced for finite input
float e2m1_to_f32(uint8_t nibble);
uint8_t f32_to_e2m1(float y); // nvfp4_absmax thresholds (ties to even code), saturating at 6

} // namespace ninfer::core
