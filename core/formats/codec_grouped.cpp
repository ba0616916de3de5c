// ninfer::core - q4/q5/q6_g64_fp16 and q8_g32_fp16 in row_split_k128_v1: encode, decode, dot.
// The dot kernels rely on loop vectorisation, which GCC enables fully only from -O3.
#pragma GCC optimize("O3")
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

int qmax_of(uint32_t bits) { return bits == 8 ? 127 : (1 << (bits - 1)) - 1; }
int qmin_of(uint32_t bits) { return bits == 8 ? -127 : -(1 << (bits - 1)); }

} // namespace

// Unpacks one group's signed codes (G lanes) from its base and high bytes.
void unpack_group(uint32_t bits, const uint8_t* base, const uint8_t* high, int8_t* q) {
    if (bits == 8) {
        std::memcpy(q, base, 32);
        return;
    }
    for (int j = 0; j < 32; ++j) {
        uint8_t b = base[j];
        q[2 * j] = int8_t(b & 0xF);
        q[2 * j + 1] = int8_t(b >> 4);
    }
    if (bits == 4) {
        for (int i = 0; i < 64; ++i)
            q[i] = int8_t(q[i] << 4) >> 4;
    } else if (bits == 5) {
        for (int i = 0; i < 64; ++i) {
            int u = q[i] | (((high[i >> 3] >> (i & 7)) & 1) << 4);
            q[i] = int8_t(u << 3) >> 3;
        }
    } else { // 6 bits: lane i owns stream bits 2i (bit4) and 2i+1 (bit5)
        for (int i = 0; i < 64; ++i) {
            int u = q[i] | (((high[i >> 2] >> ((i & 3) * 2)) & 3) << 4);
            q[i] = int8_t(u << 2) >> 2;
        }
    }
}

void pack_group(uint32_t bits, const int8_t* q, uint8_t* base, uint8_t* high) {
    if (bits == 8) {
        std::memcpy(base, q, 32);
        return;
    }
    for (int j = 0; j < 32; ++j)
        base[j] = uint8_t((q[2 * j] & 0xF) | ((q[2 * j + 1] & 0xF) << 4));
    if (bits == 5) {
        for (int i = 0; i < 64; ++i)
            high[i >> 3] |= uint8_t(((q[i] >> 4) & 1) << (i & 7));
    } else if (bits == 6) {
        for (int i = 0; i < 64; ++i)
            high[i >> 2] |= uint8_t(((q[i] >> 4) & 3) << ((i & 3) * 2));
    }
}

namespace {

inline const uint16_t* scale_ptr(const StoredTensor& t, const RowSplitGeometry& g, uint64_t row) {
    return reinterpret_cast<const uint16_t*>(t.data + g.scale_off + row * g.scale_row);
}

// Signed codes of one group as floats; (u ^ 2^(b-1)) - 2^(b-1) sign-extends a b-bit word.
// A high-plane byte spread over its lanes, as bytes already shifted to bit 4 (and 5):
// q5 covers 8 lanes (one bit each), q6 covers 4 lanes (two bits each).
struct HighExpand {
    uint64_t q5[256];
    uint32_t q6[256];
    constexpr HighExpand() : q5(), q6() {
        for (uint32_t b = 0; b < 256; ++b) {
            for (int t = 0; t < 8; ++t)
                q5[b] |= uint64_t((b >> t) & 1) << (8 * t + 4);
            for (int t = 0; t < 4; ++t)
                q6[b] |= uint32_t((b >> (2 * t)) & 3) << (8 * t + 4);
        }
    }
};
constexpr HighExpand kHighExpand;

template <uint32_t BITS>
inline void group_codes_f32(const uint8_t* base, const uint8_t* high, float* qf) {
    if constexpr (BITS == 8) {
        for (int i = 0; i < 32; ++i)
            qf[i] = float(int8_t(base[i]));
    } else {
        constexpr int half = 1 << (BITS - 1);
        alignas(64) uint8_t u[64];
        for (int j = 0; j < 32; ++j) {
            u[2 * j] = base[j] & 0xF;
            u[2 * j + 1] = base[j] >> 4;
        }
        if constexpr (BITS == 5) {
            for (int m = 0; m < 8; ++m) {
                uint64_t w;
                std::memcpy(&w, u + 8 * m, 8);
                w |= kHighExpand.q5[high[m]];
                std::memcpy(u + 8 * m, &w, 8);
            }
        } else if constexpr (BITS == 6) {
            for (int m = 0; m < 16; ++m) {
                uint32_t w;
                std::memcpy(&w, u + 4 * m, 4);
                w |= kHighExpand.q6[high[m]];
                std::memcpy(u + 4 * m, &w, 4);
            }
        }
        for (int i = 0; i < 64; ++i)
            qf[i] = float((int(u[i]) ^ half) - half);
    }
}

template <uint32_t BITS>
NINFER_HOT_CLONES void dot_rows_impl(const uint8_t* data, const RowSplitGeometry g,
                                     uint64_t row_begin, uint64_t n_rows, const float* x, float* y) {
    constexpr uint32_t G = BITS == 8 ? 32 : 64;
    constexpr uint32_t HB = BITS == 5 ? 8 : BITS == 6 ? 16 : 0; // high bytes per group
    const uint64_t full_groups = g.k / G;
    const uint64_t tail = g.k % G;
    alignas(64) float qf[64];
    for (uint64_t r = 0; r < n_rows; ++r) {
        const uint64_t row = row_begin + r;
        const uint8_t* base = data + row * g.base_row;
        const uint8_t* high = data + g.high_off + row * g.high_row;
        const uint8_t* scales = data + g.scale_off + row * g.scale_row;
        float acc_row = 0.0f;
        for (uint64_t grp = 0; grp < full_groups; ++grp) {
            uint16_t sw;
            std::memcpy(&sw, scales + 2 * grp, 2);
            group_codes_f32<BITS>(base + grp * 32, high + grp * HB, qf);
            const float* xg = x + grp * G;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (uint32_t i = 0; i < G; i += 8)
                for (int j = 0; j < 8; ++j)
                    acc[j] += qf[i + j] * xg[i + j];
            const float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
            acc_row += f16_to_f32(sw) * s;
        }
        if (tail) {
            uint16_t sw;
            std::memcpy(&sw, scales + 2 * full_groups, 2);
            group_codes_f32<BITS>(base + full_groups * 32, high + full_groups * HB, qf);
            const float* xg = x + full_groups * G;
            float s = 0.0f;
            for (uint32_t i = 0; i < tail; ++i)
                s += qf[i] * xg[i];
            acc_row += f16_to_f32(sw) * s;
        }
        y[r] = acc_row;
    }
}

} // namespace

