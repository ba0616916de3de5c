// ninfer::core - the CUDA backend's sampler state: per-lane token counts and logit-bias rows on
// the GPU, the kernels::sample workspace, row parameters and one step's results.
//
// Contract:
// - GpuSampler(n_lanes, vocab, max_history, stream) allocates everything up front (counts and bias:
//   n_lanes x vocab x 4 bytes each; masks n_lanes x vocab / 8 bytes, and kSlots times that pinned)
//   and zeroes the counts. Throws ninfer::Error("cuda: ...").
// - samplable(params, n_top): whether the GPU sampler covers the request: everything except a
//   logit_bias list naming an id twice (the CPU adds the entries in turn; the GPU holds one value
//   per id) and more than kSampleMaxTopLogprobs top logprobs. The backend samples those on the host.
// - prepare(lane, params, generated, n_top) returns the row parameters and enqueues, when needed,
//   the uploads that bring the lane's rows to the request: the counts row is rebuilt from
//   `generated` only when it does not already hold it or all but its last id (then count_token
//   carries that id and kernels::sample adds it on the GPU: no upload while a request goes on);
//   the bias row is rewritten only when the list differs from the one it holds; a constrained row's
//   allowed-token bitset (params.allowed_tokens, issue 32) is copied into the slot's pinned row of
//   the lane and uploaded to the lane's mask row every time (kSampleUseMask), in stream order
//   before the step's sampling: the mask is the host's, computed after the previous token.
// - upload(rows, slot) copies row parameters (<= kMaxStepTokens) to the device through slot's
//   pinned buffer (so it never waits for the stream); enqueue(logits, stride, n, plan) appends
//   kernels::sample over them (graph-capturable: fixed device pointers); read(rows) waits for the
//   stream and returns the results of those rows (slot 0).
// - Pipelined steps use slots 1..kSlots-1 in turn: enqueue_read(slot, top) appends the copy of
//   the results into the slot's pinned words, an event, and a device copy of the sampled ids
//   (last_ids(): what the next step's rows read as kTokenOfLastStep; slot 0's reads, the
//   prefills' first samples, leave it alone); collect(slot, rows) waits for
//   that event only. A slot's buffers are rewritten only after its results were collected.
// Thread safety: engine thread only.
#pragma once

#include "core/cuda/device_weights.h"
#include "core/backend/backend.h"
#include "ninfer/kernels/sample.h"

#include <cuda_runtime.h>

#include <span>
#include <utility>
#include <vector>

namespace ninfer::core::cuda {

class GpuSampler {
  public:
    GpuSampler(int n_lanes, uint32_t vocab, uint32_t max_history, cudaStream_t stream);
    ~GpuSampler();
    GpuSampler(const GpuSampler&) = delete;
    GpuSampler& operator=(const GpuSampler&) = delete;

    static bool samplable(const SamplingParams& params, int n_top);
    // Whether a row's sampling reads the lane's history (repetition, presence, frequency).
    static bool penalised(const SamplingParams& p) {
        return !(p.presence_penalty == 0.f && p.frequency_penalty == 0.f && p.repetition_penalty == 1.f);
    }
    kernels::SampleRowParams prepare(int lane, const SamplingParams& params, std::span<const int32_t> generated,
                                     int n_top, int slot = 0);
    static constexpr int kSlots = 3;
    void upload(std::span<const kernels::SampleRowParams> rows, int slot = 0);
    void enqueue(const float* logits, int64_t stride, int n, const kernels::SamplePlan& plan);
    std::vector<DecodeResult> read(std::span<const kernels::SampleRowParams> rows);
    void enqueue_read(int slot, bool top);
    std::vector<DecodeResult> collect(int slot, std::span<const kernels::SampleRowParams> rows);
    const int32_t* last_ids() const { return last_ids_; }

  private:
    // What a lane's rows hold: the ids counted in its counts row, the list written to its bias row.
    struct LaneRows {
        std::vector<int32_t> counted;
        std::vector<std::pair<int32_t, float>> bias;
    };
    int32_t sync_counts(int lane, std::span<const int32_t> generated);
    void sync_bias(int lane, const std::vector<std::pair<int32_t, float>>& bias);

    // Result words: ids, logprobs, then top ids and top logprobs (kSampleMaxTopLogprobs per row).
    static constexpr size_t kRows = 8;
    static constexpr size_t kTopIdsAt = 2 * kRows;
    static constexpr size_t kTopLogprobsAt = kTopIdsAt + kRows * kernels::kSampleMaxTopLogprobs;
    static constexpr size_t kOutWords = kTopLogprobsAt + kRows * kernels::kSampleMaxTopLogprobs;

    uint32_t vocab_, max_history_;
    cudaStream_t stream_;
    DeviceArena arena_;
    std::vector<LaneRows> lanes_;
    kernels::SampleRowParams* params_ = nullptr;
    kernels::SampleRowParams* params_host_ = nullptr; // pinned [kSlots][kRows]
    int32_t *out_ = nullptr, *out_host_ = nullptr, *counts_ = nullptr, *uploads_ = nullptr; // out_host_: [kSlots][kOutWords]
    int32_t* last_ids_ = nullptr;
    cudaEvent_t read_done_[kSlots] = {};
    float *bias_ = nullptr, *bias_values_ = nullptr;
    uint8_t* workspace_ = nullptr;
    size_t mask_words_ = 0;
    uint32_t *mask_ = nullptr, *mask_host_ = nullptr; // mask_host_: pinned [kSlots][n_lanes][mask_words_]
};

} // namespace ninfer::core::cuda
