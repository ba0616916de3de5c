// ninfer::core - CudaBackend's lane images (cuda_backend_impl.h): save, restore, background checkpoints.
#include "core/cuda/cuda_backend_impl.h"

#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core::cuda_detail {

LaneImage CudaBackend::save_lane(int lane) const {
    const Lane& s = at(lane);
    const cuda::MtpPart head = mtp_ ? mtp_->pending(lane, uint32_t(s.tokens.size())) : cuda::MtpPart{};
    LaneImage image = copier_.save_now(lane, s.tokens, s.pages, mtp_ ? &head : nullptr);
    set_rope_offset(image, s.rope_offset);
    return image;
}

void CudaBackend::restore_lane(int lane, const LaneImage& img) {
    constexpr LaneSectionTag kRestorable[] = {LaneSectionTag::RopePosition};
    lane_image_check(img, plan_, kRestorable);
    const int64_t rope_offset = image_rope_offset(img);
    const uint32_t n = uint32_t(img.tokens.size());
    reset_lane(lane);
    grow(lane, n);
    Lane& s = at(lane);
    const cuda::LaneImageCopier::MtpTarget head = [&](uint32_t m, uint32_t len) {
        return mtp_->restore_target(lane, m, len);
    };
    const uint32_t m = copier_.restore(lane, img, s.pages, mtp_ ? &head : nullptr);
    s.tokens = img.tokens;
    s.has_logits = false;
    if (mtp_) // without an MtpKv section the head starts again at the next decode
        mtp_->restored(lane, m, n);
    set_lane_rope_offset(lane, rope_offset);
}

void CudaBackend::save_lane_async(int lane, std::function<void(LaneImage)> done) {
    const Lane& s = at(lane);
    if (s.rope_offset != 0) // the image gets the lane's RoPE position as it stands now
        done = [done = std::move(done), offset = s.rope_offset](LaneImage image) {
            set_rope_offset(image, offset);
            done(std::move(image));
        };
    const size_t used = (s.tokens.size() + kKvPageTokens - 1) / kKvPageTokens;
    std::vector<uint32_t> held(s.pages.begin(), s.pages.begin() + long(used));
    for (uint32_t p : held)
        ++page_refs_[p];
    const cuda::MtpPart head = mtp_ ? mtp_->pending(lane, uint32_t(s.tokens.size())) : cuda::MtpPart{};
    const uint64_t id = copier_.begin_save(lane, s.tokens, held, mtp_ ? &head : nullptr);
    pending_saves_.emplace_back(id, std::move(done));
}

void CudaBackend::poll_saves(bool wait) {
    finish_saves(wait);
    std::vector<std::pair<std::function<void(LaneImage)>, LaneImage>> ready;
    ready.swap(ready_saves_);
    for (auto& [done, image] : ready)
        done(std::move(image));
}

void CudaBackend::finish_saves(bool wait) {
    for (cuda::LaneImageCopier::Done& d : copier_.take_done(wait)) {
        for (uint32_t p : d.pages)
            release_page(p);
        auto it = std::find_if(pending_saves_.begin(), pending_saves_.end(),
                               [&](const auto& e) { return e.first == d.id; });
        if (it == pending_saves_.end())
            continue;
        auto done = std::move(it->second);
        pending_saves_.erase(it);
        if (!d.error.empty())
            throw Error("backend: saving a checkpoint failed: " + d.error);
        ready_saves_.emplace_back(std::move(done), std::move(d.image));
    }
}

} // namespace ninfer::core::cuda_detail
