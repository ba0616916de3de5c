// ninfer::core - portable 8-wide f32 vectors (GCC/Clang vector extensions) for the CPU backend's
// inner loops, and NINFER_SIMD_CLONES: on x86-64 a function so marked is compiled for AVX2+FMA
// and for the baseline, and the loader picks the best one the machine has.
#pragma once

#include <cstring>

// The 32-byte vector type is passed between inlined helpers only; its baseline-ABI note is moot.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ninfer::core::cpu {

typedef float v8f __attribute__((vector_size(32)));

inline v8f load8(const float* p) {
    v8f v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store8(float* p, v8f v) { std::memcpy(p, &v, sizeof v); }
inline v8f splat8(float x) { return v8f{x, x, x, x, x, x, x, x}; }
inline float hsum8(v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

} // namespace ninfer::core::cpu

#if defined(__x86_64__) && !defined(__clang__)
#define NINFER_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define NINFER_SIMD_CLONES
#endif
