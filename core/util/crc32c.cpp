// ninfer::core - CRC-32C: SSE4.2 instruction with a table fallback; combining two CRCs.
#include "core/util/crc32c.h"

#include <array>
#include <cstring>

namespace ninfer::core {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u; // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_hw(uint32_t crc, const uint8_t* p, size_t n) {
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = uint32_t(c);
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

// GF(2) 32x32 matrix times vector / squared: the operator that appends zero bytes to a CRC.
uint32_t gf2_times(const uint32_t* m, uint32_t v) {
    uint32_t r = 0;
    for (int i = 0; v; ++i, v >>= 1)
        if (v & 1) r ^= m[i];
    return r;
}
void gf2_square(uint32_t* out, const uint32_t* m) {
    for (int i = 0; i < 32; ++i) out[i] = gf2_times(m, m[i]);
}

} // namespace

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t n_b) {
    if (n_b == 0) return crc_a;
    uint32_t even[32], odd[32]; // operators for 2^k zero bits, alternating
    odd[0] = kPoly;             // one zero bit
    for (int i = 1; i < 32; ++i) odd[i] = 1u << (i - 1);
    gf2_square(even, odd); // two zero bits
    gf2_square(odd, even); // four zero bits
    do { // apply the operator for each set bit of n_b (in bytes: the first square gives 8 bits)
        gf2_square(even, odd);
        if (n_b & 1) crc_a = gf2_times(even, crc_a);
        n_b >>= 1;
        if (!n_b) break;
        gf2_square(odd, even);
        if (n_b & 1) crc_a = gf2_times(odd, crc_a);
        n_b >>= 1;
    } while (n_b);
    return crc_a ^ crc_b;
}

uint32_t crc32c_extend_zeros(uint32_t crc, uint64_t n) {
    // combine(a, 0, n) applies the n-zero-byte operator to a; the CRC of n zeros is that operator
    // on the all-ones start state, inverted.
    return crc32c_combine(crc, ~crc32c_combine(0xFFFFFFFFu, 0, n), n);
}

uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    uint32_t c = ~crc;
    while (n--) c = kTable[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return ~c;
}

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
    if (kHaveSse42) return crc32c_hw(crc, static_cast<const uint8_t*>(data), n);
#endif
    return crc32c_extend_portable(crc, data, n);
}

} // namespace ninfer::core
