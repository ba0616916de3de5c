// ninfer::ctl - load an artifact onto a backend for the one-shot tools (run, perplexity).
//
// Contract:
// - open_model_session opens and checks the artifact (warning on stderr if its weights are
//   synthetic), binds the text weights and loads the tokenizer; start_backend then plans memory
//   (one lane, the given max context clamped to the model's, auto KV capacity from the host's
//   available memory minus a margin; refused with the deficit) and creates the backend. device "cpu" (or "" = cpu); "cuda" plans
//   against free GPU memory and creates the CUDA backend in a CUDA build, and otherwise (no GPU,
//   no driver, or a CPU-only build) throws ninfer::Error saying why it is unavailable.
// - The tokenizer is loaded from the artifact's tokenizer.json (+ tokenizer_config.json) when the
//   artifact carries one; generation defaults (stop ids and every sampling value it has) come from
//   its generation_config.json when present (core/backend/generation_config.h).
#pragma once

#include "core/artifact/artifact.h"
#include "core/backend/backend.h"
#include "core/backend/generation_config.h"
#include "core/backend/vision_encoder.h"
#include "core/frontend/tokenizer.h"
#include "core/model/memory_plan.h"
#include "core/model/weights.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ninfer::ctl {

struct BackendOptions {
    std::string device; // "", "cpu" or "cuda"
    core::KvDtype kv_dtype = core::KvDtype::Bf16;
    uint32_t max_context = 0; // 0 = the model's max positions; clamped to them
    uint32_t prefill_chunk = 256;
    uint32_t max_draft_tokens = 0; // speculation: verify windows of K + 1 tokens (MemoryRequest)
    bool mtp = false;              // plan the MTP head's KV (the weights must have the head)
};

struct ModelSession {
    std::unique_ptr<core::Artifact> artifact;
    core::ModelWeights weights;
    core::MemoryPlan plan;
    std::unique_ptr<core::Backend> backend;
    std::unique_ptr<core::Tokenizer> tokenizer; // null when the artifact has none
    core::GenerationConfig generation; // the artifact's generation_config.json (stop ids, sampling)
    // The CPU vision tower (for either backend): set by start_backend when the artifact has one
    // and the tokenizer has <|image_pad|> / <|video_pad|>; null otherwise.
    std::unique_ptr<core::VisionEncoder> vision;
    double load_seconds = 0;
};

std::unique_ptr<ModelSession> open_model_session(const std::string& artifact_path);
void start_backend(ModelSession& session, const BackendOptions& options);
// Prefills lane 0 with the prompt in plan.prefill_chunk chunks, the last one leaving its logits.
// With media (images and video in prompt order), the tower runs first and the chunks go through
// prefill_with (core/engine/vision_prefill.h); its time is printed to stderr. ninfer::Error when
// the session has no tower or the placeholders and media do not pair up.
void prefill_prompt(ModelSession& session, std::span<const int32_t> prompt,
                    std::span<const core::VisionInput> media);
// The device a request names ("" = default), or ninfer::Error if this build cannot use it.
std::string check_device(const std::string& requested);

// Parses a non-negative integer option value; throws ninfer::Error("OPTION: ...").
uint64_t parse_count(const char* option, const char* text);

} // namespace ninfer::ctl
