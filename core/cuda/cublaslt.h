// ninfer::core - cuBLASLt, loaded at run time, as the bf16 GEMM that our benchmarks compare with.
//
// Contract:
// - Cublaslt::open() dlopens the library ($NINFER_CUBLASLT, libcublasLt.so.13, libcublasLt.so,
//   /usr/local/cuda/lib64/libcublasLt.so.13, the PyTorch wheels' copies) and resolves the entry
//   points it uses. Nothing links cuBLASLt: it is optional, and open() returns false with note()
//   saying why when it is absent. library() names the file that was loaded.
// - gemm_ms(a, b, c, m, n, k, reps) times row-major C[m,n] = A[m,k] . B[n,k]^T (bf16 in and out,
//   fp32 accumulate; cuBLASLt's "TN" product) on the default stream: the median of `reps` runs
//   after two warm-ups (median_event_ms). Returns 0 and sets note() when cuBLASLt has no algorithm
//   for the shape or a call fails. It owns a 64 MiB workspace (allocated by open()).
// - median_event_ms(fn, reps, warmups): median milliseconds (CUDA events on the default stream) of
//   `reps` calls of fn after `warmups` calls; 0 when any call of fn returns false.
// Thread safety: one thread; it uses the GPU while it times.
#pragma once

#include <functional>
#include <string>

namespace ninfer::core::cuda {

float median_event_ms(const std::function<bool()>& fn, int reps, int warmups = 2);

class Cublaslt {
  public:
    Cublaslt() = default;
    Cublaslt(const Cublaslt&) = delete;
    Cublaslt& operator=(const Cublaslt&) = delete;
    ~Cublaslt();

    bool open();
    float gemm_ms(const void* a, const void* b, void* c, int m, int n, int k, int reps);
    const std::string& note() const { return note_; }
    const std::string& library() const { return library_; }

  private:
    struct Api;
    Api* api_ = nullptr;
    void* lib_ = nullptr;
    void* handle_ = nullptr;
    void* workspace_ = nullptr;
    std::string note_, library_;
};

} // namespace ninfer::core::cuda
