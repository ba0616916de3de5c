// ninfer::daemon - model start-up: artifact validation, memory plan, backend construction.
#include "daemon/model_loader.h"

#include "core/artifact/checksums.h"
#include "core/cpu/cpu_backend.h"
#ifdef NINFER_HAVE_CUDA_BACKEND
#include "core/cuda/cuda_backend.h"
#include "core/cuda/vision_tower_gpu.h"
#endif
#include "core/engine/generation.h"
#include "core/engine/script_backend.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"
#include "core/vision/cpu_vision_encoder.h"
#include "core/vision/vision_tower.h"
#include "daemon/log.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

namespace ninfer::daemon {
namespace {

core::KvDtype kv_dtype_of(const std::string& name) {
    if (name == "fp8") return core::KvDtype::Fp8;
    if (name == "int8") return core::KvDtype::Int8;
    return core::KvDtype::Bf16;
}

std::string unescape(std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '\\' || i + 1 == text.size()) {
            out += text[i];
            continue;
        }
        char c = text[++i];
        out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    }
    return out;
}

#ifdef NINFER_HAVE_CUDA_BACKEND
// --device cuda, or auto on a CUDA build with a usable GPU.
bool wants_cuda(const std::string& device) {
    return device == "cuda" || (device == "auto" && core::cuda_unavailable_reason().empty());
}
#endif

// --verify-artifact: fail closed, since the operator asked for the check.
void verify_artifact_payload(const core::Artifact& artifact) {
    core::PayloadVerifyResult v = core::verify_payload_checksums(artifact, std::max(1u, std::thread::hardware_concurrency()));
    if (!v.has_checksums)
        throw Error("artifact: --verify-artifact: " + artifact.path() +
                    " records no payload checksums (metadata.payload_crc32c): nothing to verify; convert or "
                    "upgrade it with this ninferctl, or start without --verify-artifact");
    char line[160];
    std::snprintf(line, sizeof line, "artifact, payload verified: %llu objects, %.1f MiB, every CRC-32C matches in %.2f s",
                  (unsigned long long)v.n_objects, double(v.n_bytes) / (1 << 20), v.seconds);
    log_info(line);
}

} // namespace

std::string resolve_speculative(const std::string& setting, const std::string& device, bool has_mtp_head) {
    if (setting != "auto") return setting;
    return device == "cuda" && has_mtp_head ? kAutoSpeculative : "off";
}

std::string resolved_device(const std::string& device) {
    if (device.rfind("script:", 0) == 0) return "script";
#ifdef NINFER_HAVE_CUDA_BACKEND
    if (wants_cuda(device)) return "cuda";
#endif
    return "cpu";
}

std::string vision_device_of(const DaemonConfig& config) {
    const bool cuda_backend = resolved_device(config.device) == "cuda";
    if (config.vision_device == "cuda" && !cuda_backend)
        throw Error("config: --vision-device cuda runs the vision tower on the GPU beside the CUDA backend; the backend "
                    "here is " + resolved_device(config.device) + " (use --device cuda, or --vision-device cpu)");
    return config.vision_device == "cuda" || (config.vision_device == "auto" && cuda_backend) ? "cuda" : "cpu";
}

std::string device_choice_line(const std::string& device, bool& fallback) {
    fallback = false;
    const std::string chosen = resolved_device(device);
    if (device != "auto") return "device " + chosen + " (--device " + device + ")";
#ifdef NINFER_HAVE_CUDA_BACKEND
    if (chosen == "cuda") return "--device auto: cuda, a usable GPU was found";
    fallback = true;
    return "--device auto: cpu, no usable GPU: " + core::cuda_unavailable_reason();
#else
    return "--device auto: cpu, this ninferd was built without the CUDA backend";
#endif
}

