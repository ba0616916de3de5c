// ninfer::core - bf16 tensor-core rate: our GEMM and (if present) cuBLASLt, median of timed products.
#include "core/cuda/tc_peak.h"

#include "core/cuda/device_weights.h"
#include "core/util/error.h"
#include "ninfer/kernels/gemm.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace ninfer::core {

namespace {

// Median milliseconds of reps runs of fn on the default stream, after two warm-up runs.
float median_ms(const std::function<bool()>& fn, int reps) {
    if (!fn() || !fn())
        return 0.f;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
        cudaEventRecord(e0);
        fn();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        ms.push_back(t);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// cuBLASLt entry points, resolved with dlsym so that no binary links the library.
struct CublasLt {
    void* lib = nullptr;
    decltype(&cublasLtCreate) create = nullptr;
    decltype(&cublasLtDestroy) destroy = nullptr;
    decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
    decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
    decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
    decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
    decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
    decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
    decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
    decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
    decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
    decltype(&cublasLtMatmul) matmul = nullptr;

    bool load(std::string& why) {
        for (const char* name : {"libcublasLt.so.13", "libcublasLt.so"})
            if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
                break;
        if (!lib) {
            why = "libcublasLt.so.13 not found";
            return false;
        }
        bool ok = true;
        auto sym = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
            ok = ok && fn;
        };
        sym(create, "cublasLtCreate");
        sym(destroy, "cublasLtDestroy");
        sym(desc_create, "cublasLtMatmulDescCreate");
        sym(desc_destroy, "cublasLtMatmulDescDestroy");
        sym(desc_set, "cublasLtMatmulDescSetAttribute");
        sym(layout_create, "cublasLtMatrixLayoutCreate");
        sym(layout_destroy, "cublasLtMatrixLayoutDestroy");
        sym(pref_create, "cublasLtMatmulPreferenceCreate");
        sym(pref_destroy, "cublasLtMatmulPreferenceDestroy");
        sym(pref_set, "cublasLtMatmulPreferenceSetAttribute");
        sym(heuristic, "cublasLtMatmulAlgoGetHeuristic");
        sym(matmul, "cublasLtMatmul");
        if (!ok)
            why = "libcublasLt lacks an entry point";
        return ok;
    }
};

// Row-major C[m,n] = A[m,k] · B[n,k]^T is column-major C^T = B · A^T: cuBLASLt's "TN" product.
float cublaslt_ms(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int size, int reps,
                  std::string& why) {
    CublasLt lt;
    if (!lt.load(why))
        return 0.f;
    cublasLtHandle_t h = nullptr;
    if (lt.create(&h) != CUBLAS_STATUS_SUCCESS) {
        why = "cublasLtCreate failed";
        return 0.f;
    }
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    const uint64_t n = uint64_t(size);
    size_t ws_bytes = 64ull << 20;
    void* ws = nullptr;
    float ms = 0.f;
    cublasLtMatmulHeuristicResult_t algo{};
    int found = 0;
    bool ok = lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t) == CUBLAS_STATUS_SUCCESS &&
              lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n) == CUBLAS_STATUS_SUCCESS &&
              lt.layout_create(&la, CUDA_R_16BF, n, n, int64_t(n)) == CUBLAS_STATUS_SUCCESS &&
              lt.layout_create(&lb, CUDA_R_16BF, n, n, int64_t(n)) == CUBLAS_STATUS_SUCCESS &&
              lt.layout_create(&lc, CUDA_R_16BF, n, n, int64_t(n)) == CUBLAS_STATUS_SUCCESS &&
              lt.pref_create(&pref) == CUBLAS_STATUS_SUCCESS &&
              lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes) ==
                  CUBLAS_STATUS_SUCCESS &&
              cudaMalloc(&ws, ws_bytes) == cudaSuccess &&
              lt.heuristic(h, desc, la, lb, lc, lc, pref, 1, &algo, &found) == CUBLAS_STATUS_SUCCESS && found > 0;
    if (ok) {
        const float alpha = 1.f, beta = 0.f;
        ms = median_ms([&] {
            return lt.matmul(h, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &algo.algo, ws, ws_bytes, nullptr) ==
                   CUBLAS_STATUS_SUCCESS;
        }, reps);
        if (ms == 0.f)
            why = "cublasLtMatmul failed";
    } else {
        why = "cuBLASLt found no bf16 algorithm";
    }
    cudaFree(ws);
    if (pref) lt.pref_destroy(pref);
    if (lc) lt.layout_destroy(lc);
    if (lb) lt.layout_destroy(lb);
    if (la) lt.layout_destroy(la);
    if (desc) lt.desc_destroy(desc);
    lt.destroy(h);
    return ms;
}

} // namespace

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
    const float ours = median_ms([&] { return kernels::gemm_bf16(g, nullptr) == cudaSuccess; }, reps);
    if (ours == 0.f)
        throw Error("bench: gemm_bf16 failed at " + std::to_string(size) + "^3");
    r.ours_tflops = flops / (double(ours) * 1e-3) / 1e12;
    const float lt = cublaslt_ms(a, b, c, size, reps, r.cublaslt_note);
    if (lt > 0.f)
        r.cublaslt_tflops = flops / (double(lt) * 1e-3) / 1e12;
    cudaGetLastError();
    return r;
}

} // namespace ninfer::core
