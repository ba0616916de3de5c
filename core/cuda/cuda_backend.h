// ninfer::core - the CUDA backend: the whole model on one NVIDIA GPU (Backend interface).
//
// Contract:
// - make_cuda_backend(weights, plan, options) uploads the weights as stored (bf16,
//   fp8_e4m3fn_row_bf16, q4/q5/q6_g64_fp16, q8_g32_fp16, nvfp4), allocates the KV pool (bf16, fp8
//   or int8 as the plan says), one GDN state slot per lane and every step buffer up front
//   (cuda_runner.h) and refuses, with ninfer::Error("cuda: ..."), a model the kernels do not
//   cover, another weight format, f32 KV, or a missing GPU.
// - Semantics are those of backend.h. Activations between kernels are bf16 except the residual
//   stream and the logits (f32), so logits follow the CPU reference closely but not bit for bit.
//   (options.f32_activations keeps every activation in f32, as the CPU does: only sum orders differ.) Prefill of 16 or more tokens runs on the
//   tensor cores (prefill_runner.h) in chunks of the plan's prefill_chunk (clamped to 64..8192);
//   shorter prefills, and every prefill in the f32-activation mode, run the decode kernels over
//   blocks of up to 8 tokens of the lane (GDN token by token).
//   prefill_begin / prefill_advance (backend.h) slice a chunk that one tensor-core pass takes
//   (16 tokens up to that size, LogitsOut None or Last) by layers, with no host wait before its
//   last slice; other chunks run whole at prefill_begin. A decode step that names the
//   prefilling lane, or another prefill, throws while a chunk is sliced.
//   Decode of 1..8 lanes replays one CUDA graph per batch size (options.graphs; captured on first
//   use): per step the host writes 24 ints of step inputs and reads back the sampled ids.
//   Sampling happens on the GPU (kernels/sample.h: greedy, temperature, top_k of any size, top_p,
//   min_p, penalties, logit bias, the chosen logprob and up to 20 top logprobs); penalties read
//   per-lane token counts that the decode graph advances itself and logit bias a per-lane row
//   written once per request. Left to the host sampler (the lane's logits copied back): a
//   logit_bias list naming an id twice, and more than 20 top logprobs.
// - With plan.mtp (the weights must have the MTP head) has_mtp() is true and draft_mtp runs the
//   head on the GPU (core/cuda/mtp_head.h): the same drafts as the CPU head up to the activations'
//   rounding. Lane images carry the head as the CPU backend's do (the MtpKv section).
// - Speculation (backend.h): verify and accept_verified when plan.max_draft_tokens > 0: the lanes'
//   windows through the decode kernels in forwards of up to 8 rows, the GDN state after each
//   window position kept on the device (verify_window.h). verify_accept_greedy is one host
//   synchronisation a round: the windows, the greedy acceptance and the rollback it selects
//   (VerifyWindows::enqueue_accept), the MTP head's catch-up and next drafts placed by the kept
//   counts (MtpHead::enqueue_round) are enqueued together, and one wait brings the ids, kept
//   counts and drafts back (draft_mtp + verify_greedy waited twice, with host gaps between). The
//   host prepares everything first (checks, pages, every input in pinned memory), then the
//   round's device work replays one CUDA graph per shape (options.round_graphs: the lanes and
//   window sizes, the MTP head's blocks; tokens, positions and forced keeps are read from pinned
//   memory when it runs), captured on first use; beyond options.max_round_graphs shapes, or with a
//   catch-up row at a kept M-RoPE position, it launches eagerly, each forward through its verify
//   graph. Graph, eager and the separate calls give the same bits.
// - LaneImage layout is the CPU backend's (memory_plan.h): KV rows in the plan's dtype (kv_codec.h)
//   in layer, K/V, position, head order; GDN conv history as f32 (the GPU keeps it in bf16, so an image from the CPU
//   backend is rounded on restore; the f32-activation mode keeps f32) then the f32 recurrent state.
// - cuda_unavailable_reason() is "" when a usable GPU is present, else one line saying why (no
//   driver, no device, another architecture); it never aborts. cuda_free_bytes() is the free GPU
//   memory (for MemoryRequest.available_bytes with --kv-capacity auto).
// Thread safety: engine thread only.
#pragma once

