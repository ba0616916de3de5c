// ninfer::core - codec dispatch by format, the direct formats (bf16, fp32, int32), row views.
#pragma GCC optimize("O3") // lets GCC vectorise the direct dot loops
#include "core/formats/codec.h"

#include "core/formats/codec_detail.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>

namespace ninfer::core {

namespace detail {
void throw_non_finite(TensorFormat format, float v, uint64_t index) {
    throw Error("formats: " + std::string(format_name(format)) + " cannot encode non-finite value " +
                std::to_string(v) + " at element " + std::to_string(index));
}
} // namespace detail

namespace {

void check_rows(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows) {
    const uint64_t rows = tensor_rows(t);
    if (row_begin > rows || n_rows > rows - row_begin)
        throw Error("formats: rows [" + std::to_string(row_begin) + "," +
                    std::to_string(row_begin + n_rows) + ") out of range for " + t.id + " with " +
                    std::to_string(rows) + " rows");
    const uint64_t expected = encoded_size(t.format, t.shape);
    if (t.bytes != expected || (!t.data && expected))
        throw Error("formats: tensor " + t.id + " holds " + std::to_string(t.bytes) +
                    " bytes; layout requires " + std::to_string(expected));
}

void decode_direct(const StoredTensor& t, uint64_t begin, uint64_t end, float* out) {
    switch (t.format) {
    case TensorFormat::Bf16:
        for (uint64_t i = begin; i < end; ++i) { // bf16_to_f32 inline, so the loop vectorises
            uint16_t w;
            std::memcpy(&w, t.data + 2 * i, 2);
            out[i - begin] = std::bit_cast<float>(uint32_t(w) << 16);
        }
        break;
    case TensorFormat::Fp32: std::memcpy(out, t.data + 4 * begin, 4 * (end - begin)); break;
    default:
        for (uint64_t i = begin; i < end; ++i) {
            int32_t v;
            std::memcpy(&v, t.data + 4 * i, 4);
            out[i - begin] = float(v);
        }
    }
}

NINFER_HOT_CLONES
void dot_direct(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x, float* y) {
    const uint64_t cols = tensor_cols(t);
    for (uint64_t r = 0; r < n_rows; ++r) {
        const uint64_t e0 = (row_begin + r) * cols;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (t.format == TensorFormat::Bf16) {
            const uint8_t* p = t.data + 2 * e0;
            uint64_t i = 0;
            for (; i + 8 <= cols; i += 8) {
                uint16_t w[8];
                std::memcpy(w, p + 2 * i, 16);
                for (int j = 0; j < 8; ++j)
                    acc[j] += std::bit_cast<float>(uint32_t(w[j]) << 16) * x[i + j];
            }
            for (; i < cols; ++i) {
                uint16_t w;
                std::memcpy(&w, p + 2 * i, 2);
                acc[i & 7] += bf16_to_f32(w) * x[i];
            }
        } else if (t.format == TensorFormat::Fp32) {
            const uint8_t* p = t.data + 4 * e0;
            for (uint64_t i = 0; i < cols; ++i) {
                float v;
                std::memcpy(&v, p + 4 * i, 4);
                acc[i & 7] += v * x[i];
            }
        } else {
            const uint8_t* p = t.data + 4 * e0;
            for (uint64_t i = 0; i < cols; ++i) {
                int32_t v;
                std::memcpy(&v, p + 4 * i, 4);
                acc[i & 7] += float(v) * x[i];
            }
        }
        y[r] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

} // namespace

uint64_t tensor_cols(const StoredTensor& t) { return t.shape.empty() ? 1 : t.shape.back(); }

uint64_t tensor_rows(const StoredTensor& t) {
    if (t.shape.empty())
        return 1;
    return shape_elements(std::span<const uint64_t>(t.shape).first(t.shape.size() - 1));
}

std::vector<uint8_t> encode(TensorFormat format, std::span<const uint64_t> shape,
                            std::span<const float> values) {
    const uint64_t bytes = encoded_size(format, shape);
    const uint64_t elems = shape_elements(shape);
    if (values.size() != elems)
        throw Error("formats: encode " + std::string(format_name(format)) + " got " +
                    std::to_string(values.size()) + " values for " + std::to_string(elems) +
                    " elements");
    switch (format) {
    case TensorFormat::Bf16: {
        std::vector<uint8_t> out(bytes);
        for (uint64_t i = 0; i < elems; ++i) {
            const uint16_t w = f32_to_bf16(values[i]);
            std::memcpy(out.data() + 2 * i, &w, 2);
        }
        return out;
    }
    case TensorFormat::Fp32: {
        std::vector<uint8_t> out(bytes);
        std::memcpy(out.data(), values.data(), bytes);
        return out;
    }
    case TensorFormat::Int32: {
        std::vector<uint8_t> out(bytes);
        for (uint64_t i = 0; i < elems; ++i) {
            const float v = values[i];
            if (!(v >= -2147483648.0f && v < 2147483648.0f) || std::trunc(v) != v)
                throw Error("formats: int32 cannot encode " + std::to_string(v) + " at element " +
                            std::to_string(i));
            const int32_t w = int32_t(v);
            std::memcpy(out.data() + 4 * i, &w, 4);
        }
        return out;
    }
    case TensorFormat::Fp8E4m3fnRowBf16: return detail::fp8_row_encode(shape[0], shape[1], values);
    case TensorFormat::Nvfp4: return detail::nvfp4_encode(shape[0], shape[1], values);
    default: return detail::row_split_encode(format, shape[0], shape[1], values);
    }
}

std::vector<uint8_t> encode_bf16_words(std::span<const uint16_t> words) {
    std::vector<uint8_t> out(words.size() * 2);
    std::memcpy(out.data(), words.data(), out.size());
    return out;
}

void decode_rows(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, float* out) {
    check_rows(t, row_begin, n_rows);
    if (n_rows == 0)
        return;
    const uint64_t cols = tensor_cols(t);
    switch (t.format) {
    case TensorFormat::Bf16:
    case TensorFormat::Fp32:
    case TensorFormat::Int32:
        decode_direct(t, row_begin * cols, (row_begin + n_rows) * cols, out);
        break;
    case TensorFormat::Fp8E4m3fnRowBf16: detail::fp8_row_decode(t, row_begin, n_rows, out); break;
    case TensorFormat::Nvfp4: detail::nvfp4_decode(t, row_begin, n_rows, out); break;
    default: detail::row_split_decode(t, row_begin, n_rows, out);
    }
}

void decode_elements(const StoredTensor& t, uint64_t elem_begin, uint64_t elem_end, float* out) {
    const uint64_t elems = shape_elements(t.shape);
    if (elem_begin > elem_end || elem_end > elems)
        throw Error("formats: elements [" + std::to_string(elem_begin) + "," +
                    std::to_string(elem_end) + ") out of range for " + t.id);
    if (format_is_direct(t.format)) {
        check_rows(t, 0, 0);
        decode_direct(t, elem_begin, elem_end, out);
        return;
    }
    // Quantized: decode the covering rows one at a time and copy the requested span.
    const uint64_t cols = tensor_cols(t);
    std::vector<float> row(cols);
    for (uint64_t e = elem_begin; e < elem_end;) {
        const uint64_t r = e / cols, c0 = e % cols;
        const uint64_t n = std::min(cols - c0, elem_end - e);
        decode_rows(t, r, 1, row.data());
        std::memcpy(out + (e - elem_begin), row.data() + c0, n * sizeof(float));
        e += n;
    }
}

void dot_rows(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x, float* y) {
    check_rows(t, row_begin, n_rows);
    if (n_rows == 0)
        return;
    switch (t.format) {
    case TensorFormat::Bf16:
    case TensorFormat::Fp32:
    case TensorFormat::Int32: dot_direct(t, row_begin, n_rows, x, y); break;
    case TensorFormat::Fp8E4m3fnRowBf16: detail::fp8_row_dot(t, row_begin, n_rows, x, y); break;
    case TensorFormat::Nvfp4: detail::nvfp4_dot(t, row_begin, n_rows, x, y); break;
    default: detail::row_split_dot(t, row_begin, n_rows, x, y);
    }
}

} // namespace ninfer::core
