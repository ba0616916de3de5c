// ninfer::core - M-RoPE positions of a prompt with image and video placeholders (get_rope_index).
#include "core/backend/mrope.h"

#include "core/util/error.h"

#include <algorithm>
#include <string>

namespace ninfer::core {

MropeLayout mrope_positions(std::span<const int32_t> tokens, int32_t image_token, int32_t video_token,
                            std::span<const MediaGrid> media, uint32_t merge) {
    if (merge == 0)
        throw Error("mrope: merge size 0");
    // The grids each kind of run consumes, in prompt order: a video's temporal patches one by one.
    std::vector<MediaGrid> images, frames;
    for (const MediaGrid& g : media) {
        if (g.t == 0 || g.h == 0 || g.w == 0 || g.h % merge || g.w % merge)
            throw Error("mrope: a grid of " + std::to_string(g.t) + "x" + std::to_string(g.h) + "x" +
                        std::to_string(g.w) + " patches (merge " + std::to_string(merge) + ")");
        if (!g.video)
            images.push_back(g);
        else
            for (uint32_t i = 0; i < g.t; ++i)
                frames.push_back({true, 1, g.h, g.w});
    }
    size_t next_image = 0, next_frame = 0;
    MropeLayout out;
    out.positions.reserve(tokens.size());
    uint32_t p = 0;
    for (size_t i = 0; i < tokens.size();) {
        const int kind = tokens[i] == image_token ? 1 : tokens[i] == video_token ? 2 : 0;
        size_t end = i;
        while (end < tokens.size() && (tokens[end] == image_token ? 1 : tokens[end] == video_token ? 2 : 0) == kind)
            ++end;
        const size_t n = end - i;
        if (kind == 0) {
            for (size_t k = 0; k < n; ++k)
                out.positions.push_back(MropePosition::text(p + uint32_t(k)));
            p += uint32_t(n);
        } else {
            std::vector<MediaGrid>& grids = kind == 1 ? images : frames;
            size_t& at = kind == 1 ? next_image : next_frame;
            const char* what = kind == 1 ? "image" : "video frame pair";
            if (at == grids.size())
                throw Error(std::string("mrope: the prompt has more ") + what + " placeholder runs than media");
            const MediaGrid g = grids[at++];
            const uint32_t gh = g.h / merge, gw = g.w / merge;
            if (n != size_t(g.t) * gh * gw)
                throw Error("mrope: a run of " + std::to_string(n) + " " + what + " placeholders for a grid of " +
                            std::to_string(size_t(g.t) * gh * gw) + " merged tokens");
            for (uint32_t t = 0; t < g.t; ++t)
                for (uint32_t r = 0; r < gh; ++r)
                    for (uint32_t c = 0; c < gw; ++c)
                        out.positions.push_back({p + t, p + r, p + c});
            p += std::max(gh, gw);
        }
        i = end;
    }
    if (next_image != images.size() || next_frame != frames.size())
        throw Error("mrope: " + std::to_string(images.size() - next_image) + " image(s) and " +
                    std::to_string(frames.size() - next_frame) + " video frame pair(s) have no placeholders");
    out.next = p;
    return out;
}

} // namespace ninfer::core
