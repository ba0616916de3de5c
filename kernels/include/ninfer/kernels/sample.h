// ninfer::kernels - token sampling on the GPU, one block per row of fp32 logits, so a decode
// step hands only ids (and their logprobs) back to the host.
//
// Contract (per row r, parameters rows[r] in device memory so a captured graph can change them):
// - temperature <= 0: greedy, the exact argmax, ties to the lower id.
// - otherwise: z = logits / temperature; keep the top_k largest (top_k <= 0 or > kSampleMaxTopK
//   means kSampleMaxTopK in this version; ties at the boundary keep the lower ids); order them by
//   (z desc, id asc); p_i = exp(z_i - z_0); top_p keeps the shortest prefix whose mass reaches
//   top_p of the kept mass (at least one); min_p keeps p_i >= min_p (p_0 = 1); then with
//   u = sample_uniform(seed, step) the token is the first i with u * (sum of kept p) < running
//   sum of p.
// - ids[r] gets the token; logprobs[r] (optional) gets log_softmax(raw logits)[token].
// - sample_uniform(seed, step) = (splitmix64(splitmix64(seed) ^ step * 0xD1B54A32D192ED03) >> 11)
//   * 2^-53, core::sampling_uniform's formula (core/engine/sampling.cpp), so CPU and GPU draw alike;
//   z = float(logit * (1/T)) and the probabilities are f64, as in core::sample_token.
// - Requirements: 1 <= vocab, 1 <= n_rows, stride >= vocab; else cudaErrorInvalidValue.
// Not yet here (later parts of issue 9): logit bias and penalties, top_k beyond kSampleMaxTopK.
// Thread safety: stateless; any host thread, any stream; graph-capturable.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

constexpr int kSampleMaxTopK = 1024;

struct SampleRowParams {
    float temperature = 0.f;
    int32_t top_k = 0;
    float top_p = 1.f;
    float min_p = 0.f;
    uint64_t seed = 0;
    uint64_t step = 0;
};

struct SampleArgs {
    const float* logits = nullptr;
    int64_t stride = 0;
    int vocab = 0;
    int n_rows = 0;
    const SampleRowParams* rows = nullptr; // device memory
    int32_t* ids = nullptr;                // device memory
    float* logprobs = nullptr;             // device memory, optional
};

__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
__host__ __device__ inline double sample_uniform(uint64_t seed, uint64_t step) {
    return double(splitmix64(splitmix64(seed) ^ (step * 0xD1B54A32D192ED03ull)) >> 11) *
           (1.0 / 9007199254740992.0);
}

cudaError_t sample(const SampleArgs& args, cudaStream_t stream);

} // namespace ninfer::kernels
