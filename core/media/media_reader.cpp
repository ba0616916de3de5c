// ninfer::core - FFmpeg demuxing and decoding of one in-memory media file, with its checks.
#include "core/media/media_reader.h"

#include "core/media/ffmpeg_api.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <vector>

namespace ninfer::core {
namespace {

// Demuxers FFmpeg may pick (av_match_list matches any name of a demuxer's comma list).
constexpr const char* kFormats = "png_pipe,jpeg_pipe,webp_pipe,gif,gif_pipe,mov,mp4,matroska,webm";
constexpr AVCodecID kCodecs[] = {AV_CODEC_ID_PNG,  AV_CODEC_ID_MJPEG, AV_CODEC_ID_WEBP, AV_CODEC_ID_GIF,
                                 AV_CODEC_ID_H264, AV_CODEC_ID_HEVC,  AV_CODEC_ID_VP8,  AV_CODEC_ID_VP9,
                                 AV_CODEC_ID_AV1,  AV_CODEC_ID_MPEG4};
constexpr int kIoBufferBytes = 64 << 10;

struct MemorySource {
    std::span<const uint8_t> bytes;
    size_t pos = 0;
};

int read_cb(void* opaque, uint8_t* buf, int n) {
    auto* s = static_cast<MemorySource*>(opaque);
    if (s->pos >= s->bytes.size()) return AVERROR_EOF;
    const size_t take = std::min(size_t(n), s->bytes.size() - s->pos);
    std::memcpy(buf, s->bytes.data() + s->pos, take);
    s->pos += take;
    return int(take);
}

int64_t seek_cb(void* opaque, int64_t offset, int whence) {
    auto* s = static_cast<MemorySource*>(opaque);
    const int64_t size = int64_t(s->bytes.size());
    if (whence & AVSEEK_SIZE) return size;
    int64_t base = 0;
    switch (whence & ~AVSEEK_FORCE) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = int64_t(s->pos); break;
    case SEEK_END: base = size; break;
    default: return AVERROR(EINVAL);
    }
    if (offset > size - base || offset < -base) return AVERROR(EINVAL);
    s->pos = size_t(base + offset);
    return int64_t(s->pos);
}

std::string av_error(const FfmpegApi& av, int err) {
    char buf[128] = {};
    av.av_strerror(err, buf, sizeof buf);
    return buf;
}

double seconds(int64_t value, AVRational base) { return double(value) * double(base.num) / double(base.den); }

} // namespace

struct MediaReader::Impl {
    const FfmpegApi& av = ffmpeg_api();
    MemorySource source;
    MediaInfo info;
    AVIOContext* io = nullptr;
    AVFormatContext* format = nullptr;
    AVCodecContext* codec = nullptr;
    AVPacket* packet = nullptr;
    AVFrame* frame = nullptr;
    int stream = -1;
    bool flushing = false, done = false;
    // decode_only: the stream's packets read ahead (fed before av_read_frame's), every
    // packet's pts in presentation order, and the pts of the frames the caller takes.
    std::deque<AVPacket*> ahead;
    bool read_all = false, skipping = false;
    std::vector<int64_t> order, wanted;
    int64_t returned = 0, index = -1;

    ~Impl() {
        for (AVPacket*& p : ahead) av.av_packet_free(&p);
        if (frame) av.av_frame_free(&frame);
        if (packet) av.av_packet_free(&packet);
        if (codec) av.avcodec_free_context(&codec);
        if (format) av.avformat_close_input(&format); // frees the context; the AVIOContext is ours
        if (io) {
            av.av_free(io->buffer);
            av.avio_context_free(&io);
        }
    }

    void open(const MediaLimits& limits);
    bool demux(AVPacket* p);         // the file's next packet of our stream, false at the end
    bool read_packet(AVPacket*& p); // the same after the packets read ahead
    void read_ahead(std::span<const int64_t> frame_indices);
    void index_frame();
    void check_stream(const MediaLimits& limits);
    void open_decoder(const MediaLimits& limits);
};

