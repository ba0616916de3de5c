// ninfer::core - image signatures and header sizes (PNG, JPEG, WebP, GIF), bounds-checked.
#include "core/media/media_sniff.h"

#include "core/util/error.h"

#include <cstring>

namespace ninfer::core {
namespace {

struct Cursor {
    std::span<const uint8_t> b;
    bool has(size_t at, size_t n) const { return at <= b.size() && n <= b.size() - at; }
    uint32_t be16(size_t at) const { return uint32_t(b[at]) << 8 | b[at + 1]; }
    uint32_t be32(size_t at) const { return be16(at) << 16 | be16(at + 2); }
    uint32_t le16(size_t at) const { return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8; }
    uint32_t le24(size_t at) const { return le16(at) | uint32_t(b[at + 2]) << 16; }
    bool is(size_t at, const char* s) const { return has(at, std::strlen(s)) && !std::memcmp(&b[at], s, std::strlen(s)); }
};

[[noreturn]] void malformed(const char* format) {
    throw Error(std::string("media: truncated or malformed ") + format + " header");
}

SniffedImage png(const Cursor& c) {
    if (!c.has(0, 24) || !c.is(12, "IHDR")) malformed("PNG");
    return {"png", c.be32(16), c.be32(20)};
}

SniffedImage gif(const Cursor& c) {
    if (!c.has(0, 10)) malformed("GIF");
    return {"gif", c.le16(6), c.le16(8)};
}

SniffedImage webp(const Cursor& c) {
    if (!c.has(0, 30)) malformed("WebP");
    if (c.is(12, "VP8X")) return {"webp", int64_t(c.le24(24)) + 1, int64_t(c.le24(27)) + 1};
    if (c.is(12, "VP8L")) {
        if (c.b[20] != 0x2f) malformed("WebP");
        const uint32_t bits = c.le16(21) | uint32_t(c.le16(23)) << 16;
        return {"webp", int64_t(bits & 0x3fff) + 1, int64_t((bits >> 14) & 0x3fff) + 1};
    }
    if (c.is(12, "VP8 ")) {
        if (c.b[23] != 0x9d || c.b[24] != 0x01 || c.b[25] != 0x2a) malformed("WebP");
        return {"webp", c.le16(26) & 0x3fff, c.le16(28) & 0x3fff};
    }
    malformed("WebP");
}

SniffedImage jpeg(const Cursor& c) {
    size_t at = 2;
    // Segments: FF marker, then (except standalone markers) a 16-bit length that counts itself.
    while (c.has(at, 4)) {
        if (c.b[at] != 0xff) malformed("JPEG");
        const uint8_t m = c.b[at + 1];
        if (m == 0xff) { ++at; continue; } // fill byte
        if (m == 0x01 || (m >= 0xd0 && m <= 0xd7)) { at += 2; continue; }
        if (m == 0xd9 || m == 0xda) break; // end of image or start of scan before any frame header
        const size_t len = c.be16(at + 2);
        if (len < 2) malformed("JPEG");
        const bool sof = m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
        if (sof) {
            if (len < 7 || !c.has(at + 4, 5)) malformed("JPEG");
            return {"jpeg", c.be16(at + 7), c.be16(at + 5)};
        }
        at += 2 + len;
    }
    malformed("JPEG");
}

} // namespace

std::optional<SniffedImage> sniff_image(std::span<const uint8_t> bytes) {
    const Cursor c{bytes};
    if (c.is(0, "\x89PNG\r\n\x1a\n")) return png(c);
    if (c.has(0, 3) && c.b[0] == 0xff && c.b[1] == 0xd8 && c.b[2] == 0xff) return jpeg(c);
    if (c.is(0, "RIFF") && c.is(8, "WEBP")) return webp(c);
    if (c.is(0, "GIF87a") || c.is(0, "GIF89a")) return gif(c);
    return std::nullopt;
}

} // namespace ninfer::core
