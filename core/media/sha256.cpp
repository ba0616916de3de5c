// ninfer::core - SHA-256 per FIPS 180-4 (the media digest).
#include "core/media/sha256.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ninfer::core {
namespace {

constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

#if defined(__x86_64__)
// The x86 SHA extensions (SHA-NI: Intel since Ice Lake / Goldmont, AMD since Zen): CPUID leaf 7
// EBX bit 29, with SSSE3 and SSE4.1 (leaf 1 ECX bits 9 and 19) for the shuffles around them.
bool cpu_has_sha() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19))) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (b & (1u << 29)) != 0;
}

// n 64-byte blocks into state with SHA256RNDS2 / MSG1 / MSG2: the same compression function
// (FIPS 180-4, the hash computation of SHA-256), four rounds per step. The instructions keep the state as ABEF / CDGH.
__attribute__((target("sha,ssse3,sse4.1"))) void blocks_sha_ni(uint32_t state[8], const uint8_t* p, size_t n) {
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)), 0xB1); // CDAB
    __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), 0x1B); // EFGH
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // CDGH
    for (; n > 0; --n, p += 64) {
        const __m128i abef = state0, cdgh = state1;
        __m128i w[4]; // the schedule's last 16 words, four a lane group
        for (int g = 0; g < 16; ++g) {
            __m128i& m = w[g % 4];
            if (g < 4) {
                m = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), byte_swap);
            } else { // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16]
                __m128i x = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
                m = _mm_sha256msg2_epu32(x, w[(g + 3) % 4]);
            }
            __m128i k = _mm_add_epi32(m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kK + 4 * g)));
            state1 = _mm_sha256rnds2_epu32(state1, state0, k);
            state0 = _mm_sha256rnds2_epu32(state0, state1, _mm_shuffle_epi32(k, 0x0E));
        }
        state0 = _mm_add_epi32(state0, abef);
        state1 = _mm_add_epi32(state1, cdgh);
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B);           // FEBA
    state1 = _mm_shuffle_epi32(state1, 0xB1);        // DCHG
    state0 = _mm_blend_epi16(tmp, state1, 0xF0);     // DCBA
    state1 = _mm_alignr_epi8(state1, tmp, 8);        // HGFE
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state), state0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), state1);
}
#endif

} // namespace

bool Sha256::hardware_available() {
#if defined(__x86_64__)
    static const bool has = cpu_has_sha();
    return has;
#else
    return false;
#endif
}

Sha256::Sha256(bool allow_hardware)
    : hardware_(allow_hardware && hardware_available()), h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::blocks(const uint8_t* p, size_t n) {
#if defined(__x86_64__)
    if (hardware_) return blocks_sha_ni(h_, p, n);
#endif
    for (; n > 0; --n, p += 64) block(p);
}

void Sha256::block(const uint8_t* p) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
        w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
}

void Sha256::update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    total_ += n;
    if (buf_n_) {
        size_t take = std::min(n, 64 - buf_n_);
        std::memcpy(buf_ + buf_n_, p, take);
        buf_n_ += take, p += take, n -= take;
        if (buf_n_ < 64) return;
        blocks(buf_, 1);
        buf_n_ = 0;
    }
    blocks(p, n / 64);
    p += n / 64 * 64, n %= 64;
    std::memcpy(buf_, p, n);
    buf_n_ = n;
}

std::array<uint8_t, 32> Sha256::finish() {
    const uint64_t bits = total_ * 8;
    const uint8_t pad = 0x80, zero = 0;
    update(&pad, 1);
    while (buf_n_ != 56) update(&zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(bits >> (56 - 8 * i));
    update(len, 8);
    std::array<uint8_t, 32> out;
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) out[size_t(4 * i + j)] = uint8_t(h_[i] >> (24 - 8 * j));
    return out;
}

std::array<uint8_t, 32> sha256(std::span<const uint8_t> bytes) {
    Sha256 h;
    h.update(bytes.data(), bytes.size());
    return h.finish();
}

} // namespace ninfer::core
