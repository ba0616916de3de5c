// ninfer::core - a decoded frame to RGB at the planned size: swscale at the source size, then the bicubic resize.
#include "core/media/frame_scaler.h"

#include "core/util/error.h"

#include <algorithm>
#include <string>

namespace ninfer::core {
namespace {

std::string size_text(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

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
class ScalerSteps {
  public:
    ScalerSteps(const FfmpegApi& av, ResizedSize size, VisionInput::Kind kind)
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

} // namespace

struct FrameScaler::Impl : ScalerSteps {
    using ScalerSteps::ScalerSteps;
};

FrameScaler::FrameScaler(const FfmpegApi& av, ResizedSize size, VisionInput::Kind kind)
    : impl_(std::make_unique<Impl>(av, size, kind)) {}
FrameScaler::~FrameScaler() = default;

std::vector<uint8_t> FrameScaler::convert(const AVFrame* frame) { return impl_->convert(frame); }

} // namespace ninfer::core
