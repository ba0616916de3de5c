// ninfer::core - sampled video frames converted and resized on worker threads while the caller
// keeps decoding; the results come back in the order the frames went in.
//
// Contract:
// - ResizeWorkers(av, size, kind, n_frames, n_workers) converts up to n_frames frames with
//   FrameScaler (frame_scaler.h). n_workers == 0 converts each frame inside push(), on the
//   caller's thread (an image: one frame); otherwise n_workers threads, each with its own
//   FrameScaler, take frames in push order.
// - push(frame) takes a new reference to the decoded frame (av_frame_clone: no pixel copy for the
//   decoders' reference-counted frames), so the caller's decoder may go on at once. At most
//   max_in_flight() frames are pushed and not yet taken; push throws Error if the caller pushes
//   past that or past n_frames (a bug), or Errc::NoSpace when the reference cannot be made.
// - take(wait) returns the next frame in push order, resized (size.width x size.height x 3 bytes):
//   nullopt when it is not ready and !wait, or when every pushed frame was taken. A worker's
//   exception (a frame swscale cannot convert) is rethrown by the next take.
// - Bit for bit the frames of one FrameScaler converting them one after another: each frame's
//   conversion depends only on that frame (swscale contexts are remade per setup, the resize is
//   pure).
// - The destructor stops the workers, joins them and frees the frames not yet converted.
// Thread safety: push and take from one thread (the decoding one).
#pragma once

#include "core/media/frame_scaler.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace ninfer::core {

class ResizeWorkers {
  public:
    ResizeWorkers(const FfmpegApi& av, ResizedSize size, VisionInput::Kind kind, size_t n_frames, int n_workers);
    ~ResizeWorkers();
    ResizeWorkers(const ResizeWorkers&) = delete;
    ResizeWorkers& operator=(const ResizeWorkers&) = delete;

    void push(const AVFrame* frame);
    std::optional<std::vector<uint8_t>> take(bool wait);
    size_t in_flight() const { return pushed_ - taken_; }
    size_t max_in_flight() const { return max_in_flight_; }

    struct Shared;

  private:
    const FfmpegApi& av_;
    size_t pushed_ = 0, taken_ = 0, max_in_flight_ = 1;
    std::unique_ptr<FrameScaler> inline_scaler_; // n_workers == 0
    std::unique_ptr<Shared> shared_;
};

} // namespace ninfer::core
