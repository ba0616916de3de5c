// ninfer::core - the bicubic resize of transformers' default image and video processors, to the bit.
//
// transformers 5's Qwen2-VL-family processors (the torchvision backend, their default; video has
// no other) resize the decoded uint8 RGB frame with torchvision's resize(BICUBIC, antialias=True),
// which hands a uint8 tensor on the CPU to PyTorch's native uint8 kernel (torch >= 2.1,
// `_upsample_bicubic2d_aa`; a port of Pillow's ImagingResample). That kernel is what this computes:
// - separable: a horizontal pass (only when the width changes) into an 8-bit image, then a
//   vertical pass (only when the height changes); same size in and out is a copy;
// - per axis of in -> out pixels: scale = in/out, support s = 2*max(scale, 1); output pixel i has
//   centre c = scale*(i + 0.5), taps from xmin = max(trunc(c - s + 0.5), 0) to
//   min(trunc(c + s + 0.5), in) (exclusive), tap j weighing the Keys cubic (a = -0.5) at
//   (j - c + 0.5) / max(scale, 1), in double, divided by the taps' sum;
// - weights quantised to int16 with one precision p per pass: the largest p <= 22 for which
//   round(max weight * 2^p) < 2^15; each weight rounded half away from zero;
// - an output value is clamp(((1 << (p-1)) + sum of weight * value) >> p, 0, 255) (floor shift).
// PIL's BICUBIC (transformers' PIL backend) is the same but for p = 22 in every pass, a level
// apart on a few pixels. tests/unit/media/media_resize.cpp checks this against the references of
// tests/oracle/make_resize_reference.py, which writes the same kernel out in numpy and checks its
// p = 22 variant equals PIL to the bit.
//
// Contract: resize_bicubic_u8(src, dst_w, dst_h, dst) writes dst_w x dst_h RGB24 pixels (rows of
// 3*dst_w bytes) to dst. src is any 8-bit RGB layout (interleaved or planar) described by
// RgbView; both sizes must be positive (ninfer::Error otherwise). Memory: one src.height x dst_w
// RGB24 buffer when both passes run. rgb24_view(rgb, width, height, stride) describes interleaved
// RGB24 rows of `stride` bytes. Interleaved input takes an SSE4.1 horizontal pass where the CPU
// has it (integer sums: the same bytes as the scalar pass planar input takes;
// tests/unit/media/bicubic_resize.cpp compares the two).
// Thread safety: pure.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ninfer::core {

struct RgbView {
    int width = 0, height = 0;
    const uint8_t* channel[3] = {nullptr, nullptr, nullptr}; // R, G, B at pixel (0, 0)
    ptrdiff_t pixel_step = 3;                                // bytes between a channel's neighbours in a row
    ptrdiff_t row_stride[3] = {0, 0, 0};                     // bytes between a channel's rows
};

RgbView rgb24_view(const uint8_t* rgb, int width, int height, ptrdiff_t stride);

void resize_bicubic_u8(const RgbView& src, int dst_w, int dst_h, uint8_t* dst);

} // namespace ninfer::core
