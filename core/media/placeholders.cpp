// ninfer::core - image/video placeholder expansion of the rendered prompt (Qwen3VLProcessor's).
#include "core/media/placeholders.h"

#include "core/util/error.h"

#include <algorithm>
#include <cstdio>

namespace ninfer::core {
namespace {

constexpr std::string_view kImage = "<|vision_start|><|image_pad|><|vision_end|>";
constexpr std::string_view kVideo = "<|vision_start|><|video_pad|><|vision_end|>";

void repeat(std::string& out, std::string_view s, size_t n) {
    out.reserve(out.size() + s.size() * n);
    for (size_t i = 0; i < n; ++i) out += s;
}

} // namespace

std::string expand_vision_placeholders(std::string_view text, std::span<const VisionInput> items) {
    std::string out;
    size_t at = 0, next = 0;
    for (;;) {
        const size_t image = text.find(kImage, at), video = text.find(kVideo, at);
        const size_t found = std::min(image, video);
        if (found == std::string_view::npos) break;
        const bool is_image = found == image;
        if (next >= items.size())
            throw Error("media: the prompt holds more image/video placeholders than the request has media items");
        const VisionInput& item = items[next++];
        if ((item.kind == VisionInput::Kind::Image) != is_image)
            throw Error("media: media item " + std::to_string(next) + " is " + (is_image ? "a video" : "an image") +
                        " but its placeholder in the prompt is " + (is_image ? "an image's" : "a video's"));
        out.append(text.substr(at, found - at));
        at = found + (is_image ? kImage : kVideo).size();
        if (is_image) {
            out += "<|vision_start|>";
            repeat(out, "<|image_pad|>", item.merged_tokens());
            out += "<|vision_end|>";
            continue;
        }
        if (item.grid_t <= 0 || item.timestamps_s.size() != size_t(item.grid_t))
            throw Error("media: a video item without one timestamp per temporal patch");
        const size_t per_frame = item.merged_tokens() / size_t(item.grid_t);
        for (double t : item.timestamps_s) {
            char stamp[48];
            std::snprintf(stamp, sizeof stamp, "<%.1f seconds>", t);
            out += stamp;
            out += "<|vision_start|>";
            repeat(out, "<|video_pad|>", per_frame);
            out += "<|vision_end|>";
        }
    }
    if (next != items.size())
        throw Error("media: the request has " + std::to_string(items.size()) + " media items but the prompt " +
                    std::to_string(next) + " placeholders");
    out.append(text.substr(at));
    return out;
}

} // namespace ninfer::core
