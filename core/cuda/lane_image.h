// ninfer::core - the CUDA runner's lane state to and from a host LaneImage (layout of
// memory_plan.h, the CPU backend's): KV rows in the plan's dtype (kv_codec.h: bf16, or fp8/int8
// codes followed by their scales; the GPU pages keep codes and scales apart) by layer, K then V,
// position, head; GDN conv history as f32 (bf16 on the GPU: widened on save, rounded to nearest on
// restore; f32 in the runner's f32-activation mode: copied); f32 state. Images therefore move
// between the CPU and CUDA backends for every KV dtype.
//
// Contract (LaneImageCopier):
// - Every move is a few bulk copies: kernels/lane_copy.h gathers (scatters) a lane's KV rows
//   between its pages and a device bounce buffer in the image layout, and the bounce crosses PCIe
//   through pinned host buffers, two of each so the DMA of one chunk overlaps the host copy of the
//   other. Nothing is allocated after construction except the images' own host vectors.
// - begin_save(lane, tokens, pages) (engine thread, between steps) snapshots what the next step
//   would change, in stream order on the runner's stream: the lane's GDN conv and recurrent state
//   (into one of kSaveSlots device slots) and its page-table row. The KV rows at positions below
//   tokens.size() never change while the pages stay allocated, so the caller must keep `pages`
//   out of reuse until the save is reported done. The copier's own thread then moves the image to
//   host memory on its own stream, overlapping the next decode steps; the engine thread waits
//   only when kSaveSlots saves are in flight already. Saves complete in the order begun.
// - take_done(wait) (engine thread) returns the finished saves (wait = true: after waiting for
//   every save in flight) with their pages to release. A CUDA error on the copier's thread comes
//   back as Done::error (the image is then empty).
// - save_now / restore (engine thread) are synchronous: the image of the lane as it stands, or the
//   image written into the lane's pages and GDN slot; `pages` covers the image's length; the
//   caller checked sizes and dtypes against the plan. restore ends with the runner's stream
//   synchronised.
// - The MTP head (plan.mtp): a save given an MtpPart adds the MtpKv section (core/backend/
//   lane_image.h): part.mtp_length, the rows of positions [part.mtp_length, n) that part.rows hold
//   (device f32 rows of the runner's hidden_stride, in position order; begin_save snapshots them
//   with the GDN state), and the MTP layer's K/V rows (Runner::mtp_kv_layer) of positions below
//   part.mtp_length. restore given an MtpTarget reads the image's MtpKv section when there is one
//   (ninfer::Error when it does not fit the image and the plan): it scatters those K/V rows and
//   copies the pending rows of positions [first, n) into the rows the target names for (m, n)
//   (first >= m: a target may take only the last ones), and returns m; without a section it
//   returns kNoMtp and touches nothing of the head.
// - device_bytes(config, mtp): the device memory the copier allocates (plan it:
//   cuda_backend_workspace_bytes adds it).
// Thread safety: one engine thread calls every method; the copier thread is internal.
#pragma once

#include "core/cuda/cuda_runner.h"
#include "core/backend/backend.h"
#include "ninfer/kernels/lane_copy.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ninfer::core::cuda {

// Device rows of an MTP head's pending hidden states (see the contract above).
struct MtpPart {
    uint32_t mtp_length = 0; // save: the head's length; restore target: the first position taken
    std::vector<std::pair<float*, uint32_t>> rows; // (first row, count) pieces, in position order
};

class LaneImageCopier {
  public:
    static constexpr int kSaveSlots = 2;
    static constexpr uint64_t kBounceBytes = 32ull << 20;
    static constexpr uint32_t kMtpRows = 32; // pending rows a save snapshots at most (MtpHead::kRingRows)
    static constexpr uint32_t kNoMtp = ~0u;
    // restore's view of where the head's pending rows go, for an image with mtp_length m and n tokens.
    using MtpTarget = std::function<MtpPart(uint32_t m, uint32_t n)>;

    struct Done {
        uint64_t id = 0;
        LaneImage image;
        std::vector<uint32_t> pages; // the pages begin_save was given, now free to reuse
        std::string error;           // non-empty: the copy failed (a CUDA error)
    };

    LaneImageCopier(const Runner& run, const MemoryPlan& plan);
    ~LaneImageCopier();
    LaneImageCopier(const LaneImageCopier&) = delete;
    LaneImageCopier& operator=(const LaneImageCopier&) = delete;

    static uint64_t device_bytes(const ModelConfig& config, bool mtp = false);

    uint64_t begin_save(int lane, std::vector<int32_t> tokens, std::vector<uint32_t> pages,
                        const MtpPart* mtp = nullptr);
    std::vector<Done> take_done(bool wait);
    size_t in_flight() const;

    LaneImage save_now(int lane, const std::vector<int32_t>& tokens, const std::vector<uint32_t>& pages,
                       const MtpPart* mtp = nullptr);
    uint32_t restore(int lane, const LaneImage& image, const std::vector<uint32_t>& pages,
                     const MtpTarget* mtp = nullptr);

  private:
    struct Job {
        uint64_t id = 0;
        int slot = 0;
        std::vector<int32_t> tokens;
        std::vector<uint32_t> pages;
        bool mtp = false;
        uint32_t mtp_length = 0; // its pending rows are in the slot's MTP rows
    };
    // Two device bounces, two pinned host bounces and their events: one direction's double buffer.
    struct Bounces {
        uint8_t* device[2] = {};
        uint8_t* pinned[2] = {};
        cudaEvent_t ready[2] = {};
    };
    // Where a lane's GDN state is read from: the runner's per-layer arrays or a save slot.
    struct GdnSource {
        std::vector<const uint8_t*> conv, recurrent;
    };
    struct Chunk;

    void copier_main();
    // mtp: also the MtpKv section's K/V chunks (positions below mtp->mtp_length) and its rows.
    std::vector<Chunk> plan_chunks(uint32_t n_tokens, const GdnSource* gdn, const MtpPart* mtp = nullptr) const;
    void copy_out(cudaStream_t stream, Bounces& b, const int32_t* pages, const GdnSource& gdn, LaneImage& image,
                  const MtpPart* mtp);
    uint64_t mtp_rows_offset(uint32_t m) const; // where the MtpKv section's rows start
    GdnSource lane_gdn(int lane) const;
    GdnSource slot_gdn(int slot) const;
    uint64_t conv_bytes() const; // one layer's conv history of one lane on the GPU (bf16 or f32)

    const Runner& run_;
    MemoryPlan plan_;
    kernels::KvRowGeometry geo_{};
    uint64_t row_bytes_ = 0;
    uint32_t n_full_ = 0, n_gdn_ = 0;
    DeviceArena arena_;
    uint8_t* gdn_slots_[kSaveSlots] = {};
    int32_t* slot_pages_[kSaveSlots] = {};
    float* slot_mtp_rows_[kSaveSlots] = {}; // [kMtpRows][hidden_stride] with plan.mtp
    cudaEvent_t slot_ready_[kSaveSlots] = {};
    Bounces out_, in_; // the copier thread's (saves), the engine thread's (save_now, restore)
    cudaStream_t copy_stream_ = nullptr;

    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Job> queue_;
    std::vector<Done> done_;
    bool slot_busy_[kSaveSlots] = {};
    size_t in_flight_ = 0; // begun and not yet in done_
    uint64_t next_id_ = 1;
    bool stop_ = false;
    std::thread thread_;
};

} // namespace ninfer::core::cuda
