// ninfer::core - one decoded frame (AVFrame) -> RGB24 at the planned size, as transformers' processors get it.
//
// Contract:
// - FrameScaler(av, size, kind) converts frames of one item; convert(frame) returns the frame
//   converted to RGB at its own size and resized with resize_bicubic_u8 to size (width x height
//   x 3 bytes, row-major). The steps, and why each is the reference processor's, are in the
//   comment on the class in frame_scaler.cpp and in docs/MEDIA.md. Throws Error("media: ...")
//   where swscale cannot convert the frame's pixel format.
// - It holds one source-size buffer (3 bytes a pixel, 4 with alpha, 6 for a JPEG) between calls.
// Thread safety: one object per thread; objects on different threads may run at once.
#pragma once

#include "core/media/bicubic_resize.h"
#include "core/media/ffmpeg_api.h"
#include "core/media/media_plan.h"
#include "core/vision/vision_input.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace ninfer::core {

class FrameScaler {
  public:
    FrameScaler(const FfmpegApi& av, ResizedSize size, VisionInput::Kind kind);
    ~FrameScaler();
    FrameScaler(const FrameScaler&) = delete;
    FrameScaler& operator=(const FrameScaler&) = delete;

    std::vector<uint8_t> convert(const AVFrame* frame);

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::core
