// ninfer::core - cuBLASLt through dlopen/dlsym, and the CUDA-event median the benchmarks time with.
#include "core/cuda/cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

namespace ninfer::core::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t(64) << 20;
}

float median_event_ms(const std::function<bool()>& fn, int reps, int warmups) {
    for (int i = 0; i < warmups; ++i)
        if (!fn())
            return 0.f;
    cudaEvent_t e0, e1;
    if (cudaEventCreate(&e0) != cudaSuccess)
        return 0.f;
    if (cudaEventCreate(&e1) != cudaSuccess) {
        cudaEventDestroy(e0);
        return 0.f;
    }
    std::vector<float> ms;
    bool ok = true;
    for (int i = 0; i < reps && ok; ++i) {
        cudaEventRecord(e0);
        ok = fn();
        cudaEventRecord(e1);
        float t = 0.f;
        ok = ok && cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&t, e0, e1) == cudaSuccess;
        ms.push_back(t);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (!ok || ms.empty())
        return 0.f;
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

struct Cublaslt::Api {
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
};

Cublaslt::~Cublaslt() {
    if (api_ && handle_)
        api_->destroy(static_cast<cublasLtHandle_t>(handle_));
    if (workspace_)
        cudaFree(workspace_);
    delete api_;
    if (lib_)
        dlclose(lib_);
}

bool Cublaslt::open() {
    if (api_)
        return true;
    const char* names[] = {std::getenv("NINFER_CUBLASLT"), "libcublasLt.so.13", "libcublasLt.so",
                           "/usr/local/cuda/lib64/libcublasLt.so.13",
                           "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
                           "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.13"};
    for (const char* name : names)
        if (name && *name && (lib_ = dlopen(name, RTLD_NOW | RTLD_LOCAL))) {
            library_ = name;
            break;
        }
    if (!lib_) {
        note_ = "libcublasLt.so.13 not found";
        return false;
    }
    auto* api = new Api;
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib_, name));
        ok = ok && fn;
    };
    sym(api->create, "cublasLtCreate");
    sym(api->destroy, "cublasLtDestroy");
    sym(api->desc_create, "cublasLtMatmulDescCreate");
    sym(api->desc_destroy, "cublasLtMatmulDescDestroy");
    sym(api->desc_set, "cublasLtMatmulDescSetAttribute");
    sym(api->layout_create, "cublasLtMatrixLayoutCreate");
    sym(api->layout_destroy, "cublasLtMatrixLayoutDestroy");
    sym(api->pref_create, "cublasLtMatmulPreferenceCreate");
    sym(api->pref_destroy, "cublasLtMatmulPreferenceDestroy");
    sym(api->pref_set, "cublasLtMatmulPreferenceSetAttribute");
    sym(api->heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(api->matmul, "cublasLtMatmul");
    cublasLtHandle_t h = nullptr;
    if (!ok)
        note_ = library_ + " lacks a cuBLASLt entry point";
    else if (api->create(&h) != CUBLAS_STATUS_SUCCESS)
        note_ = "cublasLtCreate failed", ok = false;
    else if (cudaMalloc(&workspace_, kWorkspaceBytes) != cudaSuccess)
        note_ = "no GPU memory for the cuBLASLt workspace", ok = false;
    if (!ok) {
        if (h)
            api->destroy(h);
        delete api;
        return false;
    }
    api_ = api;
    handle_ = h;
    return true;
}

// Row-major C[m,n] = A[m,k] . B[n,k]^T is column-major C^T[n,m] = B . A^T: B is the first operand
// (k x n column-major, transposed), A the second (k x m column-major).
float Cublaslt::gemm_ms(const void* a, const void* b, void* c, int m, int n, int k, int reps) {
    if (!api_) {
        note_ = "cuBLASLt is not open";
        return 0.f;
    }
    const Api& lt = *api_;
    auto h = static_cast<cublasLtHandle_t>(handle_);
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t lb = nullptr, la = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    size_t ws_bytes = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t algo{};
    int found = 0;
    const bool ready =
        lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
        lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t) == CUBLAS_STATUS_SUCCESS &&
        lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n) == CUBLAS_STATUS_SUCCESS &&
        lt.layout_create(&lb, CUDA_R_16BF, uint64_t(k), uint64_t(n), int64_t(k)) == CUBLAS_STATUS_SUCCESS &&
        lt.layout_create(&la, CUDA_R_16BF, uint64_t(k), uint64_t(m), int64_t(k)) == CUBLAS_STATUS_SUCCESS &&
        lt.layout_create(&lc, CUDA_R_16BF, uint64_t(n), uint64_t(m), int64_t(n)) == CUBLAS_STATUS_SUCCESS &&
        lt.pref_create(&pref) == CUBLAS_STATUS_SUCCESS &&
        lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes) ==
            CUBLAS_STATUS_SUCCESS &&
        lt.heuristic(h, desc, lb, la, lc, lc, pref, 1, &algo, &found) == CUBLAS_STATUS_SUCCESS && found > 0;
    float ms = 0.f;
    if (ready) {
        const float alpha = 1.f, beta = 0.f;
        ms = median_event_ms([&] {
            return lt.matmul(h, desc, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &algo.algo, workspace_, ws_bytes,
                             nullptr) == CUBLAS_STATUS_SUCCESS;
        }, reps);
        if (ms == 0.f)
            note_ = "cublasLtMatmul failed";
    } else {
        note_ = "cuBLASLt found no bf16 algorithm for " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                std::to_string(k);
    }
    if (pref) lt.pref_destroy(pref);
    if (lc) lt.layout_destroy(lc);
    if (la) lt.layout_destroy(la);
    if (lb) lt.layout_destroy(lb);
    if (desc) lt.desc_destroy(desc);
    cudaGetLastError(); // a failed cuBLASLt call must not poison the caller's next CUDA check
    return ms;
}

} // namespace ninfer::core::cuda
