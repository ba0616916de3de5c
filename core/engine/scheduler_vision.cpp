// ninfer::core - the scheduler's multimodal requests: refusal without a tower, tower rows and M-RoPE
// positions for the prefill (issue 31).
#include "core/engine/scheduler.h"

#include "core/util/error.h"

namespace ninfer::core {

bool Scheduler::refuse_media(GenerationRequest& request) {
    if (request.media.empty()) return false;
    std::string why;
    if (!options_.vision) {
        why = "this engine runs no vision tower (the artifact has none, or its tokenizer lacks the image and "
              "video placeholder tokens)";
    } else {
        std::vector<MediaGrid> grids;
        for (const VisionInput& m : request.media)
            grids.push_back({m.kind == VisionInput::Kind::Video, uint32_t(m.grid_t), uint32_t(m.grid_h), uint32_t(m.grid_w)});
        try { // placeholders and media must pair up before a lane is spent on them
            mrope_positions(request.prompt, options_.vision->image_token_id, options_.vision->video_token_id, grids,
                            uint32_t(request.media[0].merge_size));
        } catch (const Error& e) {
            why = e.what();
        }
    }
    if (why.empty()) return false;
    ++stats_.n_requests_rejected_total;
    request.sink->on_rejected(RejectReason::Unsupported, why);
    return true;
}

bool Scheduler::prefill_chunk(int lane_index, std::span<const int32_t> chunk, LogitsOut out) {
    Lane& lane = lanes_[size_t(lane_index)];
    const GenerationRequest& r = *lane.request;
    if (r.media.empty()) {
        backend_.prefill(lane_index, chunk, out, nullptr);
        return true;
    }
    if (!lane.vision || lane.vision_admission != lane.admit_order) {
        // The tower runs here, on the engine thread, before the request's first chunk: its time is
        // part of this prompt's prefill (and of the other lanes' gap between tokens).
        try {
            lane.vision = prepare_vision_prefill(r.prompt, r.media, *options_.vision, lane.n_prefilled);
            lane.vision_admission = lane.admit_order;
            stats_.n_vision_items_encoded_total += lane.vision->n_items_encoded;
            stats_.t_vision_encode_us_total += uint64_t(lane.vision->tower_ms * 1e3);
        } catch (const Error&) { // an item the tower refuses ends this request only
            finish(lane_index, FinishReason::Failed);
            return false;
        }
    }
    backend_.prefill_with(lane_index, chunk, lane.vision->chunk(lane.n_prefilled, chunk.size()), out, nullptr);
    if (lane.n_prefilled + chunk.size() == r.prompt.size())
        lane.vision.reset(); // the rows are in the lane's state now
    return true;
}

} // namespace ninfer::core
