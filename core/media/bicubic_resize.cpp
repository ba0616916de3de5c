// ninfer::core - PyTorch's uint8 antialiased bicubic, as bicubic_resize.h states it.
#include "core/media/bicubic_resize.h"

#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ninfer::core {
namespace {

// Keys' cubic with a = -0.5, in the operation order of PyTorch's cubic_convolution1/2.
double keys_cubic(double x) {
    constexpr double a = -0.5;
    x = std::fabs(x);
    if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
}

// One axis of in -> out pixels: output i reads inputs first[i] .. first[i] + count[i] - 1 with
// the integer weights weights[i * taps ...], at `precision` fractional bits.
struct Taps {
    std::vector<int> first, count;
    std::vector<int32_t> weights;
    int taps = 0, precision = 0;
};

Taps make_taps(int in, int out) {
    const double scale = double(in) / double(out);
    const double widen = std::max(scale, 1.0), support = 2.0 * widen, inv = scale >= 1.0 ? 1.0 / scale : 1.0;
    Taps t;
    t.taps = int(std::ceil(support)) * 2 + 1;
    t.first.resize(size_t(out)), t.count.resize(size_t(out));
    std::vector<double> w(size_t(out) * size_t(t.taps), 0.0);
    double w_max = 0.0;
    for (int i = 0; i < out; ++i) {
        const double centre = scale * (i + 0.5);
        const int lo = std::max(int(centre - support + 0.5), 0);
        const int n = std::clamp(std::min(int(centre + support + 0.5), in) - lo, 0, t.taps);
        double* wi = &w[size_t(i) * size_t(t.taps)];
        double total = 0.0;
        for (int j = 0; j < n; ++j) total += wi[j] = keys_cubic((double(j + lo) - centre + 0.5) * inv);
        for (int j = 0; j < n; ++j) {
            if (total != 0.0) wi[j] /= total;
            w_max = std::max(w_max, wi[j]);
        }
        t.first[size_t(i)] = lo, t.count[size_t(i)] = n;
    }
    while (t.precision < 22 && int(0.5 + w_max * double(1 << (t.precision + 1))) < (1 << 15)) ++t.precision;
    t.weights.resize(w.size());
    const double one = double(1 << t.precision);
    for (size_t k = 0; k < w.size(); ++k) t.weights[k] = int32_t(w[k] < 0 ? -0.5 + w[k] * one : 0.5 + w[k] * one);
    return t;
}

uint8_t settle(int32_t acc, int precision) { return uint8_t(std::clamp(acc >> precision, 0, 255)); }

// Interleaved RGB: one plane of 3 * width values a row.
bool is_packed(const RgbView& src) {
    return src.pixel_step == 3 && src.channel[1] == src.channel[0] + 1 && src.channel[2] == src.channel[0] + 2 &&
           src.row_stride[1] == src.row_stride[0] && src.row_stride[2] == src.row_stride[0];
}

// The rows of src at width dst_w: output x sums inputs first[x] .. first[x] + count[x] - 1 times
// weights[x * taps ..].
void horizontal_rows(const RgbView& src, int dst_w, uint8_t* dst, const Taps& t) {
    const int32_t half = int32_t(1) << (t.precision - 1);
    const ptrdiff_t step = src.pixel_step;
    for (int y = 0; y < src.height; ++y) {
        const uint8_t* r = src.channel[0] + ptrdiff_t(y) * src.row_stride[0];
        const uint8_t* g = src.channel[1] + ptrdiff_t(y) * src.row_stride[1];
        const uint8_t* b = src.channel[2] + ptrdiff_t(y) * src.row_stride[2];
        uint8_t* row = dst + size_t(y) * size_t(dst_w) * 3;
        for (int x = 0; x < dst_w; ++x) {
            const int32_t* k = &t.weights[size_t(x) * size_t(t.taps)];
            const ptrdiff_t first = ptrdiff_t(t.first[size_t(x)]) * step;
            int32_t ar = half, ag = half, ab = half;
            for (int j = 0; j < t.count[size_t(x)]; ++j) {
                const ptrdiff_t at = first + ptrdiff_t(j) * step;
                ar += k[j] * int32_t(r[at]), ag += k[j] * int32_t(g[at]), ab += k[j] * int32_t(b[at]);
            }
            row[3 * x] = settle(ar, t.precision), row[3 * x + 1] = settle(ag, t.precision);
            row[3 * x + 2] = settle(ab, t.precision);
        }
    }
}

#if defined(__x86_64__)
// horizontal_rows for packed RGB24 with SSE4.1, one output pixel's R, G, B (and a spare lane) at
// once. Every window is taps long: make_taps' window moved inside the row where it would pass
// its end, its weights shifted with it and zero elsewhere (integer sums: the zero terms change no
// bit). The shift and the clamp to 0..255 (two saturating packs) are settle()'s.
__attribute__((target("sse4.1"))) void horizontal_packed_sse41(const RgbView& src, int dst_w, uint8_t* dst, const Taps& t) {
    const size_t taps = size_t(t.taps), out_w = size_t(dst_w);
    std::vector<int> start(out_w);
    std::vector<int32_t> weights(out_w * taps, 0);
    for (size_t x = 0; x < out_w; ++x) {
        start[x] = std::min(t.first[x], src.width - t.taps);
        std::copy_n(&t.weights[x * taps], t.count[x], &weights[x * taps + size_t(t.first[x] - start[x])]);
    }
    const __m128i half = _mm_set1_epi32(int32_t(1) << (t.precision - 1)), shift = _mm_cvtsi32_si128(t.precision);
    for (int y = 0; y < src.height; ++y) {
        const uint8_t* row = src.channel[0] + ptrdiff_t(y) * src.row_stride[0];
        uint8_t* out = dst + size_t(y) * out_w * 3;
        for (size_t x = 0; x < out_w; ++x) {
            const uint8_t* p = row + 3 * ptrdiff_t(start[x]);
            const int32_t* k = &weights[x * taps];
            // A 4-byte load reads one byte past the pixel: past the row's end for the last pixel.
            const size_t whole = size_t(start[x]) + taps < size_t(src.width) ? taps : taps - 1;
            __m128i acc = half;
            for (size_t j = 0; j < taps; ++j) {
                int32_t v;
                if (j < whole) std::memcpy(&v, p + 3 * j, 4);
                else v = int32_t(p[3 * j]) | int32_t(p[3 * j + 1]) << 8 | int32_t(p[3 * j + 2]) << 16;
                acc = _mm_add_epi32(acc, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(v)), _mm_set1_epi32(k[j])));
            }
            const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(_mm_sra_epi32(acc, shift), acc), acc);
            const int32_t rgb = _mm_cvtsi128_si32(bytes);
            std::memcpy(out + 3 * x, &rgb, 3);
        }
    }
}
#endif

