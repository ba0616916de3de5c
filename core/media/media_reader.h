// ninfer::core - one media file in memory opened with FFmpeg: its video stream's facts, then
// its frames one at a time (the part of decoding that touches FFmpeg).
//
// Contract:
// - MediaReader(bytes, limits) opens the bytes through a read-only in-memory AVIOContext (no
//   file or network protocol is reachable), lets FFmpeg probe only the demuxers we take (PNG,
//   JPEG, WebP, GIF pipes; MP4/MOV; Matroska/WebM), picks the best video stream and checks it:
//   a codec we decode (PNG, MJPEG, WebP, GIF, H.264, HEVC, VP8, VP9, AV1, MPEG-4), a frame of at
//   most limits.max_source_pixels (the decoders get the same bound as max_pixels, so no frame
//   buffer beyond it is ever allocated) and a duration within limits.max_video_seconds.
//   Throws Error("media: ...") with what is wrong: not a supported image or video, no video
//   stream, codec X is not supported, W x H exceeds the limit, duration exceeds the limit; or
//   Errc::Unavailable when FFmpeg cannot be loaded (ffmpeg_api.h).
// - info() gives what the headers say. frames is the stream's frame count, or duration x fps
//   when the container does not store it (WebM, Matroska); fps is the average frame rate (24
//   when unknown, as transformers assumes).
// - next_frame() decodes the next frame in presentation order and returns it (valid until the
//   next call), or nullptr at the end of the stream. A decoding error throws Error("media: cannot
//   decode ...").
// - decode_only(frame_indices), before the first next_frame: the caller will use only the frames
//   of these presentation indices (sorted). Where that is exact (H.264 in MP4/MOV, progressive,
//   every packet with its own pts: media_reader.cpp says why), the reader reads the stream's
//   packets ahead (holding them: at most the file's size) and lets the decoder skip each frame
//   that is not wanted and that no other frame references (AVDISCARD_NONREF), so next_frame
//   then returns the wanted frames, bit for bit as when every frame is decoded, and only some
//   others. Elsewhere it changes nothing.
// - frame_index(): the presentation index of the frame next_frame() last returned (its count
//   from 0; when skipping, the rank of its pts among the packets'), or -1 when skipping and the
//   frame's pts is not a packet's or not after the previous frame's: the caller must then
//   decode again without decode_only.
// - `bytes` must outlive the reader. Not copyable; the destructor frees every FFmpeg object.
// Thread safety: one reader per thread; different readers may run at once.
#pragma once

#include "core/media/media_config.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

struct AVFrame;

namespace ninfer::core {

struct MediaInfo {
    std::string container; // FFmpeg's demuxer name ("png_pipe", "mov,mp4,m4a,3gp,3g2,mj2", ...)
    std::string codec;     // FFmpeg's codec name
    int64_t width = 0;
    int64_t height = 0;
    int64_t frames = 0;
    double fps = 24;
    double duration_s = 0;
};

class MediaReader {
  public:
    MediaReader(std::span<const uint8_t> bytes, const MediaLimits& limits);
    ~MediaReader();
    MediaReader(const MediaReader&) = delete;
    MediaReader& operator=(const MediaReader&) = delete;

    const MediaInfo& info() const;
    const AVFrame* next_frame();
    void decode_only(std::span<const int64_t> frame_indices);
    int64_t frame_index() const;

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::core
