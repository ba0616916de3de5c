// ninfer::core - bf16 tensor-core rate: our GEMM and (if present) cuBLASLt (cublaslt.h), median of timed products.
#include "core/cuda/tc_peak.h"

#include "core/cuda/cublaslt.h"
#include "core/cuda/device_weights.h"
#include "core/util/error.h"
#include "ninfer/kernels/gemm.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ninfer::core {

TensorCorePeak measure_bf16_peak(int size, int reps) {
    TensorCorePeak r;
    r.size = size;
    const uint64_t elems = uint64_t(size) * uint64_t(size);
    std::vector<__nv_bfloat16> host(elems);
    uint64_t s = 0x243F6A8885A308D3ull;
    for (auto& v : host) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        v = __float2bfloat16(float(int64_t(s >> 40) - (int64_t(1) << 23)) / float(1 << 23));
    }
    cuda::DeviceArena arena;
    auto* a = arena.alloc_n<__nv_bfloat16>(elems, "peak A");
    auto* b = arena.alloc_n<__nv_bfloat16>(elems, "peak B");
    auto* c = arena.alloc_n<__nv_bfloat16>(elems, "peak C");
    cuda::cuda_check(cudaMemcpy(a, host.data(), elems * 2, cudaMemcpyHostToDevice), "peak upload");
    std::reverse(host.begin(), host.end());
    cuda::cuda_check(cudaMemcpy(b, host.data(), elems * 2, cudaMemcpyHostToDevice), "peak upload");
    const double flops = 2.0 * double(size) * double(size) * double(size);
    kernels::GemmArgs g;
    g.a = a, g.lda = size, g.b = b, g.ldb = size, g.c = c, g.ldc = size, g.c_fp32 = false;
    g.m = g.n = g.k = size;
    const float ours = cuda::median_event_ms([&] { return kernels::gemm_bf16(g, nullptr) == cudaSuccess; }, reps);
    if (ours == 0.f)
        throw Error("bench: gemm_bf16 failed at " + std::to_string(size) + "^3");
    r.ours_tflops = flops / (double(ours) * 1e-3) / 1e12;
    cuda::Cublaslt cublaslt;
    const float lt = cublaslt.open() ? cublaslt.gemm_ms(a, b, c, size, size, size, reps) : 0.f;
    if (lt > 0.f)
        r.cublaslt_tflops = flops / (double(lt) * 1e-3) / 1e12;
    else
        r.cublaslt_note = cublaslt.note();
    cudaGetLastError();
    return r;
}

} // namespace ninfer::core
