// ninfer::core - the scheduler's control-plane half: slot save/restore/erase, prefix-cache
// restores and checkpoints, per-lane figures for status.
#include "core/engine/prefix_cache.h"
#include "core/engine/scheduler.h"
#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core {

std::vector<Scheduler::LaneSequence> Scheduler::lane_sequences() const {
    std::vector<LaneSequence> out;
    for (const Lane& l : lanes_) out.push_back({l.history, l.media});
    return out;
}

const Scheduler::Lane& Scheduler::slot_lane(int lane) const {
    if (lane < 0 || size_t(lane) >= lanes_.size())
        throw Error(Errc::NotFound, "slot " + std::to_string(lane) + " does not exist (lanes 0.." + std::to_string(lanes_.size() - 1) + ")");
    return lanes_[size_t(lane)];
}

LaneImage Scheduler::slot_save(int lane) const {
    const Lane& l = slot_lane(lane);
    if (l.history.empty()) throw Error(Errc::NotFound, "slot " + std::to_string(lane) + " is empty");
    if (slicing_ && slicing_->lane == lane) // its state is part-way through a chunk's layers
        throw Error(Errc::Busy, "slot " + std::to_string(lane) + " is busy (a prompt chunk is half-way through its layers)");
    // Between steps a running lane's backend state holds exactly `history` (a sampled token is
    // fed by the next step), so this is the lane at the step boundary.
    LaneImage image = backend_.save_lane(lane);
    if (image.tokens.size() != l.history.size())
        throw Error(Errc::Busy, "slot " + std::to_string(lane) + " changed while saving");
    image.media = media_within(l.media, image.tokens.size());
    return image;
}

void Scheduler::slot_restore(int lane, const LaneImage& image) {
    const Lane& l = slot_lane(lane);
    if (l.request) throw Error(Errc::Busy, "slot " + std::to_string(lane) + " is busy");
    if (image.tokens.empty()) throw Error("slot image holds no tokens");
    Lane& target = lanes_[size_t(lane)];
    try {
        backend_.restore_lane(lane, image);
    } catch (...) {
        backend_.reset_lane(lane); // never leave a half-restored lane that claims a history
        target.history.clear();
        target.media.clear();
        publish_lanes();
        throw;
    }
    target.history = image.tokens;
    target.media = image.media;
    publish_lanes();
}

void Scheduler::slot_erase(int lane) {
    const Lane& l = slot_lane(lane);
    if (l.request) throw Error(Errc::Busy, "slot " + std::to_string(lane) + " is busy");
    backend_.reset_lane(lane);
    lanes_[size_t(lane)].history.clear();
    lanes_[size_t(lane)].media.clear();
    publish_lanes();
}

bool Scheduler::restore_from_cache(int lane, const GenerationRequest& request, size_t reusable, Clock::time_point now) {
    const LaneImage* image = options_.prefix_cache->match(request.prompt, request.media_spans, now);
    if (!image || image->tokens.size() <= reusable) {
        ++stats_.n_prefix_cache_misses_total;
        return false;
    }
    backend_.restore_lane(lane, *image);
    lanes_[size_t(lane)].history = image->tokens;
    lanes_[size_t(lane)].media = image->media;
    ++stats_.n_prefix_cache_hits_total;
    return true;
}

void Scheduler::checkpoint(int lane) {
    const Lane& l = lanes_[size_t(lane)];
    if (l.history.empty()) return;
    // The cache is best effort: when the backend's copies are all busy, waiting for one would
    // stall every lane (measured: up to 1.5 s behind 32K-token images), so this one is skipped.
    if (!backend_.can_save_async()) {
        ++stats_.n_prefix_cache_checkpoints_skipped_total;
        return;
    }
    ++stats_.n_prefix_cache_checkpoints_total;
    // Rebuild estimate for the eviction formula: the measured prefill rate so far.
    uint64_t us = stats_.t_prefill_us_total, n = stats_.n_prefill_tokens_total;
    if (us > 0 && n > 0) options_.prefix_cache->store().set_rebuild_tokens_per_s(double(n) * 1e6 / double(us));
    // The image reaches the cache when the backend has copied it (a later step's poll_saves);
    // until then a prompt that would match it prefills instead.
    PrefixCache* cache = options_.prefix_cache;
    backend_.save_lane_async(lane, [cache, media = l.media](LaneImage image) {
        image.media = media_within(media, image.tokens.size());
        cache->insert(std::move(image), Clock::now());
    });
}

uint32_t Scheduler::assistant_boundary(const std::vector<int32_t>& prompt, uint32_t after) const {
    const std::vector<int32_t>& m = assistant_marker_;
    if (m.empty() || prompt.size() <= m.size()) return 0;
    for (size_t end = prompt.size(); end >= m.size() && end > after; --end) {
        if (!std::equal(m.begin(), m.end(), prompt.begin() + long(end - m.size()))) continue;
        // The end of the prompt gets its own checkpoint; a boundary there adds nothing.
        return end < prompt.size() ? uint32_t(end) : 0;
    }
    return 0;
}

void Scheduler::publish_lanes() {
    for (size_t i = 0; i < lanes_.size() && i < stats_.lane_phase.size(); ++i) {
        const Lane& l = lanes_[i];
        stats_.lane_phase[i] = uint8_t(!l.request ? 0 : l.decoding ? 2 : 1);
        stats_.lane_tokens[i] = uint32_t(l.history.size());
    }
}

} // namespace ninfer::core
