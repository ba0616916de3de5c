// ninfer::core - smart_resize, frame sampling and timestamps as transformers computes them.
#include "core/media/media_plan.h"

#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ninfer::core {
namespace {

// Python's round() and numpy's round(): half to even (the default FE_TONEAREST of nearbyint).
int64_t round_half_even(double x) { return int64_t(std::nearbyint(x)); }

void check_aspect(int64_t h, int64_t w) {
    if (h <= 0 || w <= 0) throw Error("media: the picture is " + std::to_string(w) + "x" + std::to_string(h) + " pixels");
    if (double(std::max(h, w)) / double(std::min(h, w)) > 200)
        throw Error("media: the aspect ratio of a " + std::to_string(w) + "x" + std::to_string(h) +
                    " picture is above 200:1");
}

// The shared tail of both smart_resize functions; `n` scales the products (t' for video, 1 for images)
// and `frames` the beta (frames for video, 1 for images).
ResizedSize fit(int64_t h, int64_t w, int64_t f, int64_t n, int64_t frames, int64_t min_px, int64_t max_px) {
    int64_t hb = round_half_even(double(h) / double(f)) * f;
    int64_t wb = round_half_even(double(w) / double(f)) * f;
    if (n * hb * wb > max_px) {
        double beta = std::sqrt(double(frames) * double(h) * double(w) / double(max_px));
        hb = std::max(f, int64_t(std::floor(double(h) / beta / double(f))) * f);
        wb = std::max(f, int64_t(std::floor(double(w) / beta / double(f))) * f);
    } else if (n * hb * wb < min_px) {
        double beta = std::sqrt(double(min_px) / (double(frames) * double(h) * double(w)));
        hb = int64_t(std::ceil(double(h) * beta / double(f))) * f;
        wb = int64_t(std::ceil(double(w) * beta / double(f))) * f;
    }
    return {hb, wb};
}

} // namespace

ResizedSize smart_resize_image(int64_t height, int64_t width, const MediaPreprocess& p) {
    check_aspect(height, width);
    return fit(height, width, p.factor(), 1, 1, p.min_pixels, p.max_pixels);
}

ResizedSize smart_resize_video(int64_t frames, int64_t height, int64_t width, const MediaPreprocess& p) {
    const int64_t f = p.factor();
    if (height <= 0 || width <= 0) check_aspect(height, width);
    if (height < f || width < f) {
        double scale = std::max(double(f) / double(height), double(f) / double(width));
        height = int64_t(double(height) * scale);
        width = int64_t(double(width) * scale);
    }
    check_aspect(height, width);
    int64_t max_px = p.max_pixels;
    if (p.cap_pixels_per_frame) {
        int64_t per_frame = std::max(std::min<int64_t>(768 * f * f, p.max_pixels / frames), int64_t(double(p.min_pixels) * 1.05));
        max_px = per_frame * frames;
    }
    const int64_t t = p.temporal_patch_size;
    const int64_t tb = round_half_even(double(frames) / double(t)) * t;
    return fit(height, width, f, tb, frames, p.min_pixels, max_px);
}

std::vector<int64_t> sample_frame_indices(int64_t total, double source_fps, double fps, int min_frames, int max_frames) {
    if (total <= 0) throw Error("media: the video has no frames");
    int64_t n = int64_t(double(total) / source_fps * fps);
    n = std::min<int64_t>({std::max<int64_t>(n, min_frames), max_frames, total});
    n = std::max<int64_t>(n, 1);
    std::vector<int64_t> idx(size_t(n), 0);
    if (n == 1) return idx;
    const double step = double(total - 1) / double(n - 1);
    for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = round_half_even(double(i) * step);
    idx.back() = total - 1; // numpy's linspace sets the endpoint exactly
    return idx;
}

std::vector<double> pair_timestamps(std::vector<int64_t> indices, double source_fps, int temporal) {
    while (!indices.empty() && indices.size() % size_t(temporal) != 0) indices.push_back(indices.back());
    std::vector<double> out;
    for (size_t i = 0; i < indices.size(); i += size_t(temporal))
        out.push_back((double(indices[i]) / source_fps + double(indices[i + size_t(temporal) - 1]) / source_fps) / 2);
    return out;
}

int64_t merged_tokens_of(int64_t frames, ResizedSize size, const MediaPreprocess& p) {
    const int64_t t = p.temporal_patch_size, f = p.factor();
    return (frames + t - 1) / t * (size.height / f) * (size.width / f);
}

} // namespace ninfer::core
