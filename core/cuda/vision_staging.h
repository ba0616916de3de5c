// ninfer::core - the GPU vision tower's traffic with the host (core/cuda/vision_tower_gpu.h):
// pinned, double-buffered staging, so that one batch's host work and copies overlap the device
// work of the batch before it.
//
// Contract:
// - VisionStaging(config, rows) allocates two input slots (one batch of `rows` patches: bf16
//   patches, position taps and weights, rotary tables; core/vision/vision_batch_inputs.h) and two
//   output slots (rows / merge_unit rows of out_hidden floats) in pinned host memory
//   (cudaHostAlloc: pinned_bytes(config, rows) in all, page-locked host memory, not GPU memory),
//   and an upload and a download stream of its own, with one event per slot and direction.
//   ninfer::Error("cuda: ...") when any of that fails.
// - A batch uses slot s = its index % 2; per batch, in this order:
//     inputs(s)            the pinned input slot to fill (fill_vision_batch); first waits, on the
//                          host, until the slot's previous upload has left it;
//     upload(s, dev, n)    rows [0, n) of every input to the device slot `dev`, on the upload
//                          stream once the compute stream has released that device slot;
//     acquire(compute, s)  the compute stream waits for that upload;
//     release(compute, s)  recorded on the compute stream after the batch's last read of dev;
//     reuse_output(compute) the compute stream waits until the previous download has read the
//                          device rows (call before writing them again);
//     download(compute, s, rows_dev, ld, n)  n rows of out_hidden floats (device row stride ld),
//                          after the compute stream's work so far, into pinned output slot s;
//     rows(s)              waits (host) for that download; the pinned rows, out_hidden apart.
//   Slot s's output rows stay valid until download(.., s, ..) is called again. The caller takes a
//   batch's rows before enqueueing the download of the batch two later.
// - Every wait is an event; nothing here synchronises a whole stream except the destructor.
// Thread safety: one caller at a time (the tower's).
#pragma once

#include "core/model/vision_weights.h"
#include "core/vision/vision_batch_inputs.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::core::cuda {

// One device input slot: the device copy of VisionBatchInputs.
struct VisionDeviceInputs {
    __nv_bfloat16* patches = nullptr;
    int32_t* taps = nullptr;
    float *tap_w = nullptr, *cos = nullptr, *sin = nullptr;
};

class VisionStaging {
  public:
    VisionStaging(const VisionConfig& config, size_t rows);
    ~VisionStaging();
    VisionStaging(const VisionStaging&) = delete;
    VisionStaging& operator=(const VisionStaging&) = delete;

    static uint64_t pinned_bytes(const VisionConfig& config, size_t rows);

    const VisionBatchInputs& inputs(int s);
    void upload(int s, const VisionDeviceInputs& dev, size_t n);
    void acquire(cudaStream_t compute, int s);
    void release(cudaStream_t compute, int s);
    void reuse_output(cudaStream_t compute);
    void download(cudaStream_t compute, int s, const float* rows_dev, size_t ld, size_t n);
    const float* rows(int s);

  private:
    void free_all() noexcept;

    size_t patch_dim_, hd2_, out_hidden_;
    struct Slot {
        void* pinned = nullptr; // the inputs, then the output rows
        VisionBatchInputs in;
        float* out = nullptr;
        cudaEvent_t uploaded = nullptr, released = nullptr, computed = nullptr, downloaded = nullptr;
    };
    Slot slots_[2];
    int last_download_ = -1;
    cudaStream_t up_ = nullptr, down_ = nullptr;
};

} // namespace ninfer::core::cuda