void MediaReader::Impl::open(const MediaLimits& limits) {
    auto* buffer = static_cast<unsigned char*>(av.av_malloc(kIoBufferBytes));
    if (!buffer) throw Error(Errc::NoSpace, "media: out of memory");
    io = av.avio_alloc_context(buffer, kIoBufferBytes, 0, &source, read_cb, nullptr, seek_cb);
    if (!io) {
        av.av_free(buffer);
        throw Error(Errc::NoSpace, "media: out of memory");
    }
    format = av.avformat_alloc_context();
    if (!format) throw Error(Errc::NoSpace, "media: out of memory");
    format->pb = io;
    format->flags |= AVFMT_FLAG_CUSTOM_IO;
    format->max_streams = 16;
    const size_t n = std::strlen(kFormats) + 1;
    format->format_whitelist = static_cast<char*>(av.av_malloc(n)); // freed by avformat_close_input
    if (!format->format_whitelist) throw Error(Errc::NoSpace, "media: out of memory");
    std::memcpy(format->format_whitelist, kFormats, n);
    int err = av.avformat_open_input(&format, nullptr, nullptr, nullptr);
    if (err < 0) {
        format = nullptr; // avformat_open_input frees it on failure
        throw Error("media: not a supported image or video (PNG, JPEG, WebP, GIF, MP4, WebM, MKV): " + av_error(av, err));
    }
    info.container = format->iformat ? format->iformat->name : "";
    // Stream-info probing may decode a few frames; every stream's decoder gets the pixel bound.
    std::vector<AVDictionary*> options(format->nb_streams, nullptr);
    const std::string max_pixels = std::to_string(std::min<int64_t>(limits.max_source_pixels, INT32_MAX));
    for (AVDictionary*& d : options) av.av_dict_set(&d, "max_pixels", max_pixels.c_str(), 0);
    err = av.avformat_find_stream_info(format, options.empty() ? nullptr : options.data());
    for (AVDictionary*& d : options) av.av_dict_free(&d);
    if (err < 0) throw Error("media: cannot read the " + info.container + " headers: " + av_error(av, err));
    check_stream(limits);
    open_decoder(limits);
}

void MediaReader::Impl::check_stream(const MediaLimits& limits) {
    stream = av.av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (stream < 0) throw Error("media: the " + info.container + " file holds no image or video stream");
    const AVStream* s = format->streams[stream];
    const AVCodecParameters* par = s->codecpar;
    if (std::find(std::begin(kCodecs), std::end(kCodecs), par->codec_id) == std::end(kCodecs))
        throw Error("media: the video codec (FFmpeg id " + std::to_string(int(par->codec_id)) + ") is not supported");
    info.width = par->width;
    info.height = par->height;
    if (info.width <= 0 || info.height <= 0) throw Error("media: cannot read the picture size from the " + info.container + " headers");
    if (info.width * info.height > limits.max_source_pixels)
        throw Error("media: a " + std::to_string(info.width) + "x" + std::to_string(info.height) + " picture exceeds this server's " +
                    std::to_string(limits.max_source_pixels) + " pixels (ninferd --media-max-pixels)");
    const AVRational rate = s->avg_frame_rate.num > 0 && s->avg_frame_rate.den > 0 ? s->avg_frame_rate : s->r_frame_rate;
    if (rate.num > 0 && rate.den > 0) info.fps = double(rate.num) / double(rate.den);
    if (s->duration > 0 && s->time_base.den > 0) info.duration_s = seconds(s->duration, s->time_base);
    else if (format->duration > 0) info.duration_s = double(format->duration) / AV_TIME_BASE;
    if (!(info.duration_s <= limits.max_video_seconds))
        throw Error("media: the video lasts " + std::to_string(int64_t(info.duration_s)) + " s; this server takes at most " +
                    std::to_string(int64_t(limits.max_video_seconds)) + " s (ninferd --media-max-video-seconds)");
    if (!(info.fps > 0 && info.fps <= 1000)) info.fps = 24;
    info.frames = s->nb_frames > 0 ? s->nb_frames : int64_t(std::llround(info.duration_s * info.fps));
    info.frames = std::max<int64_t>(info.frames, 1);
}

void MediaReader::Impl::open_decoder(const MediaLimits& limits) {
    const AVCodecParameters* par = format->streams[stream]->codecpar;
    const AVCodec* decoder = av.avcodec_find_decoder(par->codec_id);
    if (!decoder) throw Error("media: this FFmpeg has no decoder for the stream's codec (id " + std::to_string(int(par->codec_id)) + ")");
    info.codec = decoder->name;
    codec = av.avcodec_alloc_context3(decoder);
    packet = av.av_packet_alloc();
    frame = av.av_frame_alloc();
    if (!codec || !packet || !frame) throw Error(Errc::NoSpace, "media: out of memory");
    int err = av.avcodec_parameters_to_context(codec, par);
    if (err < 0) throw Error("media: bad codec parameters: " + av_error(av, err));
    codec->max_pixels = std::min<int64_t>(limits.max_source_pixels, INT32_MAX);
    // Images: one thread (one frame; items decode in parallel on the media pool). Videos: frame
    // threads, whose output equals one thread's frame for frame.
    codec->thread_count = format->streams[stream]->nb_frames == 1 ? 1 : std::clamp(limits.decoder_threads, 1, 64);
    codec->thread_type = FF_THREAD_FRAME;
    codec->err_recognition |= AV_EF_EXPLODE; // a damaged file is refused, not concealed
    err = av.avcodec_open2(codec, decoder, nullptr);
    if (err < 0) throw Error("media: cannot open the " + info.codec + " decoder: " + av_error(av, err));
}

MediaReader::MediaReader(std::span<const uint8_t> bytes, const MediaLimits& limits) : impl_(std::make_unique<Impl>()) {
    impl_->source.bytes = bytes;
    impl_->open(limits);
}

