// ninfer::core - CudaBackend, the CUDA backend's class (cuda_backend.h), declared for the files
// that define its parts.
//
// Contract:
// - Private to core/cuda: only the cuda_backend*.cpp files include it; everyone else reaches the
//   backend through make_cuda_backend (cuda_backend.h) and the Backend interface (backend.h), whose
//   semantics it implements.
// - A CudaBackend owns the lanes' host bookkeeping (token ids, KV pages, RoPE offsets), the KV page
//   free list with each page's holders, the cuda::Runner (weights, KV pool, GDN state, step
//   buffers, the stream), the GPU sampler, the verify windows, the tensor-core PrefillRunner, the
//   MTP head, the lane-image copier, the decode graphs and the pinned step inputs, all for its
//   lifetime.
// - Its methods live by responsibility: cuda_backend.cpp (construction, lanes, KV pages, the
//   backend's free functions), cuda_backend_decode.cpp (pipelined decode steps, sampling, graphs),
//   cuda_backend_prefill.cpp (prefill, prefill_with's multimodal rows, the layer-sliced prefill),
//   cuda_backend_speculative.cpp (MTP drafts, verify windows), cuda_backend_lanes.cpp (lane images
//   and the checkpoints saved in the background).
// Thread safety: engine thread only (the copier's thread stays inside cuda::LaneImageCopier).
#pragma once

