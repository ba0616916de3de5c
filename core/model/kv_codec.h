// ninfer::core - the KV cache row formats of docs/MODEL.md §11, shared by every backend so a CPU
// result can be compared per dtype with a GPU one and lane images move between backends.
//
// Contract: one row is one KV head's K or V vector of head_dim values.
// - bf16: head_dim bf16 words (RNE).
// - fp8:  head_dim E4M3FN codes, then one bf16 row scale (fp8_row_maxabs: scale = bf16(amax/448),
//         a zero word with amax > 0 becomes 0x0001, codes = e4m3(x / scale) by reciprocal multiply,
//         clipped to ±448). 258 bytes for head_dim 256.
// - int8: head_dim int8 codes, then one fp16 scale per 64-value group (f16(amax/127), codes
//         round-to-nearest-even of x / scale clamped to ±127, decode code * scale). 264 bytes for 256.
// - f32:  head_dim f32 words, exact (the reference mode for comparisons with fp32 transformers).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace ninfer::core {

// Bf16, Fp8 (e4m3, per-row scale) and Int8 (group 64) are the serving dtypes of docs/MODEL.md §11.
// F32 keeps K/V exact: the CPU reference mode that tests compare with fp32 transformers.
enum class KvDtype : uint8_t { Bf16, Fp8, Int8, F32 };

inline constexpr uint32_t kKvInt8Group = 64;

uint64_t kv_row_bytes(KvDtype dtype, uint32_t head_dim);
void kv_encode_row(KvDtype dtype, const float* values, uint32_t head_dim, uint8_t* out);
void kv_decode_row(KvDtype dtype, const uint8_t* row, uint32_t head_dim, float* out);

std::string_view kv_dtype_name(KvDtype dtype);            // "bf16", "fp8", "int8", "f32"
KvDtype kv_dtype_from_name(std::string_view name);        // throws ninfer::Error on others

} // namespace ninfer::core
