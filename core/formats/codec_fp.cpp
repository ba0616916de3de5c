// ninfer::core - fp8_e4m3fn_row_bf16 (row_scale_v1) and nvfp4 (block_scale_k16_m128x4_v1) codecs.
#include "core/formats/codec.h"
#include "core/formats/codec_detail.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ninfer::core::detail {
namespace {

struct E4m3Lut {
    float v[256];
    E4m3Lut() {
        for (int b = 0; b < 256; ++b)
            v[b] = e4m3_to_f32(uint8_t(b));
    }
};

const float* e4m3_lut() {
    static const E4m3Lut lut;
    return lut.v;
}

// E2M1 value of every byte's two nibbles: pair[b] = {low, high}.
struct E2m1PairLut {
    float v[256][2];
    E2m1PairLut() {
        for (int b = 0; b < 256; ++b)
            v[b][0] = e2m1_to_f32(uint8_t(b & 0xF)), v[b][1] = e2m1_to_f32(uint8_t(b >> 4));
    }
};

const E2m1PairLut& e2m1_pairs() {
    static const E2m1PairLut lut;
    return lut;
}

float read_f32(const uint8_t* p) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
}

uint16_t read_u16(const uint8_t* p) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    return w;
}

NINFER_HOT_CLONES
void fp8_dot_impl(const uint8_t* data, RowScaleGeometry g, uint64_t row_begin, uint64_t n_rows,
                  const float* x, float* y, const float* lut) {
    for (uint64_t r = 0; r < n_rows; ++r) {
        const uint64_t row = row_begin + r;
        const uint8_t* c = data + row * g.k;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        uint64_t i = 0;
        for (; i + 8 <= g.k; i += 8)
            for (int j = 0; j < 8; ++j)
                acc[j] += lut[c[i + j]] * x[i + j];
        for (; i < g.k; ++i)
            acc[i & 7] += lut[c[i]] * x[i];
        float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        y[r] = s * bf16_to_f32(read_u16(data + g.scale_off + 2 * row));
    }
}

NINFER_HOT_CLONES
void nvfp4_dot_impl(const uint8_t* data, Nvfp4Geometry g, uint64_t row_begin, uint64_t n_rows,
                    const float* x, float* y, const float* lut, const E2m1PairLut& pairs) {
    const float d_w = read_f32(data + g.div_off);
    const uint64_t n_groups = g.k / 16;
    for (uint64_t r = 0; r < n_rows; ++r) {
        const uint64_t row = row_begin + r;
        const uint8_t* codes = data + row * (g.k / 2);
        float acc_row = 0.0f;
        for (uint64_t grp = 0; grp < n_groups; ++grp) {
            const float s = lut[data[g.scale_off + nvfp4_scale_index(g.k, row, grp)]];
            if (s == 0.0f)
                continue;
            const uint8_t* c = codes + grp * 8;
            const float* xg = x + grp * 16;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int j = 0; j < 8; ++j) {
                acc[j] += pairs.v[c[j]][0] * xg[2 * j];
                acc[j] += pairs.v[c[j]][1] * xg[2 * j + 1];
            }
            float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
            acc_row += s * sum;
        }
        y[r] = acc_row / d_w;
    }
}

} // namespace

std::vector<uint8_t> fp8_row_encode(uint64_t n, uint64_t k, std::span<const float> values) {
    const RowScaleGeometry g = row_scale_geometry(n, k);
    std::vector<uint8_t> out(g.bytes, 0);
    std::vector<float> xb(k);
    for (uint64_t row = 0; row < n; ++row) {
        float amax = 0.0f;
        for (uint64_t i = 0; i < k; ++i) {
            const float v = values[row * k + i];
            if (!std::isfinite(v))
                throw_non_finite(TensorFormat::Fp8E4m3fnRowBf16, v, row * k + i);
            xb[i] = bf16_to_f32(f32_to_bf16(v));
            amax = std::max(amax, std::fabs(xb[i]));
        }
        if (amax == 0.0f)
            continue; // scale +0, codes 0
        uint16_t sw = f32_to_bf16(float(double(amax) / 448.0));
        if (sw == 0)
            sw = 0x0001;
        const float inv = float(1.0 / double(bf16_to_f32(sw)));
        for (uint64_t i = 0; i < k; ++i) {
            float y = xb[i] * inv;
            y = std::copysign(std::min(std::fabs(y), 448.0f), y);
            out[row * k + i] = f32_to_e4m3(y);
        }
        std::memcpy(out.data() + g.scale_off + 2 * row, &sw, 2);
    }
    return out;
}

