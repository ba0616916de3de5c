// ninfer::ctl - the vision tower's time (CPU or GPU) for an image or a video of a given size.
#include "ctl/bench_vision.h"

#include "core/artifact/artifact.h"
#include "core/convert/synthetic.h"
#include "core/cpu/thread_pool.h"
#include "core/model/vision_weights.h"
#include "core/model/weights.h"
#include "core/util/error.h"
#include "core/vision/cpu_vision_encoder.h"
#include "core/vision/vision_tower.h"
#ifdef NINFER_HAVE_CUDA_BACKEND
#include "core/cuda/vision_tower_gpu.h"
#endif

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <random>

namespace ninfer::ctl {

bool parse_size(const std::string& text, int& w, int& h) {
    return std::sscanf(text.c_str(), "%dx%d", &w, &h) == 2 && w > 0 && h > 0;
}

int run_vision_bench(const std::string& path, const VisionBenchArgs& a) {
    auto artifact = core::Artifact::open(path);
    core::warn_if_synthetic(*artifact);
    const core::ModelWeights weights = core::ModelWeights::from_artifact(*artifact);
    if (!weights.vision)
        throw Error("bench: " + path + " has no vision tower (convert with --components vision)");
    const core::VisionConfig& c = weights.vision->config;
    const bool video = a.video_seconds > 0;
    const int w = video ? a.frame_w : a.image_w, h = video ? a.frame_h : a.image_h;
    const int unit = int(c.patch_size * c.spatial_merge_size);
    if (w <= 0 || h <= 0 || w % unit || h % unit)
        throw Error("bench: the size " + std::to_string(w) + "x" + std::to_string(h) + " must be positive multiples of " +
                    std::to_string(unit) + " px (the tower's input after the processor's resize)");
    core::VisionInput in;
    in.kind = video ? core::VisionInput::Kind::Video : core::VisionInput::Kind::Image;
    const int frames = video ? std::max(4, int(a.video_seconds * 2.0 + 0.5)) : 1; // 2 frames/s, at least 4
    in.grid_t = (frames + int(c.temporal_patch_size) - 1) / int(c.temporal_patch_size);
    in.grid_h = h / int(c.patch_size);
    in.grid_w = w / int(c.patch_size);
    in.patch_size = int(c.patch_size);
    in.temporal_patch_size = int(c.temporal_patch_size);
    in.merge_size = int(c.spatial_merge_size);
    in.patches.resize(in.n_patches() * in.patch_dim());
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : in.patches)
        x = u(rng);

    core::ThreadPool pool(a.threads);
    std::unique_ptr<core::VisionEncoder> tower;
    if (a.gpu) {
#ifdef NINFER_HAVE_CUDA_BACKEND
        tower = core::make_cuda_vision_encoder(*weights.vision, -1, -1);
        tower->encode(in); // warm-up: kernel loading, the GEMMs' tensor maps
#else
        throw Error("bench: --vision-device cuda needs a ninferctl built with CUDA (-DNINFER_CUDA=ON)");
#endif
    } else {
        tower = core::make_cpu_vision_encoder(*weights.vision, a.threads, -1, -1);
    }
    double best = 1e30, total = 0;
    for (int i = 0; i < a.repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<float> rows = tower->encode(in);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, s);
        total += s;
    }
    const size_t batch_rows = std::max(core::VisionTower::kMaxBatchRows, size_t(in.grid_h) * in.grid_w);
    double workspace_mib = double(core::VisionTower::workspace_bytes(c, batch_rows)) / (1 << 20);
#ifdef NINFER_HAVE_CUDA_BACKEND
    if (a.gpu) workspace_mib = double(core::cuda_vision_bytes(c)) / (1 << 20); // weights and one batch
#endif
    const std::string where = a.gpu ? "GPU" : "CPU, " + std::to_string(pool.size()) + " threads";
    if (a.json)
        std::printf("{\"kind\":\"%s\",\"width\":%d,\"height\":%d,\"frames\":%d,\"patches\":%zu,\"merged_tokens\":%zu,"
                    "\"device\":\"%s\",\"threads\":%u,\"workspace_mib\":%.1f,\"best_s\":%.4f,\"mean_s\":%.4f}\n",
                    video ? "video" : "image", w, h, frames, in.n_patches(), in.merged_tokens(), a.gpu ? "cuda" : "cpu",
                    pool.size(), workspace_mib, best, total / a.repeat);
    else
        std::printf("vision tower (%s): %s %dx%d%s, %zu patches, %zu merged tokens, %s %.1f MiB; "
                    "best %.3f s, mean %.3f s over %d runs\n",
                    where.c_str(), video ? "video" : "image", w, h,
                    video ? (", " + std::to_string(frames) + " frames").c_str() : "", in.n_patches(), in.merged_tokens(),
                    a.gpu ? "device memory" : "workspace", workspace_mib, best, total / a.repeat, a.repeat);
    return 0;
}

} // namespace ninfer::ctl
