// ninfer::core - the dense bf16 tensor-core rate of this GPU, measured (issue 9 §4: prefill speed is
// reported as a fraction of it).
//
// Contract:
// - measure_bf16_peak(size) times C = A · Bᵀ with A, B, C bf16 [size, size] (fp32 accumulate) on
//   seeded random data in [-1, 1): our kernels::gemm_bf16, and cuBLASLt when libcublasLt.so.13
//   (or .so) can be loaded at run time (dlopen: nothing links it, and it is optional). Each is
//   warmed up, then the median of `reps` timed products (CUDA events) gives TFLOP/s =
//   2 * size^3 / time. peak_tflops() is the larger of the two; cublaslt_tflops is 0 and
//   cublaslt_note says why when cuBLASLt was not usable.
// - Throws ninfer::Error("bench: ...") on a CUDA failure of our kernel (not of cuBLASLt).
// Thread safety: owns the GPU while it runs; engine/bench thread only.
#pragma once

#include <string>

namespace ninfer::core {

struct TensorCorePeak {
    int size = 0;
    double ours_tflops = 0, cublaslt_tflops = 0;
    std::string cublaslt_note;
    double peak_tflops() const { return ours_tflops > cublaslt_tflops ? ours_tflops : cublaslt_tflops; }
};

TensorCorePeak measure_bf16_peak(int size = 8192, int reps = 10);

} // namespace ninfer::core
