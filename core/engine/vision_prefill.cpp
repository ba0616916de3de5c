// ninfer::core - pair a prompt's placeholder runs with its media, run the tower, place its rows.
#include "core/engine/vision_prefill.h"

#include "core/util/error.h"

#include <chrono>

namespace ninfer::core {

VisionPrefill prepare_vision_prefill(std::span<const int32_t> prompt, std::span<const VisionInput> media,
                                     VisionEncoder& encoder, size_t skip_before) {
    VisionPrefill out;
    const int32_t image = encoder.image_token_id, video = encoder.video_token_id;
    if (media.empty())
        throw Error("vision: a multimodal prefill without media");
    std::vector<MediaGrid> grids;
    std::vector<size_t> images, videos; // indices into media, per kind in prompt order
    for (size_t i = 0; i < media.size(); ++i) {
        const VisionInput& m = media[i];
        const bool is_video = m.kind == VisionInput::Kind::Video;
        grids.push_back({is_video, uint32_t(m.grid_t), uint32_t(m.grid_h), uint32_t(m.grid_w)});
        (is_video ? videos : images).push_back(i);
    }
    MropeLayout layout = mrope_positions(prompt, image, video, grids, uint32_t(media[0].merge_size));
    out.positions = std::move(layout.positions);
    out.next_position = layout.next;

    // Walk the placeholders twice: first which items have a placeholder at or after skip_before
    // (those are encoded, in one call, in prompt order), then each placeholder's row.
    const size_t H = encoder.out_hidden();
    struct Use {
        const VisionInput* item;
        int64_t base = -1; // its first row in embeddings, -1 = not encoded
    };
    std::vector<Use> uses;
    auto walk = [&](auto&& on_placeholder) {
        size_t next_image = 0, next_video = 0, at_row = 0; // at_row: rows of the current item used so far
        bool open = false;
        for (size_t i = 0; i < prompt.size(); ++i) {
            const bool is_image = prompt[i] == image, is_video = prompt[i] == video;
            if (!is_image && !is_video)
                continue;
            if (!open) { // mrope_positions checked that runs and media pair up
                if (uses.size() < next_image + next_video + 1)
                    uses.push_back({&media[is_image ? images[next_image] : videos[next_video]]});
                is_image ? ++next_image : ++next_video;
                at_row = 0;
                open = true;
            }
            Use& u = uses[next_image + next_video - 1];
            on_placeholder(i, u, at_row);
            if (++at_row == u.item->merged_tokens())
                open = false;
        }
    };
    std::vector<const VisionInput*> to_encode;
    walk([&](size_t i, Use& u, size_t) {
        if (i >= skip_before && u.base < 0) {
            u.base = 0; // marked; its row base is set below
            to_encode.push_back(u.item);
        }
    });
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::vector<float>> rows = encoder.encode_batch(to_encode);
    out.tower_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rows.size() != to_encode.size())
        throw Error("vision: the encoder returned " + std::to_string(rows.size()) + " items for " +
                    std::to_string(to_encode.size()));
    size_t k = 0;
    for (Use& u : uses) {
        if (u.base < 0)
            continue;
        if (rows[k].size() != u.item->merged_tokens() * H)
            throw Error("vision: the encoder returned " + std::to_string(rows[k].size()) + " values for " +
                        std::to_string(u.item->merged_tokens()) + " rows of " + std::to_string(H));
        u.base = int64_t(out.embeddings.size() / H);
        out.embeddings.insert(out.embeddings.end(), rows[k].begin(), rows[k].end());
        ++k;
    }
    out.n_items_encoded = to_encode.size();
    out.rows.assign(prompt.size(), -1);
    walk([&](size_t i, Use& u, size_t at_row) {
        if (i >= skip_before)
            out.rows[i] = int32_t(u.base + int64_t(at_row));
    });
    return out;
}

} // namespace ninfer::core