PlannedModel plan_model(const DaemonConfig& config) {
    PlannedModel m;
    m.artifact = core::Artifact::open(config.artifact_path);
    if (config.verify_artifact) verify_artifact_payload(*m.artifact);
    m.weights = std::make_unique<core::ModelWeights>(core::ModelWeights::from_artifact(*m.artifact));
    core::MemoryRequest request;
    request.max_context = config.max_context;
    request.kv_capacity_tokens = config.kv_capacity_tokens;
    request.max_concurrency = config.max_concurrency;
    request.kv_dtype = kv_dtype_of(config.kv_dtype);
    request.prefill_chunk = config.prefill_chunk;
    const std::string device = resolved_device(config.device);
    m.speculative = resolve_speculative(config.speculative, device, m.weights->mtp.has_value());
    if (config.speculative == "auto")
        m.speculative_choice = "speculative auto: " + m.speculative +
                               (m.speculative != "off" ? " (the artifact has an MTP head; CUDA backend)"
                                : device != "cuda"     ? " (the " + device + " backend: --speculative mtp:K or ngram:K turns it on)"
                                                       : std::string(" (the artifact has no MTP head: ngram:K needs none)"));
    const core::SpeculativeConfig speculative = core::parse_speculative(m.speculative);
    if (speculative.on()) {
        if (device == "script")
            throw Error("config: speculative " + m.speculative + " needs draft and verify steps, which the "
                        "script backend does not have (the CPU and CUDA backends run them): use --speculative off");
        if (speculative.kind == core::SpeculativeKind::Mtp && !m.weights->mtp)
            throw Error("config: speculative " + m.speculative + " needs the artifact's MTP head, and " +
                        config.artifact_path + " has none (convert it with the mtp component, or use ngram:K)");
        request.max_draft_tokens = uint32_t(speculative.k);
        request.mtp = speculative.kind == core::SpeculativeKind::Mtp;
    }
    if (m.weights->vision) vision_device_of(config); // --vision-device cuda without the CUDA backend fails here
    request.weight_bytes = m.weights->stored_bytes();
    request.available_bytes = core::host_available_bytes();
    request.margin_bytes = core::host_default_margin(request.available_bytes);
    if (m.weights->vision && device == "cpu") // the CPU tower's activations (load_backend)
        request.backend_workspace_bytes += core::VisionTower::host_bytes(m.weights->vision->config);
#ifdef NINFER_HAVE_CUDA_BACKEND
    if (wants_cuda(config.device)) { // the KV pool and state live in GPU memory
        if (const std::string why = core::cuda_unavailable_reason(); !why.empty())
            throw Error("backend: --device cuda is unavailable: " + why);
        request.available_bytes = core::cuda_free_bytes();
        request.margin_bytes = core::cuda_default_margin(request.available_bytes);
        request.backend_workspace_bytes = core::cuda_backend_workspace_bytes(m.weights->config, request);
        if (m.weights->vision && vision_device_of(config) == "cuda") // the GPU tower's weights and one batch
            request.backend_workspace_bytes +=
                core::cuda_vision_bytes(m.weights->vision->config, size_t(config.vision_batch_patches));
    }
#endif
    if (config.max_context == 0) {
        core::ContextChoice choice = core::plan_max_context_auto(m.weights->config, request);
        m.plan = std::move(choice.plan);
        m.max_context_choice = std::move(choice.reason);
    } else {
        m.plan = core::MemoryPlan::make(m.weights->config, request);
    }
    m.model_id = config.model_id;
    if (m.model_id.empty()) m.model_id = m.artifact->metadata_name();
    if (m.model_id.empty()) m.model_id = std::filesystem::path(config.artifact_path).stem().string();
    return m;
}

std::vector<std::vector<int32_t>> read_script_file(const std::string& path, const core::Tokenizer& tokenizer) {
    std::istringstream in(core::read_regular_file(path, "backend: script file"));
    std::vector<std::vector<int32_t>> scripts;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        if (line.rfind("text:", 0) == 0) {
            std::string text = unescape(std::string_view(line).substr(line[5] == ' ' ? 6 : 5));
            scripts.push_back(tokenizer.encode(text));
            continue;
        }
        std::istringstream ids(line.rfind("ids:", 0) == 0 ? line.substr(4) : line);
        std::vector<int32_t> script;
        int64_t id = 0;
        while (ids >> id) script.push_back(int32_t(id));
        if (!ids.eof()) throw Error("backend: script file " + path + ": bad line '" + line + "'");
        if (!script.empty()) scripts.push_back(std::move(script));
    }
    if (scripts.empty()) throw Error("backend: script file " + path + " holds no script");
    return scripts;
}

std::unique_ptr<core::Backend> load_backend(const DaemonConfig& config, PlannedModel& model,
                                            const ModelFrontend& frontend) {
    if (config.device.rfind("script:", 0) == 0) {
        auto scripts = read_script_file(config.device.substr(7), frontend.tokenizer());
        return std::make_unique<core::ScriptBackend>(
            std::move(scripts), model.plan.n_lanes, model.weights->config.vocab_size, model.plan.max_context,
            core::ScriptLaneLayout{model.plan.kv_bytes_per_token, model.plan.lane_image_gdn_bytes()});
    }
    // The tower runs where --vision-device says (the CUDA backend takes either tower's rows through
    // prefill_with); on the CPU it shares the cores with the backend (they take turns on the engine
    // thread). Without the placeholder tokens in the tokenizer no prompt can hold media, so there
    // is no tower then.
    const auto image = frontend.tokenizer().find_token("<|image_pad|>");
    const auto video = frontend.tokenizer().find_token("<|video_pad|>");
    if (model.weights->vision && image && video) {
#ifdef NINFER_HAVE_CUDA_BACKEND
        if (vision_device_of(config) == "cuda")
            model.vision = core::make_cuda_vision_encoder(*model.weights->vision, *image, *video,
                                                          size_t(config.vision_batch_patches));
#endif
        if (!model.vision)
            model.vision = core::make_cpu_vision_encoder(*model.weights->vision, unsigned(config.threads), *image, *video);
    }
#ifdef NINFER_HAVE_CUDA_BACKEND
    if (wants_cuda(config.device)) {
        std::string note;
        const core::CudaBackendOptions options = core::cuda_backend_options_from_env(&note);
        if (!note.empty()) log_info(note);
        return core::make_cuda_backend(*model.weights, model.plan, options);
    }
#endif
    if (config.device == "cuda") throw Error("backend: this ninferd was built without the CUDA backend");
    core::CpuBackendOptions options;
    options.threads = unsigned(config.threads);
    return core::make_cpu_backend(*model.weights, model.plan, options);
}

} // namespace ninfer::daemon
