// ninfer::core - scalar number conversions (bf16, binary16, E4M3FN, E2M1) with RNE rounding.
#include "core/formats/codec.h"

#include <bit>
#include <cmath>

namespace ninfer::core {
namespace {

// Shifts v right by s (1..31) rounding to nearest, ties to even.
uint32_t shift_rne(uint32_t v, int s) {
    uint32_t q = v >> s;
    uint32_t rem = v & ((1u << s) - 1);
    uint32_t half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1)))
        ++q;
    return q;
}

struct E4m3Table {
    float v[256];
    E4m3Table() {
        for (int b = 0; b < 256; ++b) {
            int e = (b >> 3) & 0xF, m = b & 7;
            float mag;
            if (e == 15 && m == 7)
                mag = NAN;
            else if (e == 0)
                mag = std::ldexp(float(m), -9);
            else
                mag = std::ldexp(1.0f + float(m) / 8.0f, e - 7);
            v[b] = (b & 0x80) ? -mag : mag;
        }
    }
};
const E4m3Table kE4m3;

constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

} // namespace

float bf16_to_f32(uint16_t w) { return std::bit_cast<float>(uint32_t(w) << 16); }

uint16_t f32_to_bf16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return uint16_t((x >> 16) | 0x0040u); // NaN: keep sign and payload top, force quiet
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    uint32_t x;
    if (e == 0x1f)
        x = sign | 0x7f800000u | (m << 13);
    else if (e != 0)
        x = sign | ((e + 112) << 23) | (m << 13);
    else if (m == 0)
        x = sign;
    else
        return std::bit_cast<float>(sign) + (sign ? -1.0f : 1.0f) * std::ldexp(float(m), -24);
    return std::bit_cast<float>(x);
}

uint16_t f32_to_f16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u)
        return sign | 0x7e00u | uint16_t((x >> 13) & 0x3ffu);
    if (x >= 0x477ff000u) // >= 65520 rounds to infinity
        return sign | 0x7c00u;
    if (x >= 0x38800000u) // normal binary16 (>= 2^-14)
        return sign | uint16_t(shift_rne(x - 0x38000000u, 13));
    uint32_t e = x >> 23;
    if (e < 102) // below 2^-25: rounds to zero
        return sign;
    uint32_t mant = (x & 0x7fffffu) | 0x800000u;
    return sign | uint16_t(shift_rne(mant, int(126 - e)));
}

float e4m3_to_f32(uint8_t b) { return kE4m3.v[b]; }

uint8_t f32_to_e4m3(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint8_t sign = uint8_t((x >> 24) & 0x80u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u)
        return sign | 0x7f;
    float a = std::bit_cast<float>(x);
    if (a >= 448.0f)
        return sign | 0x7e;
    if (x >= 0x3c800000u) // normal E4M3 (>= 2^-6); cannot round past 448 (0x7E)
        return sign | uint8_t(shift_rne(x - (120u << 23), 20));
    return sign | uint8_t(std::nearbyint(a * 512.0f)); // subnormal: multiples of 2^-9, RNE
}

float e2m1_to_f32(uint8_t nibble) { return kE2m1[nibble & 0xF]; }

uint8_t f32_to_e2m1(float y) {
    uint8_t sign = std::signbit(y) ? 8 : 0;
    float a = std::fabs(y);
    uint8_t c;
    if (a > 5.0f) c = 7;
    else if (a >= 3.5f) c = 6;
    else if (a > 2.5f) c = 5;
    else if (a >= 1.75f) c = 4;
    else if (a > 1.25f) c = 3;
    else if (a >= 0.75f) c = 2;
    else if (a > 0.25f) c = 1;
    else c = 0;
    return sign | c;
}

} // namespace ninfer::core
