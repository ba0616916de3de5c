// ninfer::core - the GPU vision tower's pinned, double-buffered host staging on two copy streams.
#include "core/cuda/vision_staging.h"

#include "core/cuda/device_weights.h"

namespace ninfer::core::cuda {

namespace {

uint64_t align256(uint64_t v) { return (v + 255) / 256 * 256; }

// The byte offsets of one pinned slot's parts: patches, taps, tap_w, cos, sin, output rows; end.
struct SlotLayout {
    uint64_t at[7] = {};
    SlotLayout(const VisionConfig& c, size_t rows) {
        const uint64_t hd2 = c.head_dim() / 2;
        const uint64_t sizes[6] = {rows * c.patch_dim() * 2, rows * 4 * 4, rows * 4 * 4, rows * hd2 * 4,
                                   rows * hd2 * 4, rows / c.merge_unit() * c.out_hidden_size * 4};
        for (int i = 0; i < 6; ++i)
            at[i + 1] = at[i] + align256(sizes[i]);
    }
};

} // namespace

uint64_t VisionStaging::pinned_bytes(const VisionConfig& config, size_t rows) {
    return 2 * SlotLayout(config, rows).at[6];
}

VisionStaging::VisionStaging(const VisionConfig& c, size_t rows)
    : patch_dim_(c.patch_dim()), hd2_(c.head_dim() / 2), out_hidden_(c.out_hidden_size) {
    const SlotLayout layout(c, rows);
    try {
        cuda_check(cudaStreamCreateWithFlags(&up_, cudaStreamNonBlocking), "creating the vision upload stream");
        cuda_check(cudaStreamCreateWithFlags(&down_, cudaStreamNonBlocking), "creating the vision download stream");
        for (Slot& s : slots_) {
            cuda_check(cudaHostAlloc(&s.pinned, layout.at[6], cudaHostAllocDefault), "pinned vision staging");
            char* base = static_cast<char*>(s.pinned);
            s.in.patches = reinterpret_cast<uint16_t*>(base + layout.at[0]);
            s.in.taps = reinterpret_cast<int32_t*>(base + layout.at[1]);
            s.in.tap_w = reinterpret_cast<float*>(base + layout.at[2]);
            s.in.cos = reinterpret_cast<float*>(base + layout.at[3]);
            s.in.sin = reinterpret_cast<float*>(base + layout.at[4]);
            s.out = reinterpret_cast<float*>(base + layout.at[5]);
            for (cudaEvent_t* e : {&s.uploaded, &s.released, &s.computed, &s.downloaded})
                cuda_check(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "vision staging event");
        }
    } catch (...) {
        free_all();
        throw;
    }
}

VisionStaging::~VisionStaging() { free_all(); }

void VisionStaging::free_all() noexcept {
    // The copies in flight read and write the pinned slots.
    if (up_) cudaStreamSynchronize(up_);
    if (down_) cudaStreamSynchronize(down_);
    for (Slot& s : slots_) {
        for (cudaEvent_t e : {s.uploaded, s.released, s.computed, s.downloaded})
            if (e) cudaEventDestroy(e);
        if (s.pinned) cudaFreeHost(s.pinned);
        s = Slot{};
    }
    if (up_) cudaStreamDestroy(up_);
    if (down_) cudaStreamDestroy(down_);
    up_ = down_ = nullptr;
}

const VisionBatchInputs& VisionStaging::inputs(int s) {
    cuda_check(cudaEventSynchronize(slots_[s].uploaded), "vision patches upload");
    return slots_[s].in;
}

void VisionStaging::upload(int s, const VisionDeviceInputs& dev, size_t n) {
    const Slot& slot = slots_[s];
    cuda_check(cudaStreamWaitEvent(up_, slot.released, 0), "vision patches upload");
    const auto copy = [&](void* dst, const void* src, size_t bytes, const char* what) {
        cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, up_), what);
    };
    copy(dev.patches, slot.in.patches, n * patch_dim_ * 2, "vision patches");
    copy(dev.taps, slot.in.taps, n * 4 * sizeof(int32_t), "vision position taps");
    copy(dev.tap_w, slot.in.tap_w, n * 4 * sizeof(float), "vision position taps");
    copy(dev.cos, slot.in.cos, n * hd2_ * sizeof(float), "vision rotary");
    copy(dev.sin, slot.in.sin, n * hd2_ * sizeof(float), "vision rotary");
    cuda_check(cudaEventRecord(slot.uploaded, up_), "vision patches upload");
}

void VisionStaging::acquire(cudaStream_t compute, int s) {
    cuda_check(cudaStreamWaitEvent(compute, slots_[s].uploaded, 0), "vision patches upload");
}

void VisionStaging::release(cudaStream_t compute, int s) {
    cuda_check(cudaEventRecord(slots_[s].released, compute), "vision inputs");
}

void VisionStaging::reuse_output(cudaStream_t compute) {
    if (last_download_ >= 0)
        cuda_check(cudaStreamWaitEvent(compute, slots_[last_download_].downloaded, 0), "vision rows");
}

void VisionStaging::download(cudaStream_t compute, int s, const float* rows_dev, size_t ld, size_t n) {
    const Slot& slot = slots_[s];
    cuda_check(cudaEventRecord(slot.computed, compute), "vision rows");
    cuda_check(cudaStreamWaitEvent(down_, slot.computed, 0), "vision rows");
    cuda_check(cudaMemcpy2DAsync(slot.out, out_hidden_ * sizeof(float), rows_dev, ld * sizeof(float),
                                 out_hidden_ * sizeof(float), n, cudaMemcpyDeviceToHost, down_),
               "vision rows");
    cuda_check(cudaEventRecord(slot.downloaded, down_), "vision rows");
    last_download_ = s;
}

const float* VisionStaging::rows(int s) {
    cuda_check(cudaEventSynchronize(slots_[s].downloaded), "vision rows");
    return slots_[s].out;
}

} // namespace ninfer::core::cuda