#include "core/backend/prefill_inputs.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_runner.h"
#include "core/cuda/gpu_sampler.h"
#include "core/cuda/graph_cache.h"
#include "core/cuda/lane_image.h"
#include "core/cuda/mtp_head.h"
#include "core/cuda/prefill_runner.h"
#include "core/cuda/verify_window.h"
#include "ninfer/kernels/sample.h"

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ninfer::core::cuda_detail {

using cuda::cuda_check;
using cuda::kMaxStepTokens;
using cuda::GpuSampler;

// Sampler variants captured per batch size: bit 0 some row draws, bit 1 some row wants top logprobs.
constexpr int kSampleVariants = 4;

struct Lane {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> pages;
    bool has_logits = false;
    int64_t rope_offset = 0; // next text position - token count (backend.h prefill_with)
};

class CudaBackend final : public Backend {
  public:
    CudaBackend(const ModelWeights& w, const MemoryPlan& plan, const CudaBackendOptions& o);
    ~CudaBackend() override;

    std::string name() const override { return "cuda"; }
    int n_lanes() const override { return int(lanes_.size()); }
    uint32_t vocab_size() const override { return run_.config().vocab_size; }
    uint32_t max_context() const override { return plan_.max_context; }
    uint32_t lane_length(int lane) const override { return uint32_t(at(lane).tokens.size()); }

    void reset_lane(int lane) override;

    void prefill(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) override;
    void prefill_with(int lane, std::span<const int32_t> tokens, const PrefillInputs& in, LogitsOut out,
                      std::vector<float>* logits) override;
    // A prefill; `mm` (a checked prefill_with chunk) puts its rows and M-RoPE positions in.
    void prefill_rows(int lane, std::span<const int32_t> tokens, const PrefillInputs* mm, LogitsOut out,
                      std::vector<float>* logits);
    // A prefill's checks and page reservation (returns the lane's first new position), and its end.
    uint32_t prefill_start(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits);
    void prefill_done(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits);
    // Layer-sliced prefill (backend.h): a chunk that one PrefillRunner pass takes (text, 16 tokens
    // up to the runner's size, no per-position logits) is enqueued a few layers per
    // prefill_advance, with no host wait until its last slice; others run whole (the default).
    void prefill_begin(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) override;
    bool prefill_advance(int max_layers) override;
    bool prefill_pending() const override { return sliced_.has_value(); }

    DecodeResult sample_after_prefill(int lane, const SamplingParams& sampling, std::span<const int32_t> generated,
                                      int n_top) override;

    std::vector<DecodeResult> decode(std::span<const DecodeStep> steps) override;

    void decode_begin(std::span<const DecodeStep> steps) override { begin_step(steps, true); }
    // The forward pass is enqueued now; decode_sample enqueues the sampling behind it, so the host
    // computes constrained rows' masks while the GPU runs the step.
    void decode_begin_forward(std::span<const DecodeStep> steps) override { begin_step(steps, false); }
    void decode_sample(std::span<const DecodeStep> steps) override;

    // Enqueues one step and returns: its inputs go up through pinned buffers (no wait for the step
    // in flight), rows whose token is kTokenOfLastStep copy it on the device from the previous
    // step's sampled ids, and its results come back into a pinned slot behind an event. A row
    // whose sampling needs the host (penalties read `generated`, host-sampled requests) waits for
    // the previous step's ids instead, and a step with a host-sampled row completes at once.
    // sample_now false: the forward pass only (decode_begin_forward).
    void begin_step(std::span<const DecodeStep> steps, bool sample_now);

    std::vector<DecodeResult> decode_end() override;

    std::vector<float> last_logits(int lane) const override;

    LaneImage save_lane(int lane) const override;

    bool has_mtp() const override { return mtp_ != nullptr; }
    uint32_t verify_rows_per_pass() const override { return uint32_t(kMaxStepTokens); }
    std::vector<std::vector<int32_t>> draft_mtp(std::span<const DraftRequest> requests,
                                                std::vector<std::vector<float>>* logits) override;
    void restore_lane(int lane, const LaneImage& image) override;
    // Verify windows (core/cuda/verify_window.h): lanes' windows in forwards of up to 8 rows.
    void verify(std::span<const VerifyStep> steps, std::vector<float>& logits) override;
    // The greedy picks on the device: the ids and the wanted lanes' rows alone come back.
    void verify_greedy(std::span<const VerifyStep> steps, std::span<const uint8_t> want_rows,
                       std::vector<float>& logits, std::vector<int32_t>& ids) override;
    void accept_verified(int lane, uint32_t n_keep) override;
    // The greedy round with one host synchronisation (cuda_backend.h).
    void verify_accept_greedy(std::span<const GreedyRoundStep> steps, GreedyRoundResult& result) override;
    bool greedy_rounds_in_one_call() const override { return options_.fused_rounds; }
    uint64_t graph_capture_failures() const override { return round_graphs_.failures() + windows_.graph_failures(); }

    // The lane's GDN state and page row are snapshotted in stream order now; its pages stay out of
    // reuse until the copier thread has moved the image to host memory (lane_image.h).
    void save_lane_async(int lane, std::function<void(LaneImage)> done) override;
    void poll_saves(bool wait) override;
    bool saves_in_flight() const override { return !pending_saves_.empty() || !ready_saves_.empty(); }
    bool can_save_async() const override { return copier_.in_flight() < cuda::LaneImageCopier::kSaveSlots; }
    // Test-only (NINFER_FAULT): a real sticky fault (kernels/fault.h), thrown by cuda_check as a
    // step's own check would throw it.
    void inject_fault(const std::string& what) override;

    // The greedy round's graphs on or off (set_cuda_round_graphs).
    void set_round_graphs(bool on) { round_graphs_on_ = on; }
    size_t round_graphs() const { return round_graphs_.size(); }
    void fail_next_round_capture() { round_graphs_.fail_next_capture(); } // cuda_fail_next_round_capture

  private:
    // verify's checks and forwards: the windows are open, their rows and ids on the device.
    size_t enqueue_verify(std::span<const VerifyStep> steps);
    // Its host half (checks, pages, the windows staged and opened, the lanes' tokens) and its device
    // half (graphs: each forward through the windows' own graph; false inside a round's capture).
    std::vector<cuda::VerifyWindows::Request> stage_verify(std::span<const VerifyStep> steps);
    void enqueue_windows(std::span<const cuda::VerifyWindows::Request> requests, bool graphs);
    // Rewinds a lane's host bookkeeping to `length` tokens; its pages beyond `pages_for` tokens go.
    void keep_tokens(int lane, size_t length, size_t pages_for);
    // Tensor-core prefill (PrefillRunner) in chunks of its size; logits through the decode head.
    void prefill_chunks(int lane, uint32_t start, std::span<const int32_t> tokens, const PrefillInputs* mm,
                        LogitsOut out, std::vector<float>* logits);
    // After a PrefillRunner pass over tokens [b, b + n) of a prefill call (`last`: its last pass):
    // the logits asked for, through the decode head, and the MTP head's catch-up (mm: the pass's
    // prefill_with inputs, or null).
    void chunk_outputs(int lane, uint32_t start, std::span<const int32_t> tokens, size_t b, int n, bool last,
                       LogitsOut out, std::vector<float>* logits, const PrefillInputs* mm = nullptr);

    // The decode kernels over blocks of up to 8 consecutive tokens of the lane (GDN token by token).
    void prefill_blocks(int lane, uint32_t start, std::span<const int32_t> tokens, const PrefillInputs* mm,
                        LogitsOut out, std::vector<float>* logits);

    // Logits of step rows [row, row + n), which hold prompt tokens first_token.. of this prefill call:
    // with All, every row's logits go to logits (if given) and the last block's last row becomes the
    // lane's logits; with Last, only the call's last row is computed (when `last`), kept for the lane.
    void take_logits(int lane, int row, int n, size_t first_token, bool last, LogitsOut out,
                     std::vector<float>* logits);

    Lane& at(int lane);
    const Lane& at(int lane) const { return const_cast<CudaBackend*>(this)->at(lane); }

    void check_tokens(std::span<const int32_t> tokens) const;

    // A page leaves the free list while a lane or a save in flight holds it.
    void release_page(uint32_t page);
    // Saves the copier has finished: their pages go back, their images wait for poll_saves.
    void finish_saves(bool wait);

    // Grows the lane's page table to hold n more tokens and uploads its row: synchronously, or
    // (slot > 0: a pipelined step, or a verify while none is outstanding) through that slot's
    // pinned row, in stream order.
    void grow(int lane, size_t n, int slot = 0);
    void upload_page_table(int lane, int slot = 0);
    void upload_step(const std::vector<int32_t>& in);
    // The lane's RoPE offset, here and in the runner's copy every attention prep reads.
    void set_lane_rope_offset(int lane, int64_t offset);
    void keep_lane_logits(int lane, int row);

    void enqueue_decode(int n, const kernels::SamplePlan& plan, bool sample);
    cudaGraphExec_t graph_for(int n, const kernels::SamplePlan& plan, bool sample);
    // A step begun and not yet ended: its rows' lanes and parameters, its results once collected,
    // and where the next step fed a lane this step's sample (patched into the lane's ids at the end).
    struct Feed {
        int lane = 0;
        size_t index = 0;
        int row = 0;
    };
    struct Begun {
        int slot = 1;
        std::vector<int> lanes;
        std::vector<kernels::SampleRowParams> params;
        std::deque<std::vector<int32_t>> generated; // rows' histories with the previous step's id
        std::optional<std::vector<DecodeResult>> results;
        std::vector<Feed> feeds;
        bool awaiting_sample = false; // begun by decode_begin_forward, decode_sample not yet called
        int row_of(int lane) const {
            for (size_t i = 0; i < lanes.size(); ++i)
                if (lanes[i] == lane)
                    return int(i);
            return -1;
        }
    };
    const std::vector<DecodeResult>& results_of(Begun& b);
    // The rows' sampler parameters (prepare() enqueues their count, bias and mask uploads).
    kernels::SamplePlan prepare_rows(Begun& b, std::span<const DecodeStep> st);
    // A step with a host-sampled row completes now: the lanes' logits are this step's only until
    // the next one begins.
    void sample_host_rows(Begun& b, std::span<const DecodeStep> st);

    MemoryPlan plan_;
    CudaBackendOptions options_;
    cuda::Runner run_;
    std::vector<Lane> lanes_;
    GpuSampler sampler_;
    cuda::VerifyWindows windows_;
    std::vector<uint32_t> free_;
    std::array<std::array<cudaGraphExec_t, kMaxStepTokens + 1>, kSampleVariants + 1> graphs_{};
    std::unique_ptr<cuda::PrefillRunner> prefill_;
    // The sliced prefill's chunk between prefill_begin and its last prefill_advance.
    struct SlicedChunk {
        int lane = 0;
        uint32_t start = 0;
        std::vector<int32_t> tokens;
        LogitsOut out = LogitsOut::None;
        std::vector<float>* logits = nullptr;
    };
    std::optional<SlicedChunk> sliced_;
    std::unique_ptr<cuda::MtpHead> mtp_; // plan.mtp only
    // The greedy rounds' graphs by shape (verify_accept_greedy; options.round_graphs).
    cuda::GraphCache round_graphs_;
    bool round_graphs_on_ = true;
    // Declared after run_ and sampler_: its thread stops (and its copies end) before they go.
    mutable cuda::LaneImageCopier copier_;
    std::deque<Begun> begun_;
    uint64_t step_counter_ = 0;
    int32_t* step_in_host_ = nullptr;  // pinned [GpuSampler::kSlots][3 * kMaxStepTokens]
    int32_t* page_rows_host_ = nullptr; // pinned [GpuSampler::kSlots][n_lanes][max_pages]
    std::vector<uint16_t> page_refs_; // holders of each KV page: its lane, saves in flight
    std::vector<std::pair<uint64_t, std::function<void(LaneImage)>>> pending_saves_;
    std::vector<std::pair<std::function<void(LaneImage)>, LaneImage>> ready_saves_;
};

} // namespace ninfer::core::cuda_detail
