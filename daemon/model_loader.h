// ninfer::daemon - start-up steps for the model: validate + plan (before listening), then build
// the backend (on the engine thread).
//
// Contract:
// - plan_model(config) opens and validates the artifact, parses its text config, binds the
//   weights (shape checks, no decoding) and makes the MemoryPlan for the configured lanes, context,
//   KV capacity and dtype against the host's available memory. A plan that does not fit throws
//   ninfer::Error naming the deficit in bytes; ninferd then refuses to start. max-context auto
//   (config.max_context 0) takes core::plan_max_context_auto's choice: plan.max_context, with the
//   reason in max_context_choice (empty for a fixed max-context).
//   With --verify-artifact it first checks every payload object's CRC-32C (all cores; logs the
//   figures): a mismatch, or an artifact that records no checksums, throws and start-up fails.
// - load_backend(config, model) builds the backend the device option names: "cpu" (or "auto"
//   without CUDA) -> the CPU reference backend; "script:FILE" -> the test-only ScriptBackend,
//   whose FILE holds one script per line: token ids ("ids: 1 2 3" or bare numbers) or text
//   ("text: ..." with \n, \t and \\ escapes, tokenized with the model's tokenizer); '#' comments.
//   "cuda" in a build without CUDA throws. When the artifact has a vision tower (and the tokenizer
//   its placeholder tokens) it also makes model.vision: the GPU tower with --vision-device cuda (or
//   auto on the CUDA backend; plan_model counts its weights and batch in the GPU plan), else the
//   CPU tower, which serves either backend.
// - --speculative: plan_model resolves auto (resolve_speculative: mtp:3 on the CUDA backend for an
//   artifact with an MTP head, else off) into PlannedModel::speculative, plans the verify window
//   (max_draft_tokens) and, for mtp:K, the MTP head's KV; it refuses (ninfer::Error "config:
//   speculative ...") a value other than off on the script backend, and mtp:K on an artifact
//   without an MTP head. The caller serves the resolved value (config.speculative).
// - The PlannedModel must outlive the backend (weights point into the artifact's mapping).
#pragma once

#include "core/artifact/artifact.h"
#include "core/backend/backend.h"
#include "core/model/memory_plan.h"
#include "core/model/weights.h"
#include "daemon/config_load.h"
#include "core/backend/vision_encoder.h"
#include "daemon/model_frontend.h"

#include <memory>
#include <string>

namespace ninfer::daemon {

struct PlannedModel {
    std::unique_ptr<core::Artifact> artifact;
    std::unique_ptr<core::ModelWeights> weights;
    core::MemoryPlan plan;
    std::string model_id; // --model-id, else the artifact's name, else the file name
    // The CPU vision tower, made by load_backend when the artifact has one and the backend takes
    // image and video rows (the CPU backend); null otherwise.
    std::unique_ptr<core::VisionEncoder> vision;
    std::string max_context_choice; // --max-context auto: the choice and its figures, for the log
    std::string speculative;        // --speculative resolved (auto -> mtp:3 or off): what is served
    std::string speculative_choice; // --speculative auto: the choice and why, for the log (else empty)
};

// --speculative auto's choice: kAutoSpeculative on the CUDA backend ("cuda", resolved_device) for an
// artifact with an MTP head, else "off" (the CPU backend's verify costs about K + 1 steps, so it only
// pays with drafts that are nearly all accepted). Any other setting is returned as it is.
// Why mtp:3: kernels/PERF_NOTES.md session 20, "Speculative rounds at K = 1..5": at the reference
// engine's 73-89% acceptance, K = 3 is within 2% of the best K on the 27B and the best on the
// 35B-A3B; with a head that accepts nothing the acceptance gate holds the loss to a few percent
// (session 22's serving runs).
inline constexpr const char* kAutoSpeculative = "mtp:3";
std::string resolve_speculative(const std::string& setting, const std::string& device, bool has_mtp_head);

PlannedModel plan_model(const DaemonConfig& config);
std::unique_ptr<core::Backend> load_backend(const DaemonConfig& config, PlannedModel& model,
                                            const ModelFrontend& frontend);
// The backend load_backend builds for --device: "cpu", "cuda" or "script" (auto resolved).
std::string resolved_device(const std::string& device);
// Where the vision tower runs for --vision-device: "cuda" (cuda, or auto with the CUDA backend) or
// "cpu"; ninfer::Error("config: ...") for cuda without the CUDA backend.
std::string vision_device_of(const DaemonConfig& config);
// One log line for the start: the backend chosen and why ("--device auto: cpu, no usable GPU:
// <reason>"); `fallback` is set when --device auto fell back to the CPU in a CUDA build.
std::string device_choice_line(const std::string& device, bool& fallback);
std::vector<std::vector<int32_t>> read_script_file(const std::string& path, const core::Tokenizer& tokenizer);

} // namespace ninfer::daemon
