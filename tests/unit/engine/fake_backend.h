// ninfer tests - a deterministic fake Backend: the next token is a hash of the lane's whole
// sequence, so any mix-up between lanes or a lost token changes the output. Records every call.
// With layers > 0 it slices prefills as backend.h's prefill_begin / prefill_advance say (a model of
// that many layers; the tokens join the lane when the last layer is done) and throws on any call
// that contract forbids while a chunk is pending.
#pragma once

#include "core/backend/backend.h"
#include "core/engine/generation.h"
#include "core/util/error.h"

#include <cstdint>
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ninfer::test {

class FakeBackend final : public core::Backend {
  public:
    struct Call {
        std::string kind; // "prefill", "decode", or with layers > 0 "prefill_begin" and "slice"
        int lane = -1;    // prefill lane
        size_t n = 0;     // prefill tokens, decode batch size, or a slice's layers
    };
    FakeBackend(int lanes, uint32_t vocab = 1000) : lanes_(size_t(lanes)), vocab_(vocab) {}
    std::string name() const override { return "fake"; }
    int n_lanes() const override { return int(lanes_.size()); }
    uint32_t vocab_size() const override { return vocab_; }
    uint32_t max_context() const override { return 1 << 20; }
    uint32_t lane_length(int lane) const override { return uint32_t(lanes_[size_t(lane)].size()); }
    void reset_lane(int lane) override {
        lanes_[size_t(lane)].clear();
        if (pending_ && pending_->lane == lane) pending_.reset();
    }
    void prefill(int lane, std::span<const int32_t> tokens, core::LogitsOut, std::vector<float>*) override {
        if (pending_) throw Error("fake: a prefill while a sliced one is pending");
        auto& l = lanes_[size_t(lane)];
        l.insert(l.end(), tokens.begin(), tokens.end());
        calls.push_back({"prefill", lane, tokens.size()});
    }
    int layers = 0; // > 0: prefill_begin / prefill_advance slice a model of this many layers
    void prefill_begin(int lane, std::span<const int32_t> tokens, core::LogitsOut out,
                       std::vector<float>* logits) override {
        if (layers == 0) return Backend::prefill_begin(lane, tokens, out, logits);
        if (pending_) throw Error("fake: prefill_begin while a sliced prefill is pending");
        pending_ = Pending{lane, {tokens.begin(), tokens.end()}, 0};
        calls.push_back({"prefill_begin", lane, tokens.size()});
    }
    bool prefill_advance(int max_layers) override {
        if (layers == 0) return Backend::prefill_advance(max_layers);
        if (!pending_) throw Error("fake: prefill_advance with no prefill begun");
        const int run = max_layers > 0 ? std::min(max_layers, layers - pending_->done) : layers - pending_->done;
        pending_->done += run;
        calls.push_back({"slice", pending_->lane, size_t(run)});
        if (pending_->done < layers) return false;
        auto& l = lanes_[size_t(pending_->lane)];
        l.insert(l.end(), pending_->tokens.begin(), pending_->tokens.end());
        calls.push_back({"prefill", pending_->lane, pending_->tokens.size()});
        pending_.reset();
        return true;
    }
    bool prefill_pending() const override { return pending_.has_value(); }
    core::DecodeResult sample_after_prefill(int lane, const core::SamplingParams&, std::span<const int32_t>,
                                            int) override {
        check_not_pending(lane, "sample_after_prefill");
        return {next_token(lanes_[size_t(lane)]), -0.5f, {}};
    }
    std::vector<core::DecodeResult> decode(std::span<const core::DecodeStep> steps) override {
        if (decodes_before_failure == 0) throw Error("fake: the device was lost");
        if (decodes_before_failure > 0) --decodes_before_failure;
        std::vector<core::DecodeResult> out;
        for (const auto& s : steps) check_not_pending(s.lane, "decode");
        for (const auto& s : steps) {
            lanes_[size_t(s.lane)].push_back(s.token);
            out.push_back({next_token(lanes_[size_t(s.lane)]), -0.5f, {}});
        }
        calls.push_back({"decode", -1, steps.size()});
        return out;
    }
    std::vector<float> last_logits(int) const override { return {}; }
    // With kv_bytes_per_token > 0 an image carries kv and gdn sections of those sizes (bytes derived
    // from the tokens), as a real backend's do, and a restore checks their sizes.
    uint64_t kv_bytes_per_token = 0, gdn_bytes = 0;
    core::LaneImage save_lane(int lane) const override {
        check_not_pending(lane, "save_lane");
        core::LaneImage image;
        image.tokens = lanes_[size_t(lane)];
        if (kv_bytes_per_token == 0) return image;
        std::span<uint8_t> kv = image.add_section(core::LaneSectionTag::Kv, kv_bytes_per_token * image.tokens.size());
        for (size_t i = 0; i < kv.size(); ++i) kv[i] = uint8_t(image.tokens[i / kv_bytes_per_token] + i);
        std::span<uint8_t> gdn = image.add_section(core::LaneSectionTag::Gdn, gdn_bytes);
        for (size_t i = 0; i < gdn.size(); ++i) gdn[i] = uint8_t(next_token(image.tokens) + i);
        return image;
    }
    void restore_lane(int lane, const core::LaneImage& image) override {
        check_not_pending(lane, "restore_lane");
        if (kv_bytes_per_token > 0 &&
            (image.kv().size() != kv_bytes_per_token * image.tokens.size() || image.gdn().size() != gdn_bytes))
            throw Error("fake: lane image sizes do not match");
        lanes_[size_t(lane)] = image.tokens;
    }
    // async_saves: an image taken by save_lane_async (as the lane stands at the call) reaches its
    // callback only from a later poll_saves, as the CUDA backend's copier thread delivers it.
    bool async_saves = false;
    void save_lane_async(int lane, std::function<void(core::LaneImage)> done) override {
        if (!async_saves) return done(save_lane(lane));
        pending_saves_.emplace_back(save_lane(lane), std::move(done));
    }
    void poll_saves(bool) override {
        auto ready = std::move(pending_saves_);
        pending_saves_.clear();
        for (auto& [image, done] : ready) done(std::move(image));
    }
    bool saves_in_flight() const override { return !pending_saves_.empty(); }
    size_t save_slots = SIZE_MAX; // with async_saves: saves in flight a new one may join
    bool can_save_async() const override { return pending_saves_.size() < save_slots; }

    std::vector<Call> calls;
    int decodes_before_failure = -1; // >= 0: decode throws after this many successful calls

  private:
    struct Pending {
        int lane = 0;
        std::vector<int32_t> tokens;
        int done = 0; // layers run
    };
    std::optional<Pending> pending_;
    void check_not_pending(int lane, const char* call) const {
        if (pending_ && pending_->lane == lane)
            throw Error(std::string("fake: ") + call + " of lane " + std::to_string(lane) + " while its prefill is sliced");
    }
    int32_t next_token(const std::vector<int32_t>& seq) const {
        uint64_t h = 1469598103934665603ull;
        for (int32_t t : seq) h = (h ^ uint64_t(uint32_t(t))) * 1099511628211ull;
        return int32_t(h % vocab_);
    }
    std::vector<std::vector<int32_t>> lanes_;
    uint32_t vocab_;
    std::vector<std::pair<core::LaneImage, std::function<void(core::LaneImage)>>> pending_saves_;
};

// Collects what the scheduler reports for one request.
struct RecordingSink : core::GenerationSink {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs; // each token's DecodeResult::logprob
    bool admitted = false, finished = false, rejected = false;
    int lane = -1;
    uint32_t cached = 0;
    core::GenerationSummary summary;
    core::RejectReason reject_reason{};
    int32_t stop_after_token = -1; // return Stop when this token arrives
    void on_admitted(int l, uint32_t c) override { admitted = true, lane = l, cached = c; }
    core::TokenVerdict on_token(const core::DecodeResult& r) override {
        tokens.push_back(r.token);
        logprobs.push_back(r.logprob);
        return r.token == stop_after_token ? core::TokenVerdict::Stop : core::TokenVerdict::Continue;
    }
    void on_finished(const core::GenerationSummary& s) override { finished = true, summary = s; }
    void on_rejected(core::RejectReason reason, const std::string&) override { rejected = true, reject_reason = reason; }
};

// Forces `ids` once, after `trigger` arrives (a thinking budget closing the reasoning).
struct ForcingSink final : RecordingSink {
    int32_t trigger = -1;
    std::vector<int32_t> ids;
    bool fired = false;
    std::vector<int32_t> forced_tokens() override {
        if (fired || tokens.empty() || tokens.back() != trigger) return {};
        fired = true;
        return ids;
    }
};

} // namespace ninfer::test
