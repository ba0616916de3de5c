// ninfer::core - row-band encoding mapped onto the planes of a whole tensor's layout.
#include "core/convert/row_chunks.h"

#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"

#include <array>
#include <vector>

namespace ninfer::core {
namespace {

std::span<const uint8_t> span_at(const std::vector<uint8_t>& v, uint64_t offset, uint64_t n) {
    return std::span<const uint8_t>(v).subspan(offset, n);
}

// nvfp4 rows [r0, r0+n) encoded with the whole matrix's divisor: 128 extra rows whose only
// nonzero element is whole_amax make the band's absmax (hence its divisor) the whole's, and a
// row's codes and scales depend only on its values and the divisor.
void write_nvfp4_chunk(uint64_t rows, uint64_t cols, uint64_t r0, uint64_t n, std::span<const float> values,
                       float whole_amax, const ObjectSink& sink) {
    if (n == rows) {
        const std::array<uint64_t, 2> shape = {rows, cols};
        sink(0, encode(TensorFormat::Nvfp4, shape, values));
        return;
    }
    std::vector<float> padded(values.begin(), values.end());
    padded.resize((n + 128) * cols, 0.0f);
    padded[n * cols] = whole_amax;
    const std::array<uint64_t, 2> shape = {n + 128, cols};
    const std::vector<uint8_t> chunk = encode(TensorFormat::Nvfp4, shape, padded);
    const Nvfp4Geometry whole = nvfp4_geometry(rows, cols), part = nvfp4_geometry(n + 128, cols);
    const uint64_t tile_scale_bytes = (cols / 64) * 512; // one 128-row tile of swizzled scales
    sink(r0 * cols / 2, span_at(chunk, 0, n * cols / 2));
    sink(whole.scale_off + r0 / 128 * tile_scale_bytes, span_at(chunk, part.scale_off, n / 128 * tile_scale_bytes));
    if (r0 == 0)
        sink(whole.div_off, span_at(chunk, part.div_off, 4));
}

} // namespace

void write_row_chunk(TensorFormat f, uint64_t rows, uint64_t cols, uint64_t r0, uint64_t n,
                     std::span<const float> values, float whole_amax, const ObjectSink& sink) {
    if (n == 0 || r0 + n > rows || values.size() != n * cols)
        throw Error("convert: row chunk [" + std::to_string(r0) + "," + std::to_string(r0 + n) +
                    ") does not fit a tensor of " + std::to_string(rows) + " rows");
    if (f == TensorFormat::Nvfp4)
        return write_nvfp4_chunk(rows, cols, r0, n, values, whole_amax, sink);
    const std::array<uint64_t, 2> shape = {n, cols};
    const std::vector<uint8_t> chunk = encode(f, shape, values);
    if (format_is_direct(f)) {
        sink(r0 * cols * (f == TensorFormat::Bf16 ? 2 : 4), chunk);
        return;
    }
    if (f == TensorFormat::Fp8E4m3fnRowBf16) {
        const RowScaleGeometry whole = row_scale_geometry(rows, cols), part = row_scale_geometry(n, cols);
        sink(r0 * cols, span_at(chunk, 0, n * cols));
        sink(whole.scale_off + 2 * r0, span_at(chunk, part.scale_off, 2 * n));
        return;
    }
    const RowSplitGeometry whole = row_split_geometry(f, rows, cols), part = row_split_geometry(f, n, cols);
    sink(r0 * whole.base_row, span_at(chunk, 0, n * whole.base_row));
    if (whole.high_row)
        sink(whole.high_off + r0 * whole.high_row, span_at(chunk, part.high_off, n * whole.high_row));
    sink(whole.scale_off + r0 * whole.scale_row, span_at(chunk, part.scale_off, n * whole.scale_row));
}

void write_plane_padding(TensorFormat f, uint64_t rows, uint64_t cols, const ObjectSink& sink) {
    static const std::array<uint8_t, 256> kZeros{}; // planes are 256-aligned: gaps are < 256 bytes
    auto pad = [&](uint64_t begin, uint64_t end) {
        if (end > begin)
            sink(begin, std::span<const uint8_t>(kZeros).first(end - begin));
    };
    if (format_is_direct(f))
        return;
    if (f == TensorFormat::Fp8E4m3fnRowBf16) {
        pad(rows * cols, row_scale_geometry(rows, cols).scale_off);
    } else if (f == TensorFormat::Nvfp4) {
        const Nvfp4Geometry g = nvfp4_geometry(rows, cols);
        pad(g.code_bytes, g.scale_off);
    } else {
        const RowSplitGeometry g = row_split_geometry(f, rows, cols);
        pad(rows * g.base_row, g.high_off);
        pad(g.high_off + rows * g.high_row, g.scale_off);
    }
}

} // namespace ninfer::core
