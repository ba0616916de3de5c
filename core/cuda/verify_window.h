// ninfer::core - the CUDA backend's verify windows (backend.h verify / accept_verified, issue 28):
// several lanes' token to append plus drafts through the decode kernels in forwards of up to 8
// rows, the GDN state after each window position kept on the device, and the rollback to a kept
// prefix.
//
// Contract (VerifyWindows):
// - VerifyWindows(run, plan, graphs) allocates, when plan.max_draft_tokens K > 0, per lane K GDN
//   snapshots (every GDN layer's conv history, bf16 (f32 in the f32-activation mode), and
//   recurrent state, f32: MemoryPlan::gdn_verify_bytes_per_lane counts them, with f32 conv
//   history, so the plan never undercounts) and the window's logits ((K + 1) rows of the padded
//   vocabulary, f32, in the plan's workspace). Nothing is allocated afterwards. Throws
//   ninfer::Error("cuda: ...").
// - enqueue(windows, after_forward) enqueues every window on the runner's stream: window i's
//   tokens (1..K + 1 of them, checked by the caller) at positions start.. of its lane (distinct
//   lanes; page tables already cover them). Windows go, in order, into forwards of at most
//   kMaxStepTokens rows, each through Runner::enqueue_forward with the rows token-major (every
//   window's token 0, then every token 1, ...) and each GDN layer's conv and recurrence as one
//   launch each over all the forward's windows (Runner::set_gdn_windows, kernels/gdn_window.h:
//   a window's tokens in order inside the kernel, each token's arithmetic the one-token decode
//   kernels', so each row's arithmetic is batch-1 decode's, docs/ARCHITECTURE.md); the GDN state
//   of a lane after each of its first n - 1 tokens is written once, by those launches, straight
//   into its snapshots (no copies). after_forward(n), when given, enqueues what reads the final-normed
//   step rows (the MTP head's ring: MtpHead::enqueue_keep_step_rows). Then the head: each window's
//   rows go to its lane's window logits, its last row to the lane's logits (Runner::lane_logits),
//   in one copy launch, and each window's greedy picks (kernels::argmax_rows: argmax_token's rule)
//   to the lane's ids on the device. With graphs each forward's device work replays a CUDA graph per
//   (lane, window size) list, captured on first use (kMaxGraphs at most; later lists run
//   eagerly; graph_cache.h). A lane's window is open from here (count(lane) = n) until close(lane)
//   or rollback. enqueue is stage(windows) (the host's half: the checks, each forward's inputs
//   into its own pinned row, the windows opened) then enqueue_staged(windows, after_forward,
//   graphs) (the device's half: per forward the copy of its pinned inputs and its launches,
//   through the forward's graph when graphs is true; the greedy round captures them, with
//   graphs false, inside its own graph: nothing there reads pageable memory or waits).
// - read_rows(lane, host_rows) enqueues the copy of the open window's rows to host_rows (count x
//   vocab floats); the caller synchronises the stream before reading them. read_ids() enqueues the
//   copy of every lane's greedy ids to pinned host memory; after the caller's synchronisation,
//   ids(lane) points at the open window's count(lane) ids.
// - rollback(lane, n_keep) (1 <= n_keep < count(lane)) copies snapshot n_keep - 1 into the
//   lane's live GDN state and window row n_keep - 1 into the lane's logits, in stream order, as one
//   copy launch (a device table of the spans per lane and kept prefix, built at construction), and
//   marks the window accepted with n_keep (kept(lane)); the snapshots and rows stay, so a later
//   rollback to fewer is still exact. The caller rewinds the KV length (attention rows past it are
//   never read). set_kept(lane, n) marks a keep that needs no copy (n = count, or the device's).
// - The greedy round (Backend::verify_accept_greedy): stage_accept(windows, forced) writes the
//   round table to pinned memory (host only); enqueue_accept(n) after the windows' device work
//   copies it up and accepts on the device: kernels::greedy_accept over the windows' greedy ids
//   (forced[i] > 0 replaces window i's keep) writes each lane's n_keep and window start to device
//   arrays (round()), and kernels::copy_span_table_kept runs each lane's rollback when its n_keep
//   is below its count, reading n_keep on the device: nothing waits for the host. read_round()
//   enqueues one copy of the greedy ids and the n_keep array (adjacent on the device) to pinned
//   memory; after the caller's synchronisation ids(lane) are the window's ids and
//   device_kept(lane) is the lane's keep (the caller then calls set_kept).
// - close(lane): the window's tokens stay (a keep of all of them, or the lane changed otherwise).
// Thread safety: engine thread only.
#pragma once

