// ninfer::core - scripted backend: replays token ids per generation (tests of the HTTP surface).
#include "core/engine/script_backend.h"

#include "core/util/error.h"

namespace ninfer::core {

ScriptBackend::ScriptBackend(std::vector<std::vector<int32_t>> scripts, int n_lanes, uint32_t vocab_size,
                             uint32_t max_context, ScriptLaneLayout layout)
    : scripts_(std::move(scripts)), lanes_(size_t(n_lanes)), vocab_size_(vocab_size), max_context_(max_context),
      layout_(layout) {
    if (scripts_.empty()) throw Error("backend: script backend needs at least one script");
    for (const auto& s : scripts_)
        if (s.empty()) throw Error("backend: script backend got an empty script");
}

ScriptBackend::Lane& ScriptBackend::lane_at(int lane) {
    if (lane < 0 || size_t(lane) >= lanes_.size()) throw Error("backend: lane " + std::to_string(lane) + " out of range");
    return lanes_[size_t(lane)];
}

uint32_t ScriptBackend::lane_length(int lane) const {
    return uint32_t(const_cast<ScriptBackend*>(this)->lane_at(lane).tokens.size());
}

void ScriptBackend::reset_lane(int lane) { lane_at(lane).tokens.clear(); }

void ScriptBackend::prefill(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) {
    Lane& l = lane_at(lane);
    if (l.tokens.size() + tokens.size() > max_context_) throw Error("backend: context full");
    l.tokens.insert(l.tokens.end(), tokens.begin(), tokens.end());
    if (logits && out != LogitsOut::None)
        logits->assign(size_t(vocab_size_) * (out == LogitsOut::All ? tokens.size() : 1), 0.0f);
}

DecodeResult ScriptBackend::next(Lane& l, int n_top_logprobs) {
    const std::vector<int32_t>& script = scripts_[l.script];
    DecodeResult r;
    r.token = script[l.cursor < script.size() ? l.cursor : script.size() - 1];
    if (r.token == -1) throw Error(Errc::Internal, "backend: scripted device failure");
    ++l.cursor;
    r.logprob = 0.0f;
    if (n_top_logprobs > 0) r.top_logprobs.emplace_back(r.token, 0.0f);
    return r;
}

DecodeResult ScriptBackend::sample_after_prefill(int lane, const SamplingParams&, std::span<const int32_t>,
                                                 int n_top_logprobs) {
    Lane& l = lane_at(lane);
    l.script = next_script_++ % scripts_.size();
    l.cursor = 0;
    return next(l, n_top_logprobs);
}

std::vector<DecodeResult> ScriptBackend::decode(std::span<const DecodeStep> steps) {
    std::vector<DecodeResult> out;
    for (const DecodeStep& s : steps) {
        Lane& l = lane_at(s.lane);
        if (l.tokens.size() + 1 > max_context_) throw Error("backend: context full");
        l.tokens.push_back(s.token);
        out.push_back(next(l, s.n_top_logprobs));
    }
    return out;
}

std::vector<float> ScriptBackend::last_logits(int) const { return std::vector<float>(vocab_size_, 0.0f); }

LaneImage ScriptBackend::save_lane(int lane) const {
    LaneImage image;
    image.tokens = const_cast<ScriptBackend*>(this)->lane_at(lane).tokens;
    if (layout_.kv_bytes_per_token > 0 || layout_.gdn_bytes > 0) {
        image.add_section(LaneSectionTag::Kv, layout_.kv_bytes_per_token * image.tokens.size()); // zeros
        image.add_section(LaneSectionTag::Gdn, layout_.gdn_bytes);
    }
    return image;
}

void ScriptBackend::restore_lane(int lane, const LaneImage& image) {
    if (image.tokens.size() > max_context_) throw Error("backend: lane image longer than the context");
    lane_at(lane).tokens = image.tokens;
}

} // namespace ninfer::core