MediaReader::~MediaReader() = default;

const MediaInfo& MediaReader::info() const { return impl_->info; }

int64_t MediaReader::frame_index() const { return impl_->index; }

void MediaReader::decode_only(std::span<const int64_t> frame_indices) {
    Impl& m = *impl_;
    if (m.returned > 0 || m.skipping || !m.ahead.empty()) throw Error("media: internal error: decode_only after decoding began");
    m.read_ahead(frame_indices);
}

// Reads every packet of the stream ahead when skipping is exact, and turns skipping on:
// - H.264 only: a picture whose nal_ref_idc is 0 is, by the standard, never used to predict
//   another, and FFmpeg's AVDISCARD_NONREF drops it before it touches the decoder's state (the
//   check precedes h264_field_start). (HEVC's "sub-layer non-reference" pictures may still be
//   referenced by higher temporal layers, so HEVC decodes every frame.)
// - MP4/MOV, progressive: one packet is one frame (a field-coded stream may split a frame into
//   two packets), so a frame's presentation index is the rank of its packet's pts.
// - every packet has a distinct pts and no discard flag (an edit list dropping frames would
//   make the decoder's output count differ from the packet count).
// Otherwise every frame is decoded as before (the packets read stay queued, in order).
void MediaReader::Impl::read_ahead(std::span<const int64_t> frame_indices) {
    const AVCodecParameters* par = format->streams[stream]->codecpar;
    if (par->codec_id != AV_CODEC_ID_H264 || par->field_order != AV_FIELD_PROGRESSIVE ||
        info.container.find("mp4") == std::string::npos)
        return;
    bool exact = true;
    for (;;) {
        AVPacket* p = av.av_packet_alloc();
        if (!p) throw Error(Errc::NoSpace, "media: out of memory");
        if (!demux(p)) {
            av.av_packet_free(&p);
            break;
        }
        ahead.push_back(p);
        exact = exact && p->pts != AV_NOPTS_VALUE && !(p->flags & (AV_PKT_FLAG_DISCARD | AV_PKT_FLAG_CORRUPT));
        if (exact) order.push_back(p->pts);
    }
    read_all = true;
    std::sort(order.begin(), order.end());
    if (!exact || order.empty() || std::adjacent_find(order.begin(), order.end()) != order.end()) return;
    for (int64_t i : frame_indices)
        if (i >= 0 && i < int64_t(order.size())) wanted.push_back(order[size_t(i)]);
    std::sort(wanted.begin(), wanted.end());
    skipping = true;
}

// The next packet of our stream into p, the packets read ahead first (av_read_frame's errors end
// the stream, as before).
bool MediaReader::Impl::read_packet(AVPacket*& p) {
    if (!ahead.empty()) {
        av.av_packet_free(&p);
        p = ahead.front();
        ahead.pop_front();
        return true;
    }
    return !read_all && demux(p);
}

bool MediaReader::Impl::demux(AVPacket* p) {
    for (;;) {
        if (av.av_read_frame(format, p) < 0) return false;
        if (p->stream_index == stream) return true;
        av.av_packet_unref(p);
    }
}

// The presentation index of the frame just decoded: counted, or when skipping, its pts's rank
// (-1 where the pts is not one of the packets', or not after the previous frame's).
void MediaReader::Impl::index_frame() {
    if (!skipping) {
        index = returned++;
        return;
    }
    ++returned;
    const auto at = std::lower_bound(order.begin(), order.end(), frame->pts);
    const int64_t rank = at != order.end() && *at == frame->pts ? int64_t(at - order.begin()) : -1;
    index = rank > index ? rank : -1;
}

const AVFrame* MediaReader::next_frame() {
    Impl& m = *impl_;
    while (!m.done) {
        int err = m.av.avcodec_receive_frame(m.codec, m.frame);
        if (err == 0) {
            m.index_frame();
            return m.frame;
        }
        if (err == AVERROR_EOF) break;
        if (err != AVERROR(EAGAIN)) throw Error("media: cannot decode the " + m.info.codec + " data: " + av_error(m.av, err));
        if (m.flushing) break;
        // Feed the next packet of our stream (or flush at the end of the file). Skipping, a
        // packet whose frame is not wanted may be dropped by the decoder if nothing references it.
        if (!m.read_packet(m.packet)) {
            m.flushing = true;
            m.av.avcodec_send_packet(m.codec, nullptr);
            continue;
        }
        if (m.skipping)
            m.codec->skip_frame = std::binary_search(m.wanted.begin(), m.wanted.end(), m.packet->pts) ? AVDISCARD_DEFAULT
                                                                                                       : AVDISCARD_NONREF;
        err = m.av.avcodec_send_packet(m.codec, m.packet);
        m.av.av_packet_unref(m.packet);
        if (err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_INVALIDDATA)
            throw Error("media: cannot decode the " + m.info.codec + " data: " + av_error(m.av, err));
    }
    m.done = true;
    return nullptr;
}

} // namespace ninfer::core