std::vector<uint8_t> row_split_encode(TensorFormat format, uint64_t n, uint64_t k,
                                      std::span<const float> values) {
    const RowSplitGeometry g = row_split_geometry(format, n, k);
    std::vector<uint8_t> out(g.bytes, 0);
    const int qmax = qmax_of(g.bits), qmin = qmin_of(g.bits);
    const uint32_t G = g.group;
    int8_t q[64];
    for (uint64_t row = 0; row < n; ++row) {
        const float* xr = values.data() + row * k;
        for (uint64_t grp = 0; grp * G < k; ++grp) {
            const uint64_t k0 = grp * G;
            const uint32_t len = uint32_t(std::min<uint64_t>(G, k - k0));
            float amax = 0.0f;
            for (uint32_t i = 0; i < len; ++i) {
                float v = xr[k0 + i];
                if (!std::isfinite(v))
                    throw_non_finite(format, v, row * k + k0 + i);
                amax = std::max(amax, std::fabs(v));
            }
            if (amax == 0.0f)
                continue; // scale +0, codes 0
            float raw32 = float(double(amax) / double(qmax));
            uint16_t s16 = f32_to_f16(raw32);
            if (s16 == 0)
                s16 = 0x0001;
            if (s16 == 0x7c00)
                throw ninfer::Error("formats: " + std::string(format_name(format)) +
                            " scale overflows binary16 (group max " + std::to_string(amax) + ")");
            const float inv32 = float(1.0 / double(f16_to_f32(s16)));
            std::memset(q, 0, sizeof q);
            for (uint32_t i = 0; i < len; ++i) {
                float c = std::nearbyint(xr[k0 + i] * inv32);
                q[i] = int8_t(std::clamp(c, float(qmin), float(qmax)));
            }
            pack_group(g.bits, q, out.data() + row * g.base_row + grp * g.base_group_bytes,
                       out.data() + g.high_off + row * g.high_row + grp * g.high_group_bytes);
            std::memcpy(out.data() + g.scale_off + row * g.scale_row + 2 * grp, &s16, 2);
        }
    }
    return out;
}

void row_split_decode(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, float* out) {
    const RowSplitGeometry g = row_split_geometry(t.format, t.shape[0], t.shape[1]);
    const uint32_t G = g.group;
    int8_t q[64];
    for (uint64_t r = 0; r < n_rows; ++r) {
        const uint64_t row = row_begin + r;
        const uint16_t* scales = scale_ptr(t, g, row);
        float* o = out + r * g.k;
        for (uint64_t grp = 0; grp * G < g.k; ++grp) {
            uint16_t sw;
            std::memcpy(&sw, scales + grp, 2);
            const float s = f16_to_f32(sw);
            unpack_group(g.bits, t.data + row * g.base_row + grp * g.base_group_bytes,
                         t.data + g.high_off + row * g.high_row + grp * g.high_group_bytes, q);
            const uint64_t len = std::min<uint64_t>(G, g.k - grp * G);
            for (uint64_t i = 0; i < len; ++i)
                o[grp * G + i] = s * float(q[i]);
        }
    }
}

void row_split_dot(const StoredTensor& t, uint64_t row_begin, uint64_t n_rows, const float* x,
                   float* y) {
    const RowSplitGeometry g = row_split_geometry(t.format, t.shape[0], t.shape[1]);
    switch (g.bits) {
    case 4: dot_rows_impl<4>(t.data, g, row_begin, n_rows, x, y); break;
    case 5: dot_rows_impl<5>(t.data, g, row_begin, n_rows, x, y); break;
    case 6: dot_rows_impl<6>(t.data, g, row_begin, n_rows, x, y); break;
    default: dot_rows_impl<8>(t.data, g, row_begin, n_rows, x, y);
    }
}

} // namespace ninfer::core::detail