// Rows of src at width dst_w (RGB24, 3 * dst_w bytes a row).
void horizontal(const RgbView& src, int dst_w, uint8_t* dst) {
    const Taps t = make_taps(src.width, dst_w);
#if defined(__x86_64__)
    static const bool sse41 = __builtin_cpu_supports("sse4.1");
    if (sse41 && is_packed(src) && t.taps <= src.width) return horizontal_packed_sse41(src, dst_w, dst, t);
#endif
    horizontal_rows(src, dst_w, dst, t);
}

// acc[i] += k * p[i * step] for i < n (a plane's row, or every third value of interleaved RGB).
void multiply_add_strided(int32_t* acc, const uint8_t* p, size_t n, int32_t k, ptrdiff_t step) {
    for (size_t i = 0; i < n; ++i) acc[i] += k * int32_t(p[ptrdiff_t(i) * step]);
}

// The contiguous case, which the compiler vectorises.
void multiply_add_contiguous(int32_t* acc, const uint8_t* p, size_t n, int32_t k) {
    for (size_t i = 0; i < n; ++i) acc[i] += k * int32_t(p[i]);
}

// src's columns at height dst_h (RGB24, width src.width). Interleaved RGB is one plane of 3 * width
// values; other layouts are three planes, accumulated apart and interleaved at the end.
void vertical(const RgbView& src, int dst_h, uint8_t* dst) {
    const Taps t = make_taps(src.height, dst_h);
    const int32_t half = int32_t(1) << (t.precision - 1);
    const size_t w = size_t(src.width);
    const bool packed = is_packed(src);
    const int planes = packed ? 1 : 3;
    const size_t n = packed ? 3 * w : w;
    const ptrdiff_t step = packed ? 1 : src.pixel_step;
    std::vector<int32_t> acc(3 * w);
    for (int y = 0; y < dst_h; ++y) {
        std::fill(acc.begin(), acc.end(), half);
        const int32_t* k = &t.weights[size_t(y) * size_t(t.taps)];
        for (int j = 0; j < t.count[size_t(y)]; ++j) {
            const ptrdiff_t row = t.first[size_t(y)] + j;
            for (int c = 0; c < planes; ++c) {
                const uint8_t* p = src.channel[c] + row * src.row_stride[c];
                if (step == 1) multiply_add_contiguous(&acc[size_t(c) * n], p, n, k[j]);
                else multiply_add_strided(&acc[size_t(c) * n], p, n, k[j], step);
            }
        }
        uint8_t* out = dst + size_t(y) * 3 * w;
        if (packed) {
            for (size_t i = 0; i < 3 * w; ++i) out[i] = settle(acc[i], t.precision);
        } else {
            for (size_t x = 0; x < w; ++x)
                for (size_t c = 0; c < 3; ++c) out[3 * x + c] = settle(acc[c * w + x], t.precision);
        }
    }
}

} // namespace

RgbView rgb24_view(const uint8_t* rgb, int width, int height, ptrdiff_t stride) {
    return {width, height, {rgb, rgb + 1, rgb + 2}, 3, {stride, stride, stride}};
}

void resize_bicubic_u8(const RgbView& src, int dst_w, int dst_h, uint8_t* dst) {
    if (src.width <= 0 || src.height <= 0 || dst_w <= 0 || dst_h <= 0)
        throw Error("media: cannot resize " + std::to_string(src.width) + "x" + std::to_string(src.height) + " to " +
                    std::to_string(dst_w) + "x" + std::to_string(dst_h));
    const bool across = dst_w != src.width, down = dst_h != src.height;
    if (across && down) {
        std::vector<uint8_t> mid(size_t(src.height) * size_t(dst_w) * 3);
        horizontal(src, dst_w, mid.data());
        vertical(rgb24_view(mid.data(), dst_w, src.height, ptrdiff_t(dst_w) * 3), dst_h, dst);
    } else if (across) {
        horizontal(src, dst_w, dst);
    } else if (down) {
        vertical(src, dst_h, dst);
    } else {
        for (int y = 0; y < dst_h; ++y)
            for (int x = 0; x < dst_w; ++x)
                for (int c = 0; c < 3; ++c)
                    dst[(size_t(y) * size_t(dst_w) + size_t(x)) * 3 + size_t(c)] =
                        src.channel[c][ptrdiff_t(y) * src.row_stride[c] + ptrdiff_t(x) * src.pixel_step];
    }
}

} // namespace ninfer::core
