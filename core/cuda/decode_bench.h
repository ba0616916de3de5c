// ninfer::core - the CUDA backend's speed bench (issue 9 §4): seeded random weights of a named
// shape built without a multi-GB file, decode tok/s per batch and context depth, prefill tok/s,
// and the fraction of the memory roofline measured on the same GPU.
//
// Contract:
// - synthetic_device_weights(shape, recipe, seed): ModelWeights of synthetic_shape_config(shape)
//   (vocabulary set to the checkpoints' 248,320 rows) whose stored tensors all view one host
//   buffer of seeded random bytes, each byte < 0x3c so every bf16/fp16/fp8 value read from it is
//   finite and below 1 in magnitude. Matrices take the recipe's format ("bf16", "fp8" =
//   fp8_e4m3fn_row_bf16, "q4"/"q5"/"q6" = q*_g64_fp16, "q8" = q8_g32_fp16 for every matrix;
//   "nvfp4" for every matrix of 128-row multiples and 64-column multiples, bf16 for the rest;
//   "mix" = the upstream groupwise-int assignment of docs/ARTIFACT_FORMAT.md §4.1, the converter's
//   q4 recipe: q6 vocabulary, q4 Q/K and gate/up, q5 V/gate/z/outputs/down, q8 shared expert, bf16
//   GDN a/b and router); vectors bf16, a_log/dt_bias f32. Unknown recipes throw ninfer::Error.
//   Numerics are meaningless; bytes, shapes and formats are the real model's.
// - run_decode_bench: weights of request.weights (an artifact's) or else the synthetic shape;
//   copy bandwidth (device-to-device copy of 4 GiB, best of 10, read + write bytes); prefill of
//   each prompt length on one lane in chunks of prefill_chunk tokens (none when request.prefill is
//   false; tok/s, TTFT = wall time to the first sampled id, TFLOP/s = matrix FLOPs of every prompt
//   token plus causal attention / time, and its fraction of the bf16 tensor-core peak measured
//   first, tc_peak.h); then per
//   prompt length as context depth: every lane restored from a synthetic lane image of `depth`
//   tokens (KV in request.kv_dtype),
//   then per batch: lane l's first token (l * 7919 + 101) mod min(151000, vocabulary) (distinct
//   lanes, so a MoE batch routes like independent requests), warm-up (graph capture), `steps` timed
//   decode calls with request.sampling (greedy unless set) (host clock around each call, which waits for the sampled ids); step_ms =
//   the median call (min / max beside it),
//   decode tok/s = batch / median; bytes per
//   step = weight bytes read (all matrices except the embedding, MoE: the router, shared expert
//   and the expected share of distinct experts that batch independent tokens choose, E (1 - (1 -
//   K / E)^batch)) + K/V read for batch * depth tokens + GDN state
//   read and written once per lane; roofline fraction = bytes / time / copy bandwidth. The last
//   timed step of each row runs between cudaProfilerStart/Stop, so a profiler started with
//   profiling off (ncu --profile-from-start off) sees exactly one decode step per row.
// Thread safety: one bench at a time (it owns the GPU's memory while it runs).
#pragma once

#include "core/cuda/speculative_bench.h"
#include "core/cuda/tc_peak.h"
#include "core/backend/backend.h"
#include "core/model/weights.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ninfer::core {

struct SyntheticWeights {
    std::vector<uint8_t> bytes;
    std::vector<StoredTensor> tensors;
    ModelWeights weights;
};
// layers > 0: only the first `layers` layers of the shape (tests at real widths); with_mtp: also
// the MTP head (mtp_parameter_specs), its matrices in the recipe's format too.
std::unique_ptr<SyntheticWeights> synthetic_device_weights(const std::string& shape, const std::string& recipe,
                                                           uint64_t seed, uint32_t layers = 0, bool with_mtp = false);

struct DecodeBenchRequest {
    std::string shape = "qwen3.6-27b";
    std::string recipe = "q4";
    KvDtype kv_dtype = KvDtype::Bf16;
    const ModelWeights* weights = nullptr; // else synthetic weights of shape/recipe
    std::vector<int> batches = {1, 2, 4, 8};
    std::vector<uint32_t> prompt_lens = {512, 8192};
    int steps = 32;
    uint32_t prefill_chunk = 2048; // tokens per tensor-core prefill chunk (MemoryRequest.prefill_chunk)
    bool prefill = true; // false: decode rows only (deep contexts whose prefill would take minutes)
    // Every decode row's sampling (default greedy). A server's request samples with its own
    // parameters: with temperature > 0 the step includes the GPU sampler's draw kernels, whose time
    // depends on how flat the logits are (synthetic weights give nearly uniform ones, the worst case).
    SamplingParams sampling;
    // Speculative rounds (issue 28, speculative_bench.h): spec_k > 0 plans verify windows of
    // spec_k + 1 tokens and, after each decode row, times `steps` rounds at that batch and depth
    // with forced acceptance (all, 75%); spec_mtp drafts with the MTP head (synthetic weights get
    // one; an artifact must have one), else the drafts are fixed ids (n-gram lookup is host work).
    int spec_k = 0;
    bool spec_mtp = false;
};

struct PrefillBenchRow {
    uint32_t prompt_len = 0;
    double tokens_per_s = 0, ttft_ms = 0;
    double tflops = 0, peak_fraction = 0; // prefill FLOPs (matrices + causal attention) / time; / tc_peak
};

struct DecodeBenchRow {
    int batch = 0;
    uint32_t depth = 0;
    int steps = 0;                           // timed decode calls behind the figures
    double step_ms = 0, min_step_ms = 0, max_step_ms = 0; // median, fastest, slowest call (ms)
    double tokens_per_s = 0, bytes_per_step = 0, roofline_fraction = 0;
};

struct DecodeBenchReport {
    double copy_gbps = 0;
    TensorCorePeak tc_peak;
    uint32_t prefill_chunk = 0;
    uint64_t weight_bytes = 0;
    std::vector<PrefillBenchRow> prefill;
    std::vector<DecodeBenchRow> rows;
    std::vector<SpecBenchRow> spec_rows;
    std::string text() const; // human table, one line per row
};

DecodeBenchReport run_decode_bench(const DecodeBenchRequest& request);

} // namespace ninfer::core
