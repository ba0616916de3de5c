// ninfer::core - decode one image or video into a VisionInput: plan, sample, resize, patchify, digest.
#include "core/media/media_decode.h"

#include "core/media/bicubic_resize.h"
#include "core/media/ffmpeg_api.h"
#include "core/media/media_reader.h"
#include "core/media/media_sniff.h"
#include "core/media/patchify.h"
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

// What one swscale pass does: source size and format to a destination size and format; for a
// YUV source converted to RGB, the frame's colour tags (-1: untagged, swscale's defaults stay).
struct SwsSetup {
    int w = 0, h = 0;
    AVPixelFormat fmt = AV_PIX_FMT_NONE;
    int dw = 0, dh = 0;
    AVPixelFormat dfmt = AV_PIX_FMT_NONE;
    int flags = 0;
    int colorspace = -1; // AVColorSpace of the source (its value is sws_getCoefficients' index)
    int full_range = -1; // 1: the source is tagged full range (JPEG), 0: limited (MPEG)
    bool operator==(const SwsSetup&) const = default;
};

// One swscale context, remade when the setup changes.
class SwsStage {
  public:
    explicit SwsStage(const FfmpegApi& av) : av_(av) {}
    ~SwsStage() {
        if (sws_) av_.sws_freeContext(sws_);
    }
    SwsStage(const SwsStage&) = delete;
    SwsStage& operator=(const SwsStage&) = delete;

    void run(const SwsSetup& s, const uint8_t* const src[], const int src_stride[], uint8_t* const dst[], const int dst_stride[]) {
        if (!sws_ || !(s == setup_)) {
            if (sws_) av_.sws_freeContext(sws_);
            sws_ = av_.sws_getContext(s.w, s.h, s.fmt, s.dw, s.dh, s.dfmt, s.flags, nullptr, nullptr, nullptr);
            if (!sws_) throw Error("media: cannot convert frames of pixel format " + std::to_string(int(s.fmt)));
            if (s.colorspace >= 0 || s.full_range >= 0) use_tags(s);
            setup_ = s;
        }
        if (av_.sws_scale(sws_, src, src_stride, 0, s.h, dst, dst_stride) != s.dh)
            throw Error("media: cannot convert a " + size_text(s.w, s.h) + " frame");
    }

  private:
    // The source's matrix and range instead of swscale's defaults (BT.601, the range its pixel
    // format implies), keeping the rest, as PyAV's reformat does when given a source colorspace.
    void use_tags(const SwsSetup& s) {
        int *inv_table = nullptr, *table = nullptr;
        int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
        if (av_.sws_getColorspaceDetails(sws_, &inv_table, &src_range, &table, &dst_range, &brightness, &contrast,
                                         &saturation) < 0)
            return; // not a YUV -> RGB pass: nothing to choose
        const int* coefficients = s.colorspace >= 0 ? av_.sws_getCoefficients(s.colorspace) : inv_table;
        if (s.full_range >= 0) src_range = s.full_range;
        if (av_.sws_setColorspaceDetails(sws_, coefficients, src_range, table, dst_range, brightness, contrast,
                                         saturation) < 0)
            throw Error("media: cannot set the colour matrix of frames of pixel format " + std::to_string(int(s.fmt)));
    }

    const FfmpegApi& av_;
    SwsContext* sws_ = nullptr;
    SwsSetup setup_;
};

// A picture as swscale takes it: format, size, up to four planes.
struct Picture {
    AVPixelFormat fmt = AV_PIX_FMT_NONE;
    int w = 0, h = 0;
    const uint8_t* data[4] = {nullptr, nullptr, nullptr, nullptr};
    int stride[4] = {0, 0, 0, 0};
};

