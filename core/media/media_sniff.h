// ninfer::core - an image's format and size read from its first bytes, before any decoder runs.
//
// Contract: sniff_image(bytes) recognises PNG (IHDR), JPEG (the first SOFn segment), WebP (VP8,
// VP8L or VP8X chunk) and GIF (logical screen) and returns {format, width, height}; nullopt
// when the bytes begin with none of these signatures (a video container, or nothing we
// decode). A recognised signature whose header is cut short or inconsistent throws
// Error("media: truncated or malformed FORMAT header"). It reads at most the bytes given
// (bounds-checked; never allocates beyond the result), so it is the size check a hostile file
// meets before FFmpeg sees it. GIF sizes are the logical screen, which bounds every frame the
// decoder draws.
// Thread safety: pure.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ninfer::core {

struct SniffedImage {
    std::string format; // "png", "jpeg", "webp", "gif"
    int64_t width = 0;
    int64_t height = 0;
};

std::optional<SniffedImage> sniff_image(std::span<const uint8_t> bytes);

} // namespace ninfer::core
