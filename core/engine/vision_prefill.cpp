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

    // Walk the placeholders: each item's rows in order; encode an item when a row is needed.
    out.rows.assign(prompt.size(), -1);
    const size_t H = encoder.out_hidden();
    size_t next_image = 0, next_video = 0, at_row = 0; // at_row: rows of the current item used so far
    const VisionInput* current = nullptr;
    int64_t current_base = -1; // the current item's first row in embeddings, -1 = not encoded
    for (size_t i = 0; i < prompt.size(); ++i) {
        const bool is_image = prompt[i] == image, is_video = prompt[i] == video;
        if (!is_image && !is_video)
            continue;
        if (!current) { // mrope_positions checked that runs and media pair up
            current = &media[is_image ? images[next_image++] : videos[next_video++]];
            at_row = 0;
            current_base = -1;
        }
        if (i >= skip_before) {
            if (current_base < 0) {
                const auto t0 = std::chrono::steady_clock::now();
                const std::vector<float> rows = encoder.encode(*current);
                out.tower_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                if (rows.size() != current->merged_tokens() * H)
                    throw Error("vision: the encoder returned " + std::to_string(rows.size()) + " values for " +
                                std::to_string(current->merged_tokens()) + " rows of " + std::to_string(H));
                current_base = int64_t(out.embeddings.size() / H);
                out.embeddings.insert(out.embeddings.end(), rows.begin(), rows.end());
                ++out.n_items_encoded;
            }
            out.rows[i] = int32_t(current_base + int64_t(at_row));
        }
        if (++at_row == current->merged_tokens())
            current = nullptr;
    }
    return out;
}

} // namespace ninfer::core
