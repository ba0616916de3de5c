// ninfer::core - portable 8-wide f32 vectors (GCC/Clang vector extensions) for the CPU backend's
// inner loops, and NINFER_SIMD_CLONES: on x86-64 a function so marked is compiled for AVX2+FMA
// and for the baseline, and the loader picks the best one the machine has.
#pragma once

#include <cstring>

// The 32-byte vector type is passed between helpers that are always inlined (NINFER_VEC_INLINE),
// so its baseline-ABI note is moot. Without always_inline an unoptimised (-O0) build calls them
// out of line: an AVX2 clone then passes v8f in registers to a baseline-compiled helper that
// expects it in memory, and the process crashes.
#pragma GCC diagnostic ignored "-Wpsabi"
#define NINFER_VEC_INLINE inline __attribute__((always_inline))

namespace ninfer::core::cpu {

typedef float v8f __attribute__((vector_size(32)));

NINFER_VEC_INLINE v8f load8(const float* p) {
    v8f v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
NINFER_VEC_INLINE void store8(float* p, v8f v) { std::memcpy(p, &v, sizeof v); }
NINFER_VEC_INLINE v8f splat8(float x) { return v8f{x, x, x, x, x, x, x, x}; }
NINFER_VEC_INLINE float hsum8(v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

} // namespace ninfer::core::cpu

#if defined(__x86_64__) && !defined(__clang__)
#define NINFER_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define NINFER_SIMD_CLONES
#endif