void fp8_row_decode(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, float* out) {
    const RowScaleGeometry g = row_scale_geometry(t.shape[0], t.shape[1]);
    const float* lut = e4m3_lut();
    for (uint64_t r = 0; r < n_rows; ++r) {
        const uint64_t row = row_begin + r;
        const float s = bf16_to_f32(read_u16(t.data + g.scale_off + 2 * row));
        const uint8_t* c = t.data + row * g.k;
        for (uint64_t i = 0; i < g.k; ++i)
            out[r * g.k + i] = lut[c[i]] * s;
    }
}

void fp8_row_dot(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x,
                 float* y) {
    fp8_dot_impl(t.data, row_scale_geometry(t.shape[0], t.shape[1]), row_begin, n_rows, x, y,
                 e4m3_lut());
}

std::vector<uint8_t> nvfp4_encode(uint64_t n, uint64_t k, std::span<const float> values) {
    const Nvfp4Geometry g = nvfp4_geometry(n, k);
    std::vector<uint8_t> out(g.bytes, 0);
    float amax = 0.0f;
    for (uint64_t i = 0; i < n * k; ++i) {
        if (!std::isfinite(values[i]))
            throw_non_finite(TensorFormat::Nvfp4, values[i], i);
        amax = std::max(amax, std::fabs(values[i]));
    }
    const float d_w = amax == 0.0f ? 1.0f : float(6.0 * 448.0 / double(amax));
    for (uint64_t row = 0; row < n; ++row) {
        for (uint64_t grp = 0; grp < k / 16; ++grp) {
            const float* xg = values.data() + row * k + grp * 16;
            float bmax = 0.0f;
            for (int i = 0; i < 16; ++i)
                bmax = std::max(bmax, std::fabs(xg[i]));
            const float raw = std::min(bmax * d_w / 6.0f, 448.0f);
            uint8_t sb = f32_to_e4m3(raw);
            if (sb == 0 && bmax > 0.0f)
                sb = 0x01;
            out[g.scale_off + nvfp4_scale_index(k, row, grp)] = sb;
            const float scale = e4m3_to_f32(sb);
            uint8_t* c = out.data() + row * (k / 2) + grp * 8;
            for (int i = 0; i < 16; ++i) {
                const float y = scale == 0.0f ? 0.0f : xg[i] * d_w / scale;
                c[i / 2] |= uint8_t(f32_to_e2m1(y) << ((i & 1) * 4));
            }
        }
    }
    std::memcpy(out.data() + g.div_off, &d_w, 4);
    return out;
}

void nvfp4_decode(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, float* out) {
    const Nvfp4Geometry g = nvfp4_geometry(t.shape[0], t.shape[1]);
    const float d_w = read_f32(t.data + g.div_off);
    const float* lut = e4m3_lut();
    for (uint64_t r = 0; r < n_rows; ++r) {
        const uint64_t row = row_begin + r;
        const uint8_t* codes = t.data + row * (g.k / 2);
        for (uint64_t kk = 0; kk < g.k; ++kk) {
            const float s = lut[t.data[g.scale_off + nvfp4_scale_index(g.k, row, kk / 16)]];
            const uint8_t nib = uint8_t((codes[kk / 2] >> ((kk & 1) * 4)) & 0xF);
            out[r * g.k + kk] = e2m1_to_f32(nib) * s / d_w;
        }
    }
}

void nvfp4_dot(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x,
               float* y) {
    nvfp4_dot_impl(t.data, nvfp4_geometry(t.shape[0], t.shape[1]), row_begin, n_rows, x, y,
                   e4m3_lut(), e2m1_pairs());
}

} // namespace ninfer::core::detail
