// ninfer::ctl - a multimodal request's first token, timed stage by stage: preprocess, tower, prefill.
#include "ctl/bench_vision.h"

#include "ctl/model_session.h"

#include "core/engine/vision_prefill.h"
#include "core/frontend/chat_template.h"
#include "core/util/error.h"
#include "core/vision/cpu_vision_encoder.h"
#ifdef NINFER_HAVE_MEDIA
#include "core/media/ffmpeg_api.h"
#include "core/media/media_decode.h"
#include "core/media/media_plan.h"
#include "core/media/media_request.h"
#include "core/media/media_sniff.h"
#include "core/media/placeholders.h"
#include "core/util/regular_file.h"
#endif
#ifdef NINFER_HAVE_CUDA_BACKEND
#include "core/cuda/vision_tower_gpu.h"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

namespace ninfer::ctl {

bool parse_size(const std::string& text, int& w, int& h) {
    char tail = 0;
    return std::sscanf(text.c_str(), "%dx%d%c", &w, &h, &tail) == 2 && w > 0 && h > 0;
}

#ifdef NINFER_HAVE_MEDIA
namespace {

using Clock = std::chrono::steady_clock;
using Kind = core::VisionInput::Kind;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

StageTime summarise(const std::vector<double>& ms) {
    StageTime s;
    s.measured = true;
    s.best_ms = *std::min_element(ms.begin(), ms.end());
    for (double x : ms) s.mean_ms += x / double(ms.size());
    return s;
}

// The --image / --video item: random normalised patches of a frame of the tower's input size.
core::VisionInput synthetic_item(const core::VisionConfig& c, const VisionBenchArgs& a) {
    const bool video = a.video_seconds > 0;
    const int w = video ? a.frame_w : a.image_w, h = video ? a.frame_h : a.image_h;
    const int unit = int(c.patch_size * c.spatial_merge_size), T = int(c.temporal_patch_size);
    if (w <= 0 || h <= 0 || w % unit || h % unit)
        throw Error("bench: the size " + std::to_string(w) + "x" + std::to_string(h) + " must be positive multiples of " +
                    std::to_string(unit) + " px (the tower's input after the processor's resize)");
    core::VisionInput in;
    in.kind = video ? Kind::Video : Kind::Image;
    const int frames = video ? std::max(4, int(a.video_seconds * 2.0 + 0.5)) : 1; // 2 frames/s, at least 4
    in.grid_t = (frames + T - 1) / T;
    in.grid_h = h / int(c.patch_size);
    in.grid_w = w / int(c.patch_size);
    in.patch_size = int(c.patch_size);
    in.temporal_patch_size = T;
    in.merge_size = int(c.spatial_merge_size);
    if (video) { // a 2 fps source sampled at 2 fps: frame i at i / 2 s
        std::vector<int64_t> indices(static_cast<size_t>(frames));
        for (int i = 0; i < frames; ++i) indices[size_t(i)] = i;
        in.timestamps_s = core::pair_timestamps(indices, 2.0, T);
    }
    in.patches.resize(in.n_patches() * in.patch_dim());
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : in.patches) x = u(rng);
    return in;
}

// file:// URL of an absolute path (percent-escapes for everything but unreserved bytes and '/').
std::string file_url(const std::string& path) {
    std::string url = "file://";
    for (unsigned char ch : path) {
        if (std::isalnum(ch) || std::string_view("/-._~").find(char(ch)) != std::string_view::npos) {
            url += char(ch);
        } else {
            char esc[4];
            std::snprintf(esc, sizeof esc, "%%%02X", ch);
            url += esc;
        }
    }
    return url;
}

// Stage 1 for --media: the daemon's decode path, `repeat` times; the report's source facts.
core::VisionInput preprocess_media(const ModelSession& s, const VisionBenchArgs& a, VisionBenchReport& r) {
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::canonical(a.media_path, ec);
    if (ec) throw Error(Errc::NotFound, "bench: --media " + a.media_path + ": " + ec.message());
    const core::MediaConfig config = core::media_config_of(*s.artifact);
    core::MediaLimits limits; // the daemon's defaults, and its media-decode-threads as --decode-threads
    limits.decoder_threads = a.decode_threads;
    const std::string bytes = core::read_regular_file(path.string(), "bench: --media", limits.max_bytes);
    const std::span<const uint8_t> view(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const Kind kind = core::sniff_image(view) ? Kind::Image : Kind::Video;
    const core::MediaSource source{kind, file_url(path.string())};
    core::MediaPool pool(1);
    std::vector<double> ms;
    core::VisionInput item;
    try {
        const core::MediaPlan plan = core::plan_media(kind, view, config, limits); // headers only
        r.source_width = int(plan.source_width);
        r.source_height = int(plan.source_height);
        for (int i = 0; i < a.repeat; ++i) {
            const auto t0 = Clock::now();
            std::vector<core::VisionInput> items =
                core::decode_request_media({&source, 1}, config, limits, path.parent_path().string(), pool);
            ms.push_back(ms_since(t0));
            item = std::move(items.front());
        }
    } catch (const Error& e) {
        if (e.kind() != Errc::Unavailable) throw;
        throw Error(Errc::Unavailable, std::string(e.what()) + "; without FFmpeg, `ninferctl bench ARTIFACT --image WxH | "
                                                               "--video SECONDS` times the tower and the prefill");
    }
    r.preprocess = summarise(ms);
    r.source = a.media_path;
    return item;
}

// The request's prompt: one user message with the item and kPromptText, as ninferd renders it.
std::vector<int32_t> request_prompt(const ModelSession& s, const core::VisionInput& item) {
    core::ChatMessage m;
    m.role = core::ChatRole::User;
    m.content.push_back({item.kind == Kind::Image ? core::ContentPart::Kind::Image : core::ContentPart::Kind::Video, {}, {}});
    m.content.push_back(core::ContentPart::of_text(kPromptText));
    core::ChatConversation conversation;
    conversation.messages.push_back(std::move(m));
    const std::string text = core::render_chat_prompt(conversation, core::ChatRenderOptions{});
    return s.tokenizer->encode(core::expand_vision_placeholders(text, {&item, 1}));
}

std::unique_ptr<core::VisionEncoder> make_tower(const core::VisionWeights& weights, const VisionBenchArgs& a) {
    if (!a.gpu) return core::make_cpu_vision_encoder(weights, a.threads, -1, -1);
#ifdef NINFER_HAVE_CUDA_BACKEND
    return core::make_cuda_vision_encoder(weights, -1, -1, a.batch_patches);
#else
    throw Error("bench: --vision-device cuda needs a ninferctl built with CUDA (-DNINFER_CUDA=ON)");
#endif
}

} // namespace

VisionBenchReport measure_vision_bench(const std::string& path, const VisionBenchArgs& a) {
    std::unique_ptr<ModelSession> s = open_model_session(path);
    if (!s->weights.vision)
        throw Error("bench: " + path + " has no vision tower (convert with --components text,vision)");
    const auto image_id = s->tokenizer ? s->tokenizer->find_token("<|image_pad|>") : std::nullopt;
    const auto video_id = s->tokenizer ? s->tokenizer->find_token("<|video_pad|>") : std::nullopt;
    if (!image_id || !video_id)
        throw Error("bench: " + path + " carries no tokenizer with <|image_pad|> and <|video_pad|>");
    VisionBenchReport r;
    r.repeat = std::max(1, a.repeat);
    VisionBenchArgs args = a;
    args.repeat = r.repeat;
    std::vector<core::VisionInput> items;
    if (!a.media_path.empty()) {
        items.push_back(preprocess_media(*s, args, r));
    } else {
        items.push_back(synthetic_item(s->weights.vision->config, args));
        r.source = "synthetic";
        const std::string missing = core::ffmpeg_missing();
        r.preprocess_note = missing.empty() ? "synthetic patches; --media FILE decodes a real file" : "no FFmpeg: " + missing;
    }
    const core::VisionInput& item = items.front();
    r.kind = item.kind == Kind::Image ? "image" : "video";
    r.width = item.grid_w * item.patch_size;
    r.height = item.grid_h * item.patch_size;
    r.frames = item.kind == Kind::Image ? 1 : item.grid_t * item.temporal_patch_size;
    r.patches = item.n_patches();
    r.merged_tokens = item.merged_tokens();

    const std::vector<int32_t> prompt = request_prompt(*s, item);
    r.prompt_tokens = prompt.size();
    r.vision_tokens = size_t(std::count_if(prompt.begin(), prompt.end(),
                                           [&](int32_t t) { return t == *image_id || t == *video_id; }));
    // The GPU tower first: its weights and workspace are then taken when the backend's plan reads
    // the free device memory (ninferd counts cuda_vision_bytes in its plan: daemon/model_loader.cpp).
    std::unique_ptr<core::VisionEncoder> tower = make_tower(*s->weights.vision, args);
    tower->image_token_id = *image_id;
    tower->video_token_id = *video_id;
    BackendOptions options;
    options.device = a.device;
    options.max_context = uint32_t(prompt.size() + 1);
    options.prefill_chunk = a.prefill_chunk;
    start_backend(*s, options);
    r.tower_device = a.gpu ? "cuda" : "cpu";
    r.prefill_device = s->backend->name();
    r.threads = a.threads ? a.threads : std::max(1u, std::thread::hardware_concurrency());

    const size_t chunk = s->plan.prefill_chunk;
    std::vector<float> logits;
    std::vector<double> tower_ms, prefill_ms;
    const bool warm_up = a.gpu || r.prefill_device == "cuda";
    for (int i = warm_up ? -1 : 0; i < r.repeat; ++i) {
        const core::VisionPrefill vision = core::prepare_vision_prefill(prompt, items, *tower, 0);
        s->backend->reset_lane(0);
        const auto t0 = Clock::now();
        for (size_t at = 0; at < prompt.size(); at += chunk) {
            const size_t n = std::min(chunk, prompt.size() - at);
            const bool last = at + n == prompt.size();
            s->backend->prefill_with(0, std::span(prompt).subspan(at, n), vision.chunk(at, n),
                                     last ? core::LogitsOut::Last : core::LogitsOut::None, last ? &logits : nullptr);
        }
        const double prefill = ms_since(t0);
        if (i < 0) continue; // the untimed warm-up
        tower_ms.push_back(vision.tower_ms);
        prefill_ms.push_back(prefill);
    }
    if (logits.empty()) throw Error("bench: the prefill left no logits");
    r.tower = summarise(tower_ms);
    r.prefill = summarise(prefill_ms);
    for (StageTime* st : {&r.preprocess, &r.tower, &r.prefill}) {
        if (!st->measured) continue;
        r.ttft_best_ms += st->best_ms;
        r.ttft_mean_ms += st->mean_ms;
    }
    for (StageTime* st : {&r.preprocess, &r.tower, &r.prefill})
        if (st->measured) st->share_pct = 100.0 * st->best_ms / r.ttft_best_ms;
    return r;
}
#else
VisionBenchReport measure_vision_bench(const std::string&, const VisionBenchArgs&) {
    throw Error("bench: this ninferctl was built without FFmpeg's headers, which the multimodal prompt needs "
                "(core/media; install libavformat-dev, libswscale-dev and rebuild)");
}
#endif

int run_vision_bench(const std::string& artifact, const VisionBenchArgs& args) {
    const VisionBenchReport r = measure_vision_bench(artifact, args);
    std::fputs((args.json ? vision_bench_json(r) : vision_bench_text(r)).c_str(), stdout);
    return 0;
}

} // namespace ninfer::ctl