#include "core/cuda/cuda_runner.h"
#include "core/cuda/device_weights.h"
#include "core/cuda/graph_cache.h"
#include "ninfer/kernels/spec_round.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ninfer::core::cuda {

class VerifyWindows {
  public:
    static constexpr size_t kMaxGraphs = 256;

    struct Request {
        int lane = 0;
        uint32_t start = 0;
        std::span<const int32_t> tokens;
    };

    VerifyWindows(Runner& run, const MemoryPlan& plan, bool graphs);
    ~VerifyWindows();
    VerifyWindows(const VerifyWindows&) = delete;
    VerifyWindows& operator=(const VerifyWindows&) = delete;

    // Device bytes the windows allocate for this plan (snapshots with the GPU's conv dtype, logits).
    static uint64_t device_bytes(const Runner& run, const MemoryPlan& plan);

    void enqueue(std::span<const Request> windows, const std::function<void(int n)>& after_forward = {}) {
        stage(windows);
        enqueue_staged(windows, after_forward, graphs_);
    }
    // enqueue's two halves (the contract above): the host's, then the device's.
    void stage(std::span<const Request> windows);
    void enqueue_staged(std::span<const Request> windows, const std::function<void(int n)>& after_forward, bool graphs);
    void read_rows(int lane, float* host_rows) const;
    void read_ids() const;
    const int32_t* ids(int lane) const { return ids_host_ + size_t(lane) * (max_draft_ + 1); }
    void rollback(int lane, uint32_t n_keep);
    void close(int lane) { lanes_[size_t(lane)].count = lanes_[size_t(lane)].kept = 0; }
    uint32_t count(int lane) const { return lanes_[size_t(lane)].count; }
    uint32_t start(int lane) const { return lanes_[size_t(lane)].start; }
    uint32_t kept(int lane) const { return lanes_[size_t(lane)].kept; } // 0: not accepted yet
    void set_kept(int lane, uint32_t n) { lanes_[size_t(lane)].kept = n; }

    // The greedy round's device side (the contract above).
    struct RoundDevice {
        const int32_t* starts = nullptr; // [n_lanes] the window's first position
        const int32_t* n_keep = nullptr; // [n_lanes] tokens kept
        const int32_t* ids = nullptr;    // [n_lanes][ids_stride] greedy picks
        int ids_stride = 0;
    };
    void stage_accept(std::span<const Request> windows, std::span<const uint32_t> forced);
    void enqueue_accept(int n);
    RoundDevice round() const { return {starts_, n_keep_, ids_, int(max_draft_ + 1)}; }
    void read_round() const;
    uint32_t device_kept(int lane) const { return uint32_t(n_keep_host_[lane]); }
    // The windows' own graphs that failed to capture (graph_cache.h; those forwards ran eagerly).
    size_t graph_failures() const { return graph_.failures(); }

  private:
    struct Window {
        uint32_t start = 0, count = 0;
        uint32_t kept = 0;             // accepted with this many (0: not yet); rollbacks below stay exact
        std::vector<uint8_t*> conv;   // per GDN layer: K conv-history snapshots
        std::vector<float*> recurrent; // per GDN layer: K recurrent-state snapshots
        float* logits = nullptr;       // (K + 1) rows, stride run_.logits_stride()
    };
    void enqueue_device(std::span<const Request> group, const std::function<void(int)>& after_forward);

    Runner& run_;
    uint32_t max_draft_ = 0;
    bool graphs_ = true;
    DeviceArena arena_;
    std::vector<Window> lanes_;
    int32_t* step_in_host_ = nullptr; // pinned [n_lanes][3 * kMaxStepTokens]: one row per forward of a call
    int32_t* ids_ = nullptr;          // device [n_lanes][K + 1] greedy picks, then n_keep_, starts_
    int32_t* ids_host_ = nullptr;     // pinned copy of ids_ and n_keep_
    void* argmax_work_ = nullptr;
    kernels::CopySpan* rollback_table_ = nullptr; // device [n_lanes][K][rollback_spans_]
    uint64_t rollback_spans_ = 0, rollback_max_bytes_ = 0;
    int round_width_ = 0;             // kernels::kRoundTableHead + K + 1
    int32_t* round_host_ = nullptr;   // pinned [n_lanes][round_width_]: the round table
    int32_t* round_table_ = nullptr;  // device copy
    int32_t* n_keep_ = nullptr;       // device [n_lanes], right after the ids
    int32_t* starts_ = nullptr;       // device [n_lanes]
    int32_t* n_keep_host_ = nullptr;  // in ids_host_, after the ids
    GraphCache graph_; // by the forward's (lane, size) list
};

} // namespace ninfer::core::cuda