// Converts decoded frames to RGB24 at the planned size in the reference processor's order
// (transformers decodes to RGB, composites alpha on white, then resizes the RGB image):
// 1. to RGB at the source size (an RGB24 or GBRP frame is used as it is):
//    - a video frame (without alpha) as transformers' video loaders get it from PyAV: swscale's
//      direct conversion to RGB24 at the same size with SWS_BILINEAR, its default chroma
//      handling, and the frame's colour tags: the matrix of its colorspace (BT.709 for a tagged
//      HD clip; untagged stays BT.601) and its range, as PyAV >= 14 (sws_scale_frame), torchcodec
//      and the ffmpeg CLI do. tests/oracle/compare_video_frames.py measures it: equal to PyAV to
//      the bit (docs/MEDIA.md); Debian's PyAV 10 ignores the tag (BT.601 for every clip).
//    - an image frame: planar GBR, chroma planes upsampled bilinearly (swscale's default siting:
//      centred). A JPEG's subsampled YCbCr (the yuvj formats) is first upsampled to 8-bit 4:4:4
//      and then converted, which is what libjpeg does for PIL ("fancy upsampling"). swscale's
//      direct 4:2:0 -> RGB24 path is several levels off PIL at colour edges, and resizing 4:2:0 in
//      one pass as many (2.8 mean, 35 max on the JPEG case).
//    - a format with alpha goes to RGBA and is composited on white.
// 2. resized to RGB24 by resize_bicubic_u8 (bicubic_resize.h): the integer bicubic PyTorch runs
//    for transformers' default (torchvision) processors, to the bit.
// It holds the frame at its source size (3 bytes a pixel, 4 with alpha, 6 for a JPEG) while
// converting; the extra pass costs about 4 ms a 720p video frame, 10 ms a 1080p JPEG (here).
class FrameScaler {
  public:
    FrameScaler(const FfmpegApi& av, ResizedSize size, VisionInput::Kind kind)
        : w_(int(size.width)), h_(int(size.height)), video_(kind == VisionInput::Kind::Video), av_(av), to_444_(av),
          to_rgb_(av) {}

    std::vector<uint8_t> convert(const AVFrame* f) {
        Picture p{AVPixelFormat(f->format), f->width, f->height};
        std::copy_n(f->data, 4, p.data), std::copy_n(f->linesize, 4, p.stride);
        if (p.fmt != AV_PIX_FMT_RGB24 && p.fmt != AV_PIX_FMT_GBRP) p = to_rgb(p, f);
        RgbView v = rgb24_view(p.data[0], p.w, p.h, p.stride[0]);
        if (p.fmt == AV_PIX_FMT_GBRP) // planes G, B, R
            v = {p.w, p.h, {p.data[2], p.data[0], p.data[1]}, 1, {p.stride[2], p.stride[0], p.stride[1]}};
        std::vector<uint8_t> out(size_t(w_) * size_t(h_) * 3);
        resize_bicubic_u8(v, w_, h_, out.data());
        return out;
    }

  private:
    // Same size in and out: bilinear only upsamples chroma; luma and RGB pass exactly.
    static constexpr int kSameSize = SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP;

