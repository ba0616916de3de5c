// ninfer::core - decode one image or video into a VisionInput: plan, sample, resize, patchify, digest.
#include "core/media/media_decode.h"

#include "core/media/ffmpeg_api.h"
#include "core/media/media_reader.h"
#include "core/media/media_sniff.h"
#include "core/media/patchify.h"
#include "core/media/resize_workers.h"
#include "core/media/sha256.h"
#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core {
namespace {

using Kind = VisionInput::Kind;

std::string size_text(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

void check_source_pixels(int64_t w, int64_t h, const MediaLimits& limits) {
    if (w * h > limits.max_source_pixels)
        throw Error("media: a " + size_text(w, h) + " picture exceeds this server's " + std::to_string(limits.max_source_pixels) +
                    " pixels (ninferd --media-max-pixels)");
}

// The header check every image meets before FFmpeg sees its bytes.
void sniff_checked(Kind kind, std::span<const uint8_t> bytes, const MediaLimits& limits) {
    std::optional<SniffedImage> s = sniff_image(bytes);
    if (!s) {
        if (kind == Kind::Image) throw Error("media: the image is not a PNG, JPEG, WebP or GIF file");
        return;
    }
    if (s->width <= 0 || s->height <= 0) throw Error("media: the " + s->format + " header says " + size_text(s->width, s->height));
    check_source_pixels(s->width, s->height, limits);
}

MediaPlan plan_from(Kind kind, const MediaInfo& info, const MediaConfig& config, const MediaLimits& limits) {
    MediaPlan plan;
    plan.kind = kind;
    plan.source_width = info.width;
    plan.source_height = info.height;
    if (kind == Kind::Image) {
        plan.size = smart_resize_image(info.height, info.width, config.image);
        plan.frame_indices = {0};
        plan.merged_tokens = merged_tokens_of(1, plan.size, config.image);
        return plan;
    }
    const MediaPreprocess& v = config.video;
    plan.source_fps = info.fps;
    plan.frame_indices = sample_frame_indices(info.frames, info.fps, v.fps, v.min_frames, std::min(v.max_frames, limits.max_frames));
    const int64_t n = std::max<int64_t>(int64_t(plan.frame_indices.size()), v.temporal_patch_size);
    plan.size = smart_resize_video(n, info.height, info.width, v);
    plan.merged_tokens = merged_tokens_of(n, plan.size, v);
    return plan;
}

void put_i32(Sha256& h, int64_t v) {
    const uint32_t u = uint32_t(v);
    const uint8_t b[4] = {uint8_t(u), uint8_t(u >> 8), uint8_t(u >> 16), uint8_t(u >> 24)};
    h.update(b, 4);
}

// Collects resized frames T at a time and patchifies each group into the output.
class PatchWriter {
  public:
    PatchWriter(VisionInput& out, const MediaPreprocess& p, ResizedSize size) : out_(out), p_(p), size_(size) {
        digest_.update("ninfer-media-v1", 15);
        for (int64_t v : {int64_t(out.kind), int64_t(out.grid_t), int64_t(out.grid_h), int64_t(out.grid_w),
                          int64_t(p.patch_size), int64_t(p.temporal_patch_size), int64_t(p.merge_size)})
            put_i32(digest_, v);
        out_.patches.assign(out_.n_patches() * out_.patch_dim(), 0.0f);
    }
    void add(std::vector<uint8_t> frame) {
        digest_.update(frame.data(), frame.size());
        group_.push_back(std::move(frame));
        if (group_.size() < size_t(p_.temporal_patch_size)) return;
        std::vector<const uint8_t*> ptrs;
        for (const auto& f : group_) ptrs.push_back(f.data());
        patchify_frames(ptrs, size_.height, size_.width, t_++, p_, out_.patches);
        group_.clear();
    }
    int64_t groups_done() const { return t_; }
    std::array<uint8_t, 32> finish() { return digest_.finish(); }

  private:
    VisionInput& out_;
    const MediaPreprocess& p_;
    ResizedSize size_;
    Sha256 digest_;
    std::vector<std::vector<uint8_t>> group_;
    int64_t t_ = 0;
};

// Decodes the planned frames from reader into out (its geometry set): converted and resized on
// as many worker threads as the decoder has frame threads, while this thread decodes and
// patchifies the resized frames in order. False when the reader skipped frames and a frame's
// index came out wrong (MediaReader::frame_index): the caller decodes again without skipping.
bool decode_frames(MediaReader& reader, const MediaPlan& plan, const MediaPreprocess& p, const MediaLimits& limits,
                   VisionInput& out) {
    const int64_t T = p.temporal_patch_size;
    const int64_t n_frames = int64_t(out.grid_t) * T;
    PatchWriter writer(out, p, plan.size);
    const int workers = out.kind == Kind::Image ? 0 : std::clamp(limits.decoder_threads, 1, 64);
    ResizeWorkers resize(ffmpeg_api(), plan.size, out.kind, plan.frame_indices.size(), workers);
    std::vector<uint8_t> last;
    auto add_next = [&](bool wait) { // the next resized frame into the patches, if it is ready
        std::optional<std::vector<uint8_t>> frame = resize.take(wait);
        if (frame) last = std::move(*frame), writer.add(last);
        return frame.has_value();
    };
    size_t next = 0;
    while (next < plan.frame_indices.size()) {
        const AVFrame* f = reader.next_frame();
        if (!f) break;
        const int64_t index = reader.frame_index();
        if (index < 0 || index > plan.frame_indices[next]) return false;
        if (index < plan.frame_indices[next]) continue;
        while (resize.in_flight() >= resize.max_in_flight()) add_next(true);
        resize.push(f);
        ++next;
        while (add_next(false)) {}
    }
    while (add_next(true)) {}
    if (next == 0) throw Error("media: the " + reader.info().container + " file holds no decodable frame");
    // Frames the stream did not have (an estimated count), then the padding to whole temporal
    // patches: the last sampled frame again, as transformers' patchify pads.
    for (int64_t i = int64_t(next); i < n_frames; ++i) writer.add(last);
    out.digest = writer.finish();
    return true;
}

} // namespace

MediaPlan plan_media(Kind kind, std::span<const uint8_t> bytes, const MediaConfig& config, const MediaLimits& limits) {
    sniff_checked(kind, bytes, limits);
    MediaReader reader(bytes, limits);
    return plan_from(kind, reader.info(), config, limits);
}

VisionInput decode_media(Kind kind, std::span<const uint8_t> bytes, const MediaConfig& config, const MediaLimits& limits) {
    sniff_checked(kind, bytes, limits);
    MediaReader reader(bytes, limits);
    const MediaPlan plan = plan_from(kind, reader.info(), config, limits);
    if (plan.merged_tokens > limits.max_vision_tokens)
        throw Error("media: the " + std::string(kind == Kind::Image ? "image" : "video") + " would take " +
                    std::to_string(plan.merged_tokens) + " vision tokens; this server takes at most " +
                    std::to_string(limits.max_vision_tokens) + " a request (ninferd --media-max-vision-tokens)");
    const MediaPreprocess& p = kind == Kind::Image ? config.image : config.video;
    const int64_t T = p.temporal_patch_size;
    const int64_t n_frames = kind == Kind::Image ? T : (int64_t(plan.frame_indices.size()) + T - 1) / T * T;
    VisionInput out;
    out.kind = kind;
    out.patch_size = p.patch_size;
    out.temporal_patch_size = p.temporal_patch_size;
    out.merge_size = p.merge_size;
    out.grid_t = int(n_frames / T);
    out.grid_h = int(plan.size.height / p.patch_size);
    out.grid_w = int(plan.size.width / p.patch_size);
    if (kind == Kind::Video) out.timestamps_s = pair_timestamps(plan.frame_indices, plan.source_fps, int(T));
    if (kind == Kind::Video && limits.skip_unsampled_frames) reader.decode_only(plan.frame_indices);
    if (!decode_frames(reader, plan, p, limits, out)) { // a frame's timestamp was not what skipping needs
        MediaReader every_frame(bytes, limits);
        if (!decode_frames(every_frame, plan, p, limits, out)) throw Error("media: internal error: frames out of order");
    }
    return out;
}

} // namespace ninfer::core
