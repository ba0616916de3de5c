// ninfer::ctl - artifact -> weights -> memory plan -> backend for the one-shot tools.
#include "ctl/model_session.h"

#include "core/convert/synthetic.h"
#include "core/cpu/cpu_backend.h"
#ifdef NINFER_HAVE_CUDA_BACKEND
#include "core/cuda/cuda_backend.h"
#endif
#include "core/engine/vision_prefill.h"
#include "core/util/error.h"
#include "core/vision/cpu_vision_encoder.h"

#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace ninfer::ctl {

namespace {

} // namespace

uint64_t parse_count(const char* option, const char* text) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (!*text || *end || text[0] == '-')
        throw Error(std::string(option) + ": not a non-negative integer: '" + text + "'");
    return v;
}

std::unique_ptr<ModelSession> open_model_session(const std::string& path) {
    const auto t0 = std::chrono::steady_clock::now();
    auto s = std::make_unique<ModelSession>();
    s->artifact = core::Artifact::open(path);
    core::warn_if_synthetic(*s->artifact);
    s->weights = core::ModelWeights::from_artifact(*s->artifact);
    if (const core::ArtifactResource* tok = s->artifact->resource("text", "tokenizer.json")) {
        const core::ArtifactResource* cfg = s->artifact->resource("text", "tokenizer_config.json");
        s->tokenizer = core::Tokenizer::from_json(tok->text(), cfg ? cfg->text() : std::string_view());
    }
    if (const core::ArtifactResource* gen = s->artifact->resource("text", "generation_config.json"))
        s->generation = core::parse_generation_config(gen->text());
    s->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
}

std::string check_device(const std::string& requested) {
    // "" (the default) means cpu.
    const std::string device = requested.empty() ? "cpu" : requested;
#ifdef NINFER_HAVE_CUDA_BACKEND
    if (device == "cuda") {
        if (const std::string why = core::cuda_unavailable_reason(); !why.empty())
            throw Error("--device cuda is unavailable: " + why + "; use --device cpu");
        return device;
    }
#else
    if (device == "cuda")
        throw Error("--device cuda is unavailable: this ninferctl has no CUDA backend; use --device cpu");
#endif
    if (device != "cpu")
        throw Error("--device " + device + ": unknown device (cpu or cuda)");
    return device;
}

void start_backend(ModelSession& s, const BackendOptions& o) {
    const std::string device = check_device(o.device);
    const core::ModelConfig& c = s.weights.config;
    core::MemoryRequest req;
    req.max_context = o.max_context;
    if (c.max_position_embeddings && (req.max_context == 0 || req.max_context > c.max_position_embeddings))
        req.max_context = c.max_position_embeddings;
    req.max_concurrency = 1;
    req.kv_dtype = o.kv_dtype;
    req.prefill_chunk = o.prefill_chunk;
    req.max_draft_tokens = o.max_draft_tokens;
    req.mtp = o.mtp;
    // Weights are mmapped from the artifact: they count against RAM like any other allocation.
    req.weight_bytes = s.weights.stored_bytes();
    req.available_bytes = core::host_available_bytes();
    req.margin_bytes = core::host_default_margin(req.available_bytes);
#ifdef NINFER_HAVE_CUDA_BACKEND
    if (device == "cuda") { // KV pool and GDN state in GPU memory
        req.available_bytes = core::cuda_free_bytes();
        req.margin_bytes = core::cuda_default_margin(req.available_bytes);
        req.backend_workspace_bytes = core::cuda_backend_workspace_bytes(c, req);
        s.plan = core::MemoryPlan::make(c, req);
        std::string note;
        const core::CudaBackendOptions options = core::cuda_backend_options_from_env(&note);
        if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
        s.backend = core::make_cuda_backend(s.weights, s.plan, options);
    }
#endif
    if (!s.backend) {
        s.plan = core::MemoryPlan::make(c, req);
        s.backend = core::make_cpu_backend(s.weights, s.plan);
    }
    // The CPU tower serves either backend (prefill_with takes its rows).
    const auto image = s.tokenizer ? s.tokenizer->find_token("<|image_pad|>") : std::nullopt;
    const auto video = s.tokenizer ? s.tokenizer->find_token("<|video_pad|>") : std::nullopt;
    if (s.weights.vision && image && video)
        s.vision = core::make_cpu_vision_encoder(*s.weights.vision, 0, *image, *video);
    std::fprintf(stderr, "loaded %s in %.2f s on %s: %s\n", s.artifact->path().c_str(), s.load_seconds,
                 device.c_str(), s.plan.describe().c_str());
}

void prefill_prompt(ModelSession& s, std::span<const int32_t> prompt, std::span<const core::VisionInput> media) {
    std::optional<core::VisionPrefill> vision;
    if (!media.empty()) {
        if (!s.vision)
            throw Error("run: images and video need an artifact with a vision tower (and its placeholder tokens)");
        vision = core::prepare_vision_prefill(prompt, media, *s.vision, 0);
        std::fprintf(stderr, "vision: %zu item(s) through the tower in %.3f s\n", vision->n_items_encoded,
                     vision->tower_ms / 1e3);
    }
    const size_t chunk = s.plan.prefill_chunk;
    for (size_t at = 0; at < prompt.size(); at += chunk) {
        const size_t n = std::min(chunk, prompt.size() - at);
        const core::LogitsOut out = at + n == prompt.size() ? core::LogitsOut::Last : core::LogitsOut::None;
        if (vision)
            s.backend->prefill_with(0, prompt.subspan(at, n), vision->chunk(at, n), out, nullptr);
        else
            s.backend->prefill(0, prompt.subspan(at, n), out, nullptr);
    }
}

} // namespace ninfer::ctl
