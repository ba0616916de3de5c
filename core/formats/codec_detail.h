// ninfer::core - per-layout codec entry points behind codec.h's dispatch (internal to formats/).
//
// Contract: the same as codec.h, per layout family; rows are already bounds-checked by the
// caller, `values` holds N*K f32 in C order, `out` is sized by the caller.
#pragma once

#include "core/formats/tensor.h"

#include <cstdint>
#include <span>
#include <vector>

// Hot loops are compiled twice (AVX2+FMA and baseline) and picked at load time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NINFER_HOT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define NINFER_HOT_CLONES
#endif

namespace ninfer::core::detail {

// One group of row_split_k128_v1 (G = 64 lanes for 4/5/6 bits, 32 for 8): signed codes <->
// base bytes (+ high bytes for 5/6 bits; `high` must be zeroed before packing).
void pack_group(uint32_t bits, const int8_t* codes, uint8_t* base, uint8_t* high);
void unpack_group(uint32_t bits, const uint8_t* base, const uint8_t* high, int8_t* codes);

std::vector<uint8_t> row_split_encode(TensorFormat format, uint64_t n, uint64_t k,
                                      std::span<const float> values);
void row_split_decode(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, float* out);
void row_split_dot(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x,
                   float* y);

std::vector<uint8_t> fp8_row_encode(uint64_t n, uint64_t k, std::span<const float> values);
void fp8_row_decode(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, float* out);
void fp8_row_dot(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x,
                 float* y);

std::vector<uint8_t> nvfp4_encode(uint64_t n, uint64_t k, std::span<const float> values);
void nvfp4_decode(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, float* out);
void nvfp4_dot(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x,
               float* y);

// Throws "formats: FORMAT cannot encode non-finite value V at element I".
[[noreturn]] void throw_non_finite(TensorFormat format, float v, uint64_t index);

} // namespace ninfer::core::detail
