// ninfer::core - tensor format registry and the exact encoded sizes of docs/ARTIFACT_FORMAT.md §3.
#include "core/formats/format.h"

#include "core/formats/layout.h"
#include "core/util/error.h"

#include <string>

namespace ninfer::core {
namespace {

struct FormatInfo {
    TensorFormat format;
    std::string_view name;
    std::string_view legacy_name;
    std::string_view layout;
};

constexpr FormatInfo kFormats[] = {
    {TensorFormat::Bf16, "bf16", "BF16", "contiguous_le_v1"},
    {TensorFormat::Fp32, "fp32", "FP32", "contiguous_le_v1"},
    {TensorFormat::Int32, "int32", "I32", "contiguous_le_v1"},
    {TensorFormat::Q4G64Fp16, "q4_g64_fp16", "Q4G64_F16S", "row_split_k128_v1"},
    {TensorFormat::Q5G64Fp16, "q5_g64_fp16", "Q5G64_F16S", "row_split_k128_v1"},
    {TensorFormat::Q6G64Fp16, "q6_g64_fp16", "Q6G64_F16S", "row_split_k128_v1"},
    {TensorFormat::Q8G32Fp16, "q8_g32_fp16", "W8G32_F16S", "row_split_k128_v1"},
    {TensorFormat::Fp8E4m3fnRowBf16, "fp8_e4m3fn_row_bf16", "FP8_E4M3FN_ROW_BF16S", "row_scale_v1"},
    {TensorFormat::Nvfp4, "nvfp4", "NVFP4", "block_scale_k16_m128x4_v1"},
};

const FormatInfo& info(TensorFormat format) {
    for (const FormatInfo& f : kFormats)
        if (f.format == format)
            return f;
    throw Error("formats: invalid TensorFormat value " + std::to_string(int(format)));
}

uint64_t mul_checked(uint64_t a, uint64_t b, std::string_view what) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        throw Error("formats: " + std::string(what) + " overflows 64 bits");
    return r;
}

uint64_t add_checked(uint64_t a, uint64_t b, std::string_view what) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r))
        throw Error("formats: " + std::string(what) + " overflows 64 bits");
    return r;
}

uint64_t align_checked(uint64_t x, uint64_t a) {
    return add_checked(x, (a - x % a) % a, "encoded size");
}

std::string shape_text(std::span<const uint64_t> shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

void require_rank2(TensorFormat format, std::span<const uint64_t> shape) {
    if (shape.size() != 2 || shape[0] == 0 || shape[1] == 0)
        throw Error("formats: " + std::string(format_name(format)) +
                    " requires a rank-2 shape with positive dims, got " + shape_text(shape));
}

} // namespace

std::string_view format_name(TensorFormat format) { return info(format).name; }

TensorFormat format_from_name(std::string_view name) {
    for (const FormatInfo& f : kFormats)
        if (f.name == name)
            return f.format;
    throw Error("unknown tensor format " + std::string(name));
}

std::optional<TensorFormat> format_from_legacy_name(std::string_view v1_v2_name) {
    for (const FormatInfo& f : kFormats)
        if (f.legacy_name == v1_v2_name)
            return f.format;
    return std::nullopt;
}

std::string_view layout_name(TensorFormat format) { return info(format).layout; }

bool format_is_direct(TensorFormat format) {
    return format == TensorFormat::Bf16 || format == TensorFormat::Fp32 ||
           format == TensorFormat::Int32;
}

bool format_is_quantized(TensorFormat format) { return !format_is_direct(format); }

RowSplitGeometry row_split_geometry(TensorFormat format, uint64_t n, uint64_t k) {
    RowSplitGeometry g{};
    switch (format) {
    case TensorFormat::Q4G64Fp16: g.bits = 4, g.group = 64, g.base_group_bytes = 32, g.high_group_bytes = 0; break;
    case TensorFormat::Q5G64Fp16: g.bits = 5, g.group = 64, g.base_group_bytes = 32, g.high_group_bytes = 8; break;
    case TensorFormat::Q6G64Fp16: g.bits = 6, g.group = 64, g.base_group_bytes = 32, g.high_group_bytes = 16; break;
    case TensorFormat::Q8G32Fp16: g.bits = 8, g.group = 32, g.base_group_bytes = 32, g.high_group_bytes = 0; break;
    default: throw Error("formats: " + std::string(format_name(format)) + " is not row_split_k128_v1");
    }
    g.n = n;
    g.k = k;
    uint64_t kp = align_checked(k, 128);
    g.groups_per_row = kp / g.group;
    g.base_row = g.groups_per_row * g.base_group_bytes;
    g.high_row = g.groups_per_row * g.high_group_bytes;
    g.scale_row = 2 * g.groups_per_row;
    uint64_t base_bytes = mul_checked(n, g.base_row, "encoded size");
    uint64_t high_bytes = mul_checked(n, g.high_row, "encoded size");
    g.high_off = align_checked(base_bytes, 256);
    g.scale_off = add_checked(g.high_off, align_checked(high_bytes, 256), "encoded size");
    g.bytes = add_checked(g.scale_off, mul_checked(n, g.scale_row, "encoded size"), "encoded size");
    return g;
}

Nvfp4Geometry nvfp4_geometry(uint64_t n, uint64_t k) {
    if (n % 128 != 0 || k % 64 != 0)
        throw Error("formats: nvfp4 requires N%128=0 and K%64=0, got [" + std::to_string(n) + "," +
                    std::to_string(k) + "]");
    Nvfp4Geometry g{};
    g.n = n;
    g.k = k;
    uint64_t elems = mul_checked(n, k, "encoded size");
    g.code_bytes = elems / 2;
    g.scale_off = align_checked(g.code_bytes, 256);
    g.scale_bytes = elems / 16;
    g.div_off = add_checked(g.scale_off, g.scale_bytes, "encoded size");
    g.bytes = add_checked(g.div_off, 4, "encoded size");
    return g;
}

RowScaleGeometry row_scale_geometry(uint64_t n, uint64_t k) {
    RowScaleGeometry g{};
    g.n = n;
    g.k = k;
    g.scale_off = align_checked(mul_checked(n, k, "encoded size"), 256);
    g.bytes = add_checked(g.scale_off, mul_checked(n, 2, "encoded size"), "encoded size");
    return g;
}

uint64_t shape_elements(std::span<const uint64_t> shape) {
    uint64_t e = 1;
    for (uint64_t d : shape)
        e = mul_checked(e, d, "element count");
    return e;
}

uint64_t encoded_size(TensorFormat format, std::span<const uint64_t> shape) {
    if (format_is_direct(format)) {
        if (shape.size() > 16)
            throw Error("formats: shape must have rank 0 through 16, got rank " +
                        std::to_string(shape.size()));
        for (uint64_t d : shape)
            if (d == 0)
                throw Error("formats: shape dims must be positive, got " + shape_text(shape));
        uint64_t word = format == TensorFormat::Bf16 ? 2 : 4;
        return mul_checked(shape_elements(shape), word, "encoded size");
    }
    require_rank2(format, shape);
    switch (format) {
    case TensorFormat::Nvfp4: return nvfp4_geometry(shape[0], shape[1]).bytes;
    case TensorFormat::Fp8E4m3fnRowBf16: return row_scale_geometry(shape[0], shape[1]).bytes;
    default: return row_split_geometry(format, shape[0], shape[1]).bytes;
    }
}

} // namespace ninfer::core
