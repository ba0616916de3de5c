// ninfer::kernels - token sampling on the GPU for rows of fp32 logits (batch 1..8 in one launch
// sequence), so a decode step hands only ids, their logprobs and top logprobs back to the host.
//
// Contract (per row r, parameters rows[r] in device memory so a captured graph can change them):
// - The arithmetic is core::sample_token's (core/backend/sampling.cpp), in its order:
//   v = -inf where bit id of mask[lane] (mask_words words a lane, bit id % 32 of word id / 32) is
//   clear or past the row (when kSampleUseMask: a grammar's allowed tokens; at least one allowed
//   id below vocab, the caller's check), else v = logit + bias[lane][id] (when kSampleUseBias) -> for ids with n = counts[lane][id] > 0
//   (when kSampleUseCounts; count_token counts once more): repetition (v > 0 ? v / rep : v * rep,
//   when rep != 1 and rep > 0), then v -= presence + frequency * n, all f32 without contraction.
// - temperature <= 0: greedy, the exact argmax of v, ties to the lower id (a NaN first logit wins,
//   as on the CPU).
// - otherwise z = v * (1 / temperature) (f32); candidates are the "head" z >= head_threshold(top)
//   (top = max z; the CPU's 40-nat window, outside of which a term cannot change an f64 sum), in
//   (z desc, id asc) order; top_k keeps the first top_k (top_k <= 0 or >= vocab: all); with
//   e_i = exp(double(z_i) - top) and S = sum of e over those: top_p keeps the shortest prefix whose
//   mass reaches top_p * S; min_p keeps e_i / S >= min_p / S (at least the first); the token is
//   the first kept i whose running mass exceeds u * (kept mass), u = sample_uniform(seed, step).
// - Sums: exact sequential order inside the final bucket, f64 atomics above it; the CPU sums
//   sequentially. So the draw equals the CPU's except when u * mass or top_p * S lies within
//   ~1e-13 (relative) of a cumulative boundary (also the only place where two runs may differ).
//   Logits that make max z non-finite (inf, all NaN, all -inf) give the argmax (CPU: undefined).
// - Outputs: ids[r]; logprobs[r] (optional) = log_softmax(raw logits)[id]; when n_top_logprobs
//   = n > 0: top_ids/top_logprobs[r * kSampleMaxTopLogprobs + j], j < min(n, vocab), the n
//   largest raw logits (ties to the lower id) and their log_softmax.
// - count_token >= 0: counts[lane][count_token] += 1 (persisting), so a decode graph keeps the
//   penalty counts current on the GPU without uploading the history.
// - Plan: draws = false skips the draw kernels (every row must then be greedy: a row with
//   temperature > 0 gets the argmax); top = false skips the top-logprob kernels (rows asking for
//   them get nothing written). Launches: 2 (greedy), 8 (top logprobs), 20 (draws), none of them
//   synchronising, so the sequence is graph-capturable.
// - workspace: sample_workspace_bytes(n_rows, vocab) bytes of device memory, no initial contents;
//   one sample() at a time per workspace (stream order).
// - Requirements: 1 <= vocab <= kSampleMaxVocab, 1 <= n_rows, stride >= vocab, workspace set;
//   counts/bias/mask set when any row uses them; top_ids/top_logprobs set when plan.top. Else
//   cudaErrorInvalidValue.
// Thread safety: stateless apart from the caller's buffers; any host thread, any stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::kernels {

constexpr int kSampleMaxTopLogprobs = 20;
constexpr int kSampleMaxVocab = 1 << 20; // ids take 20 bits of the 52-bit ordering key
constexpr uint32_t kSampleUseCounts = 1u; // apply repetition/presence/frequency from counts[lane]
constexpr uint32_t kSampleUseBias = 2u;   // add bias[lane]
constexpr uint32_t kSampleUseMask = 4u;   // only the ids set in mask[lane] (constrained decoding)

struct SampleRowParams {
    float temperature = 0.f;
    int32_t top_k = 0;
    float top_p = 1.f;
    float min_p = 0.f;
    float presence_penalty = 0.f;
    float frequency_penalty = 0.f;
    float repetition_penalty = 1.f;
    int32_t lane = 0;          // row of counts and bias
    int32_t count_token = -1;  // counted once more for this row, and added to counts (see above)
    int32_t n_top_logprobs = 0; // 0..kSampleMaxTopLogprobs
    uint32_t flags = 0;        // kSampleUseCounts | kSampleUseBias | kSampleUseMask
    uint64_t seed = 0;
    uint64_t step = 0;
};

struct SamplePlan {
    bool draws = true;
    bool top = true;
};

struct SampleArgs {
    const float* logits = nullptr;
    int64_t stride = 0;
    int vocab = 0;
    int n_rows = 0;
    const SampleRowParams* rows = nullptr; // device memory
    int32_t* counts = nullptr;             // [lanes][vocab], device
    const float* bias = nullptr;           // [lanes][vocab], device (0 where no bias)
    const uint32_t* mask = nullptr;        // [lanes][mask_words], device: allowed-token bitsets
    int mask_words = 0;
    void* workspace = nullptr;
    int32_t* ids = nullptr;                // device memory
    float* logprobs = nullptr;             // device memory, optional
    int32_t* top_ids = nullptr;            // [n_rows][kSampleMaxTopLogprobs], device
    float* top_logprobs = nullptr;         // [n_rows][kSampleMaxTopLogprobs], device
    SamplePlan plan;
};

__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
// core::sampling_uniform's formula, so CPU and GPU draw the same uniform.
__host__ __device__ inline double sample_uniform(uint64_t seed, uint64_t step) {
    return double(splitmix64(splitmix64(seed) ^ (step * 0xD1B54A32D192ED03ull)) >> 11) *
           (1.0 / 9007199254740992.0);
}

size_t sample_workspace_bytes(int n_rows, int vocab);
cudaError_t sample(const SampleArgs& args, cudaStream_t stream);

// counts[ids[i]] += 1 for every i < n with 0 <= ids[i] < vocab (a lane's row; ids on the device).
cudaError_t sample_counts_add(int32_t* counts, const int32_t* ids, int n, int vocab, cudaStream_t stream);
// bias[ids[i]] = values[i] for 0 <= ids[i] < vocab; ids must be distinct (the caller zeroes the row).
cudaError_t sample_bias_scatter(float* bias, const int32_t* ids, const float* values, int n, int vocab,
                                cudaStream_t stream);

} // namespace ninfer::kernels
