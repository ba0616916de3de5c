// ninfer::core - the CUDA backend's verify windows (backend.h verify / accept_verified, issue 28):
// one lane's token to append plus its drafts through the decode kernels in one forward, the GDN
// state after each window position kept on the device, and the rollback to a kept prefix.
//
// Contract (VerifyWindows):
// - VerifyWindows(run, plan) allocates, when plan.max_draft_tokens K > 0, per lane K GDN snapshots
//   (every GDN layer's conv history, bf16 (f32 in the f32-activation mode), and recurrent state,
//   f32: MemoryPlan::gdn_verify_bytes_per_lane counts them, with f32 conv history, so the plan
//   never undercounts) and the window's logits ((K + 1) rows of the padded vocabulary, f32, in the
//   plan's workspace). Nothing is allocated afterwards. Throws ninfer::Error("cuda: ...").
// - enqueue(lane, start, tokens) enqueues the window on the runner's stream: tokens
//   (1..K + 1 of them, checked by the caller) at positions start.. of the lane, whose page table
//   already covers them, through Runner::enqueue_forward(n, one_lane = true) (GDN token by token,
//   causal attention over the positions; the rows' bits equal batch-1 decode's, see
//   docs/ARCHITECTURE.md), copying the GDN state after each of the first n - 1 tokens to the
//   lane's snapshots; after_forward(n), when given, enqueues what reads the final-normed step rows
//   (the MTP head keeps them: MtpHead::enqueue_keep_step_rows; part of the graph); then the head
//   over the n rows: the rows go to the lane's window logits, the
//   last one to the lane's logits (Runner::lane_logits). read_rows(lane, host_rows) then enqueues
//   the copy of the open window's rows to host_rows (count x vocab floats; the caller synchronises
//   the stream before reading them: enqueue every lane's window first). With graphs the
//   device part replays one CUDA graph per (lane, n), captured on first use. The window is open
//   from here (count(lane) = n) until close(lane) or rollback.
// - rollback(lane, n_keep) (1 <= n_keep < count(lane)) copies snapshot n_keep - 1 into the
//   lane's live GDN state and window row n_keep - 1 into the lane's logits, in stream order, and
//   closes the window. The caller rewinds the KV length (attention rows past it are never read).
// - close(lane): the window's tokens stay (a keep of all of them, or the lane changed otherwise).
// Thread safety: engine thread only.
#pragma once

#include "core/cuda/cuda_runner.h"
#include "core/cuda/device_weights.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ninfer::core::cuda {

class VerifyWindows {
  public:
    VerifyWindows(Runner& run, const MemoryPlan& plan, bool graphs);
    ~VerifyWindows();
    VerifyWindows(const VerifyWindows&) = delete;
    VerifyWindows& operator=(const VerifyWindows&) = delete;

    // Device bytes the windows allocate for this plan (snapshots with the GPU's conv dtype, logits).
    static uint64_t device_bytes(const Runner& run, const MemoryPlan& plan);
    uint64_t allocated_bytes() const { return arena_.bytes(); }

    void enqueue(int lane, uint32_t start, std::span<const int32_t> tokens,
                 const std::function<void(int n)>& after_forward = {});
    void read_rows(int lane, float* host_rows) const;
    void rollback(int lane, uint32_t n_keep);
    void close(int lane) { lanes_[size_t(lane)].count = 0; }
    uint32_t count(int lane) const { return lanes_[size_t(lane)].count; }
    uint32_t start(int lane) const { return lanes_[size_t(lane)].start; }

  private:
    struct Window {
        uint32_t start = 0, count = 0;
        GdnSnapshotTarget snapshots; // K copies per GDN layer
        float* logits = nullptr;     // (K + 1) rows, stride run_.logits_stride()
    };
    void enqueue_device(int lane, int n, const std::function<void(int)>& after_forward);

    Runner& run_;
    uint32_t max_draft_ = 0;
    bool graphs_ = true;
    DeviceArena arena_;
    std::vector<Window> lanes_;
    int32_t* step_in_host_ = nullptr; // pinned [3][kMaxStepTokens]
    std::vector<std::vector<cudaGraphExec_t>> graph_; // [lane][n]
};

} // namespace ninfer::core::cuda