    // Stage 1: p at its own size as GBRP or RGB24 (rgb_): RGB24 for video and where it had alpha.
    Picture to_rgb(Picture p, const AVFrame* f) {
        const AVPixFmtDescriptor* d = av_.av_pix_fmt_desc_get(p.fmt);
        const bool alpha = d && (d->flags & AV_PIX_FMT_FLAG_ALPHA);
        const size_t n = size_t(p.w) * size_t(p.h);
        if (video_ && !alpha) {
            rgb_.resize(3 * n);
            uint8_t* dst[4] = {rgb_.data(), nullptr, nullptr, nullptr};
            const int dst_stride[4] = {p.w * 3, 0, 0, 0};
            SwsSetup setup{p.w, p.h, p.fmt, p.w, p.h, AV_PIX_FMT_RGB24, SWS_BILINEAR};
            if (d && !(d->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL)) && d->nb_components >= 3)
                tag_colours(setup, f);
            to_rgb_.run(setup, p.data, p.stride, dst, dst_stride);
            return {AV_PIX_FMT_RGB24, p.w, p.h, {rgb_.data()}, {p.w * 3}};
        }
        if (p.fmt == AV_PIX_FMT_YUVJ420P || p.fmt == AV_PIX_FMT_YUVJ422P || p.fmt == AV_PIX_FMT_YUVJ440P ||
            p.fmt == AV_PIX_FMT_YUVJ411P)
            p = planar(p, AV_PIX_FMT_YUVJ444P, yuv_, n, to_444_);
        if (!alpha) return planar(p, AV_PIX_FMT_GBRP, rgb_, n, to_rgb_);
        rgb_.resize(4 * n);
        uint8_t* dst[4] = {rgb_.data(), nullptr, nullptr, nullptr};
        const int dst_stride[4] = {p.w * 4, 0, 0, 0};
        to_rgb_.run({p.w, p.h, p.fmt, p.w, p.h, AV_PIX_FMT_RGBA, kSameSize}, p.data, p.stride, dst, dst_stride);
        for (size_t i = 0; i < n; ++i) { // over white, in place: convert_to_rgb's alpha_composite, rounded
            const unsigned a = rgb_[4 * i + 3];
            for (size_t c = 0; c < 3; ++c) rgb_[3 * i + c] = uint8_t((rgb_[4 * i + c] * a + 255 * (255 - a) + 127) / 255);
        }
        return {AV_PIX_FMT_RGB24, p.w, p.h, {rgb_.data()}, {p.w * 3}};
    }

    // A YUV frame's colour tags for swscale: the matrix of a tagged colorspace (an untagged,
    // reserved or RGB-tagged frame keeps swscale's BT.601), the range where it is tagged.
    static void tag_colours(SwsSetup& setup, const AVFrame* f) {
        const int cs = int(f->colorspace);
        if (cs != AVCOL_SPC_RGB && cs != AVCOL_SPC_UNSPECIFIED && cs != AVCOL_SPC_RESERVED) setup.colorspace = cs;
        if (f->color_range == AVCOL_RANGE_JPEG) setup.full_range = 1;
        if (f->color_range == AVCOL_RANGE_MPEG) setup.full_range = 0;
    }

    // p converted at its size to the three-plane 8-bit format fmt, into buf.
    static Picture planar(const Picture& p, AVPixelFormat fmt, std::vector<uint8_t>& buf, size_t n, SwsStage& stage) {
        buf.resize(3 * n);
        Picture q{fmt, p.w, p.h, {buf.data(), buf.data() + n, buf.data() + 2 * n}, {p.w, p.w, p.w}};
        uint8_t* dst[4] = {buf.data(), buf.data() + n, buf.data() + 2 * n, nullptr};
        stage.run({p.w, p.h, p.fmt, p.w, p.h, fmt, kSameSize}, p.data, p.stride, dst, q.stride);
        return q;
    }

    int w_, h_;
    bool video_;
    const FfmpegApi& av_;
    SwsStage to_444_, to_rgb_;
    std::vector<uint8_t> yuv_, rgb_; // the frame at its source size: JPEG's YCbCr 4:4:4; GBR planes or RGB(A)
};

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
    PatchWriter writer(out, p, plan.size);
    FrameScaler scaler(ffmpeg_api(), plan.size, kind);
    std::vector<uint8_t> last;
    size_t next = 0;
    for (int64_t index = 0; next < plan.frame_indices.size(); ++index) {
        const AVFrame* f = reader.next_frame();
        if (!f) break;
        if (index != plan.frame_indices[next]) continue;
        last = scaler.convert(f);
        ++next;
        writer.add(last);
    }
    if (next == 0) throw Error("media: the " + reader.info().container + " file holds no decodable frame");
    // Frames the stream did not have (an estimated count), then the padding to whole temporal
    // patches: the last sampled frame again, as transformers' patchify pads.
    for (int64_t i = int64_t(next); i < n_frames; ++i) writer.add(last);
    out.digest = writer.finish();
    return out;
}

} // namespace ninfer::core
