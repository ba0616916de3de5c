// ninfer::core - tensor format registry and encoded sizes (docs/ARTIFACT_FORMAT.md §2, §3).
//
// Contract:
// - format_name / format_from_name use the v3 spellings ("bf16", "q4_g64_fp16", ...); unknown
//   names throw ninfer::Error("unknown tensor format X"). layout_name gives the one layout each
//   format is stored in (v3 spelling). v1/v2 spellings map through format_from_legacy_name.
// - encoded_size(format, shape) is the exact byte count of §3 for that shape, or throws
//   ninfer::Error naming the violated shape rule (rank, divisibility).
#pragma once

#include "core/formats/tensor.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ninfer::core {

std::string_view format_name(TensorFormat format);
TensorFormat format_from_name(std::string_view name);
std::optional<TensorFormat> format_from_legacy_name(std::string_view v1_v2_name);
std::string_view layout_name(TensorFormat format);
bool format_is_direct(TensorFormat format);    // bf16, fp32, int32
bool format_is_quantized(TensorFormat format); // every other format (rank 2, row-addressable)

uint64_t encoded_size(TensorFormat format, std::span<const uint64_t> shape);

} // namespace ninfer::core