#include "core/backend/backend.h"
#include "core/model/memory_plan.h"
#include "core/model/weights.h"
#include "ninfer/kernels/tuning.h"

#include <memory>
#include <string>

namespace ninfer::core {

struct CudaBackendOptions {
    bool graphs = true; // false: decode launches the kernels directly (tests compare both)
    // The check mode (cuda_runner.h): every activation the CPU reference keeps in f32 stays f32
    // (projections through a plain kernel, no tensor cores; f32 mixers): slow; it proves the runner
    // against the CPU reference to cosine 1e-4 where bf16 activations cannot.
    bool f32_activations = false;
    // The kernels' launch-time choices (kernels/tuning.h): make_cuda_backend installs them
    // (kernel_tuning_apply) before the weights upload; the backend keeps this copy. The last
    // backend made sets them for the process (the daemon makes one).
    kernels::KernelTuning tuning;
    // verify_accept_greedy's device work as one CUDA graph per shape, captured on first use, at
    // most max_round_graphs of them (later shapes run eagerly); false: always eagerly (tests and
    // bench compare both; set_cuda_round_graphs switches it later).
    bool round_graphs = true;
    size_t max_round_graphs = 128;
    // Whether the scheduler takes greedy rounds through verify_accept_greedy (the one-wait round
    // above; greedy_rounds_in_one_call). On by default since [cuda_round] and [cuda_speculative]
    // passed on an H100 (session 23: the same tokens and bits as the separate calls, and round
    // times within 1% of theirs). Off, greedy rounds go through draft_mtp, verify_greedy and
    // accept_verified (the A/B baseline): the environment's NINFER_CUDA_FUSED_ROUNDS=0 turns it
    // off in the loaders (cuda_backend_options_from_env); bench --speculative times every round
    // kind regardless.
    bool fused_rounds = true;
};

// The loaders' options (ninferd, ninferctl, bench_decode): the defaults, with the kernel switches
// of the environment read once (kernels/tuning.h). A bad or retired value throws
// ninfer::Error("cuda: NAME='value' ..."). *note: "" when every switch is at its default, else the
// one line for the loader to log.
CudaBackendOptions cuda_backend_options_from_env(std::string* note);

std::unique_ptr<Backend> make_cuda_backend(const ModelWeights& weights, const MemoryPlan& plan,
                                           const CudaBackendOptions& options = {});

// Switches a CUDA backend's round graphs (options.round_graphs) on or off; returns how many are
// captured so far. Throws ninfer::Error for another backend.
size_t set_cuda_round_graphs(Backend& backend, bool on);

// Test-only: the next round graph's capture fails as an instantiation out of device memory would
// (graph_cache.h): the round runs eagerly, no later round shape is captured, and
// graph_capture_failures() counts it. Throws ninfer::Error for another backend.
void cuda_fail_next_round_capture(Backend& backend);

std::string cuda_unavailable_reason();
uint64_t cuda_free_bytes();
// Device buffers the CUDA backend allocates besides the plan's KV pool and state (the tensor-core
// prefill's activations and weight scratch for request.prefill_chunk tokens): put it in
// MemoryRequest.backend_workspace_bytes before MemoryPlan::make.
uint64_t cuda_backend_workspace_bytes(const ModelConfig& config, const MemoryRequest& request);
// GPU memory a CUDA plan leaves free (CUDA context, graphs, fragmentation): max(1 GiB, 5%).
uint64_t cuda_default_margin(uint64_t available_bytes);

} // namespace ninfer::core
