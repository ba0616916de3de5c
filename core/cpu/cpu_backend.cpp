// ninfer::core - CpuBackend: lanes, prefill/decode over ModelRunner, sampling, lane images.
#include "core/cpu/cpu_backend.h"

#include "core/backend/prefill_inputs.h"
#include "core/cpu/forward.h"
#include "core/cpu/lane_state.h"
#include "core/cpu/mtp_head.h"
#include "core/cpu/thread_pool.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace ninfer::core {

double log_sum_exp(std::span<const float> logits) {
    const float m = *std::max_element(logits.begin(), logits.end());
    double s = 0;
    for (float x : logits)
        s += std::exp(double(x) - double(m));
    return double(m) + std::log(s);
}

namespace {

class CpuBackend final : public Backend {
  public:
    CpuBackend(const ModelWeights& w, const MemoryPlan& plan, const CpuBackendOptions& o)
        : w_(w), plan_(plan), pool_(o.threads), kv_(w.config, plan_),
          runner_(w, plan_, kv_, pool_, cpu::ForwardOptions{o.gdn_chunked}),
          mtp_(w, plan_, runner_, kv_), lanes_(plan.n_lanes) {
        if (plan_.mtp && !w.mtp)
            throw Error("backend: the plan counts an MTP layer but the weights have no MTP head");
        const size_t K = plan_.max_draft_tokens;
        for (cpu::LaneState& lane : lanes_) {
            lane.conv.assign(runner_.conv_floats(), 0.0f);
            lane.recurrent.assign(runner_.recurrent_floats(), 0.0f);
            lane.verify_conv.assign(K * runner_.conv_floats(), 0.0f);
            lane.verify_recurrent.assign(K * runner_.recurrent_floats(), 0.0f);
            lane.verify_logits.reserve(K ? (K + 1) * size_t(w.config.vocab_size) : 0);
            lane.mtp_hidden.reserve(plan_.mtp ? (K + 2) * size_t(w.config.hidden_size) : 0);
        }
    }

    std::string name() const override { return "cpu"; }
    int n_lanes() const override { return int(lanes_.size()); }
    uint32_t vocab_size() const override { return w_.config.vocab_size; }
    uint32_t max_context() const override { return plan_.max_context; }
    uint32_t lane_length(int lane) const override { return uint32_t(at(lane).tokens.size()); }

    void reset_lane(int lane) override {
        cpu::LaneState& s = at(lane);
        kv_.release(s.pages);
        s.tokens.clear();
        std::fill(s.conv.begin(), s.conv.end(), 0.0f);
        std::fill(s.recurrent.begin(), s.recurrent.end(), 0.0f);
        s.has_logits = false;
        s.rope_offset = 0;
        s.mtp_length = 0;
        s.mtp_hidden.clear();
        s.mtp_rope.clear();
        s.verify_count = 0;
    }

    void prefill(int lane, std::span<const int32_t> tokens, LogitsOut out,
                 std::vector<float>* logits) override {
        prefill_rows(lane, tokens, nullptr, out, logits);
    }

    void prefill_with(int lane, std::span<const int32_t> tokens, const PrefillInputs& in, LogitsOut out,
                      std::vector<float>* logits) override {
        check_prefill_inputs(tokens.size(), in, w_.config.hidden_size);
        // Text after the chunk continues at the lane's largest position + 1 (get_rope_index's
        // rope_deltas); before the chunk that is where text would have gone next.
        cpu::LaneState& s = at(lane);
        const int64_t before = int64_t(s.tokens.size()) + s.rope_offset;
        prefill_rows(lane, tokens, &in, out, logits);
        s.rope_offset = next_text_position(in, before) - int64_t(s.tokens.size());
    }

    DecodeResult sample_after_prefill(int lane, const SamplingParams& sampling,
                                      std::span<const int32_t> generated, int n_top) override {
        const cpu::LaneState& s = at(lane);
        if (!s.has_logits)
            throw Error("backend: lane " + std::to_string(lane) + " has no logits to sample from");
        return sample(s.logits, sampling, generated, n_top);
    }

    std::vector<DecodeResult> decode(std::span<const DecodeStep> steps) override {
        std::vector<cpu::RowSegment> segs;
        std::vector<int32_t> tokens;
        for (size_t i = 0; i < steps.size(); ++i) {
            cpu::LaneState& s = step_lane(steps, i, "decode");
            s.verify_count = 0;
            grow(s, 1);
            segs.push_back({&s, uint32_t(s.tokens.size()), 1, i});
            tokens.push_back(steps[i].token);
        }
        std::vector<float> all;
        forward_rows(segs, tokens, all);
        const uint32_t V = w_.config.vocab_size;
        std::vector<DecodeResult> results;
        for (size_t i = 0; i < steps.size(); ++i) {
            cpu::LaneState& s = *segs[i].lane;
            s.tokens.push_back(steps[i].token);
            s.logits.assign(all.begin() + i * V, all.begin() + (i + 1) * V);
            s.has_logits = true;
            results.push_back(sample(s.logits, steps[i].sampling, steps[i].generated,
                                     steps[i].n_top_logprobs));
        }
        if (mtp_active())
            mtp_catch_up(segs, {});
        return results;
    }

    std::vector<float> last_logits(int lane) const override {
        const cpu::LaneState& s = at(lane);
        if (!s.has_logits)
            throw Error("backend: lane " + std::to_string(lane) + " has no logits");
        return s.logits;
    }

    LaneImage save_lane(int lane) const override {
        const cpu::LaneState& s = at(lane);
        LaneImage img;
        img.tokens = s.tokens;
        img.kv_dtype = plan_.kv_dtype;
        const uint32_t n = uint32_t(s.tokens.size());
        std::span<uint8_t> kv = img.add_section(LaneSectionTag::Kv, plan_.lane_image_kv_bytes(n));
        const uint32_t n_full = w_.config.n_full_attention_layers();
        for_each_kv_row(n, 0, n_full, 0, [&](uint32_t fl, bool value, uint32_t pos, uint32_t h, size_t at) {
            std::memcpy(kv.data() + at, kv_.row(fl, value, s.pages, pos, h), kv_.row_bytes());
        });
        std::span<uint8_t> gdn = img.add_section(LaneSectionTag::Gdn, plan_.lane_image_gdn_bytes());
        std::memcpy(gdn.data(), s.conv.data(), s.conv.size() * sizeof(float));
        std::memcpy(gdn.data() + s.conv.size() * sizeof(float), s.recurrent.data(),
                    s.recurrent.size() * sizeof(float));
        if (mtp_active())
            save_mtp(s, img);
        set_rope_offset(img, s.rope_offset); // a multimodal prompt's positions (lane_image.h RopePosition)
        return img;
    }

    void restore_lane(int lane, const LaneImage& img) override {
        cpu::LaneState& s = at(lane);
        constexpr LaneSectionTag kRestorable[] = {LaneSectionTag::RopePosition};
        lane_image_check(img, plan_, kRestorable);
        const uint32_t n = uint32_t(img.tokens.size());
        const int64_t rope_offset = image_rope_offset(img);
        reset_lane(lane);
        s.rope_offset = rope_offset;
        kv_.reserve(s.pages, n);
        s.tokens = img.tokens;
        const uint32_t n_full = w_.config.n_full_attention_layers();
        for_each_kv_row(n, 0, n_full, 0, [&](uint32_t fl, bool value, uint32_t pos, uint32_t h, size_t at) {
            std::memcpy(kv_.row(fl, value, s.pages, pos, h), img.kv().data() + at, kv_.row_bytes());
        });
        std::memcpy(s.conv.data(), img.gdn().data(), s.conv.size() * sizeof(float));
        std::memcpy(s.recurrent.data(), img.gdn().data() + s.conv.size() * sizeof(float),
                    s.recurrent.size() * sizeof(float));
        s.has_logits = false;
        // Without an MtpKv section the head takes the lane up again from its next decode (drafts
        // come back empty until then; its KV rows below n are stale).
        if (!mtp_active() || !restore_mtp(s, img))
            s.mtp_length = n;
    }

    bool has_mtp() const override { return mtp_active(); }

    std::vector<std::vector<int32_t>> draft_mtp(std::span<const DraftRequest> requests,
                                                std::vector<std::vector<float>>* logits) override {
        if (!mtp_active())
            return Backend::draft_mtp(requests, logits);
        std::vector<cpu::LaneState*> lanes;
        for (size_t i = 0; i < requests.size(); ++i) {
            cpu::LaneState& s = step_lane(requests, i, "draft");
            lanes.push_back(&s);
            if (s.verify_count > 0 && s.verify_kept == 0) // never accepted: drafting keeps it all
                s.verify_count = 0;
            if (s.verify_count > 0 && !s.verify_mtp_saved) { // accepted: a smaller keep undoes the head
                s.verify_mtp_saved = true;
                s.verify_mtp_length = s.mtp_length;
                s.verify_mtp_hidden = s.mtp_hidden;
                s.verify_mtp_rope = s.mtp_rope;
            }
        }
        return mtp_.draft(lanes, requests, logits);
    }

    void verify(std::span<const VerifyStep> steps, std::vector<float>& logits) override;
    void accept_verified(int lane, uint32_t n_keep) override;

  private:
    // A prefill chunk, text or (with inputs) multimodal.
    void prefill_rows(int lane, std::span<const int32_t> tokens, const PrefillInputs* in, LogitsOut out,
                      std::vector<float>* logits) {
        cpu::LaneState& s = at(lane);
        if (tokens.empty())
            throw Error("backend: prefill with no tokens");
        s.verify_count = 0;
        const uint32_t start = uint32_t(s.tokens.size());
        grow(s, tokens.size());
        cpu::RowSegment seg{&s, start, uint32_t(tokens.size()), 0};
        if (in) {
            seg.positions = in->positions.data();
            seg.embedding_rows = in->embedding_rows.data();
            seg.embeddings = in->embeddings.data();
        }
        runner_.forward(std::span(&seg, 1), tokens);
        s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
        s.has_logits = false;
        if (mtp_active())
            mtp_.keep_hidden(std::span(&seg, 1));
        if (out != LogitsOut::None) // a middle chunk skips the output head
            prefill_logits(s, tokens.size(), out, logits);
        if (mtp_active()) { // after the output head: the head reuses the runner's rows
            s.mtp_chunk = in; // a placeholder's next-token input is its tower row
            s.mtp_chunk_start = start;
            mtp_catch_up(std::span(&seg, 1), {});
            s.mtp_chunk = nullptr;
        }
    }

    void prefill_logits(cpu::LaneState& s, size_t n, LogitsOut out, std::vector<float>* logits) {
        const uint32_t V = w_.config.vocab_size;
        std::vector<size_t> rows;
        if (out == LogitsOut::All) {
            rows.resize(n);
            std::iota(rows.begin(), rows.end(), size_t(0));
        }
        if (!rows.empty() && logits) {
            logits->resize(rows.size() * size_t(V));
            runner_.logits(rows, logits->data());
            s.logits.assign(logits->end() - V, logits->end());
        } else {
            const size_t last = n - 1;
            s.logits.resize(V);
            runner_.logits(std::span(&last, 1), s.logits.data());
            if (logits && out == LogitsOut::Last)
                *logits = s.logits;
        }
        s.has_logits = true;
    }

    bool mtp_active() const { return plan_.mtp; }

    // The main model over a step, its hidden rows handed to the MTP head, every row's logits.
    void forward_rows(std::span<const cpu::RowSegment> segs, std::span<const int32_t> tokens,
                      std::vector<float>& logits) {
        runner_.forward(segs, tokens);
        if (mtp_active())
            mtp_.keep_hidden(segs);
        std::vector<size_t> rows(tokens.size());
        std::iota(rows.begin(), rows.end(), size_t(0));
        logits.resize(rows.size() * size_t(w_.config.vocab_size));
        runner_.logits(rows, logits.data());
    }

    // Feeds the MTP head what these segments' lanes can give it (next_tokens: one per segment, the
    // token after the lane's last, or empty for none).
    void mtp_catch_up(std::span<const cpu::RowSegment> segs, std::span<const int32_t> next_tokens) {
        std::vector<cpu::LaneState*> lanes;
        std::vector<int32_t> next;
        for (size_t i = 0; i < segs.size(); ++i) {
            lanes.push_back(segs[i].lane);
            next.push_back(next_tokens.empty() ? -1 : next_tokens[i]);
        }
        mtp_.catch_up(lanes, next);
    }

    // The lane of item i of a batched step, which no earlier item may name.
    template <class Items> cpu::LaneState& step_lane(Items items, size_t i, const char* step) {
        for (size_t j = 0; j < i; ++j)
            if (items[j].lane == items[i].lane)
                throw Error("backend: lane " + std::to_string(items[i].lane) + " appears twice in one " +
                            step + " step");
        return at(items[i].lane);
    }

    cpu::LaneState& at(int lane) {
        if (lane < 0 || size_t(lane) >= lanes_.size())
            throw Error("backend: lane " + std::to_string(lane) + " out of range 0.." +
                        std::to_string(lanes_.size() - 1));
        return lanes_[size_t(lane)];
    }
    const cpu::LaneState& at(int lane) const { return const_cast<CpuBackend*>(this)->at(lane); }

    void grow(cpu::LaneState& s, size_t n) {
        const size_t total = s.tokens.size() + n;
        if (total > plan_.max_context)
            throw Error("backend: context full: " + std::to_string(total) + " tokens > max-context " +
                        std::to_string(plan_.max_context));
        kv_.reserve(s.pages, uint32_t(total));
    }

    // Visits the lane image's KV rows in layout order (memory_plan.h): layer, K then V, position, head.
    // Visits the KV rows of layers [layer_begin, layer_end) of the pool (the MTP layer is the one
    // after the full-attention layers) in lane-image order (memory_plan.h): layer, K then V,
    // position, head; `at` counts from `at0`.
    template <class Fn>
    void for_each_kv_row(uint32_t n, uint32_t layer_begin, uint32_t layer_end, size_t at0, Fn&& fn) const {
        const uint32_t nkv = w_.config.num_key_value_heads;
        size_t at = at0;
        for (uint32_t fl = layer_begin; fl < layer_end; ++fl)
            for (int value = 0; value < 2; ++value)
                for (uint32_t pos = 0; pos < n; ++pos)
                    for (uint32_t h = 0; h < nkv; ++h, at += kv_.row_bytes())
                        fn(fl, bool(value), pos, h, at);
    }

    // The MtpKv section (lane_image.h): u32 mtp_length m, u32 pending rows r, the MTP layer's K
    // then V rows of positions [0, m), then r hidden rows of H f32.
    void save_mtp(const cpu::LaneState& s, LaneImage& img) const {
        const uint32_t m = s.mtp_length, H = w_.config.hidden_size;
        const uint32_t r = uint32_t(s.mtp_hidden.size() / H);
        const uint32_t n_full = w_.config.n_full_attention_layers();
        const size_t rows_at = 8 + size_t(m) * plan_.kv_mtp_bytes_per_token;
        std::span<uint8_t> out = img.add_section(LaneSectionTag::MtpKv, rows_at + size_t(r) * H * sizeof(float),
                                                 /*required=*/false); // without it only drafts suffer
        std::memcpy(out.data(), &m, 4);
        std::memcpy(out.data() + 4, &r, 4);
        for_each_kv_row(m, n_full, n_full + 1, 8, [&](uint32_t fl, bool value, uint32_t pos, uint32_t h, size_t at) {
            std::memcpy(out.data() + at, kv_.row(fl, value, s.pages, pos, h), kv_.row_bytes());
        });
        std::memcpy(out.data() + rows_at, s.mtp_hidden.data(), s.mtp_hidden.size() * sizeof(float));
    }

    // Restores the head's state from an MtpKv section; false (nothing restored) when the image has
    // none. A section that does not fit the image is refused.
    bool restore_mtp(cpu::LaneState& s, const LaneImage& img) {
        const std::span<const uint8_t> in = img.section(LaneSectionTag::MtpKv);
        if (in.size() < 8)
            return false;
        uint32_t m = 0, r = 0;
        std::memcpy(&m, in.data(), 4);
        std::memcpy(&r, in.data() + 4, 4);
        const uint32_t H = w_.config.hidden_size, n_full = w_.config.n_full_attention_layers();
        const size_t rows_at = 8 + size_t(m) * plan_.kv_mtp_bytes_per_token;
        if (uint64_t(m) + r != img.tokens.size() || in.size() != rows_at + size_t(r) * H * sizeof(float))
            throw Error("backend: lane image MTP section of " + std::to_string(in.size()) + " bytes for " +
                        std::to_string(m) + " positions and " + std::to_string(r) +
                        " pending rows does not fit the image's " + std::to_string(img.tokens.size()) +
                        " tokens and the plan");
        for_each_kv_row(m, n_full, n_full + 1, 8, [&](uint32_t fl, bool value, uint32_t pos, uint32_t h, size_t at) {
            std::memcpy(kv_.row(fl, value, s.pages, pos, h), in.data() + at, kv_.row_bytes());
        });
        s.mtp_length = m;
        s.mtp_hidden.assign(reinterpret_cast<const float*>(in.data() + rows_at),
                            reinterpret_cast<const float*>(in.data() + rows_at) + size_t(r) * H);
        s.mtp_rope.clear(); // the pending rows' positions are not in the image: text positions
        for (uint32_t j = 0; j < r; ++j)
            s.mtp_rope.push_back(MropePosition::text(uint32_t(int64_t(m + j) + s.rope_offset)));
        return true;
    }

    DecodeResult sample(const std::vector<float>& logits, const SamplingParams& params,
                        std::span<const int32_t> generated, int n_top) const {
        std::vector<float> work = logits;
        DecodeResult r;
        r.token = sample_token(work, params, generated);
        const double lse = log_sum_exp(logits);
        r.logprob = float(double(logits[size_t(r.token)]) - lse);
        if (n_top > 0) {
            std::vector<int32_t> ids(logits.size());
            std::iota(ids.begin(), ids.end(), 0);
            const size_t k = std::min<size_t>(size_t(n_top), ids.size());
            std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
                return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
            });
            for (size_t i = 0; i < k; ++i)
                r.top_logprobs.push_back({ids[i], float(double(logits[ids[i]]) - lse)});
        }
        return r;
    }

    const ModelWeights& w_;
    const MemoryPlan plan_;
    ThreadPool pool_;
    cpu::KvStore kv_;
    cpu::ModelRunner runner_;
    cpu::MtpHead mtp_;
    std::vector<cpu::LaneState> lanes_;
};

void CpuBackend::verify(std::span<const VerifyStep> steps, std::vector<float>& logits) {
    if (plan_.max_draft_tokens == 0)
        return Backend::verify(steps, logits);
    std::vector<cpu::RowSegment> segs;
    std::vector<int32_t> tokens, first;
    for (size_t i = 0; i < steps.size(); ++i) {
        cpu::LaneState& s = step_lane(steps, i, "verify");
        const size_t T = steps[i].tokens.size();
        if (T < 1 || T > plan_.max_draft_tokens + 1)
            throw Error("backend: a verify step of " + std::to_string(T) + " tokens, the plan allows 1.." +
                        std::to_string(plan_.max_draft_tokens + 1));
        s.verify_count = 0;
        grow(s, T);
        segs.push_back({&s, uint32_t(s.tokens.size()), uint32_t(T), tokens.size(), true});
        tokens.insert(tokens.end(), steps[i].tokens.begin(), steps[i].tokens.end());
        first.push_back(steps[i].tokens[0]);
    }
    if (mtp_active()) // everything before the window, the window's first token being known now
        mtp_catch_up(segs, first);
    forward_rows(segs, tokens, logits);
    const size_t V = w_.config.vocab_size;
    for (size_t i = 0; i < steps.size(); ++i) {
        cpu::LaneState& s = *segs[i].lane;
        const auto window = logits.begin() + long(segs[i].row * V);
        s.verify_start = segs[i].start;
        s.verify_count = segs[i].n;
        s.verify_kept = 0;
        s.verify_mtp_saved = false;
        s.verify_logits.assign(window, window + long(segs[i].n * V));
        s.tokens.insert(s.tokens.end(), steps[i].tokens.begin(), steps[i].tokens.end());
        s.logits.assign(s.verify_logits.end() - long(V), s.verify_logits.end());
        s.has_logits = true;
    }
}

void CpuBackend::accept_verified(int lane, uint32_t n_keep) {
    cpu::LaneState& s = at(lane);
    if (s.verify_count == 0)
        throw Error("backend: lane " + std::to_string(lane) + " has no open verify window");
    const uint32_t held = s.verify_kept ? s.verify_kept : s.verify_count; // the window's tokens in the lane
    if (n_keep < 1 || n_keep > held)
        throw Error("backend: keep " + std::to_string(n_keep) + " of a " + std::to_string(held) +
                    "-token verify window (1.." + std::to_string(held) + ")");
    const size_t V = w_.config.vocab_size;
    if (n_keep < held) {
        if (s.verify_mtp_saved) { // drafted since the first accept: the head as that accept left it
            s.mtp_length = s.verify_mtp_length;
            s.mtp_hidden = s.verify_mtp_hidden;
            s.mtp_rope = s.verify_mtp_rope;
            s.verify_mtp_saved = false;
        }
        // The GDN state as it stood after the last kept token; attention KV only rewinds its length.
        const size_t conv = s.conv.size(), rec = s.recurrent.size(), at = n_keep - 1;
        std::copy_n(s.verify_conv.begin() + long(at * conv), conv, s.conv.begin());
        std::copy_n(s.verify_recurrent.begin() + long(at * rec), rec, s.recurrent.begin());
        const uint32_t length = s.verify_start + n_keep;
        s.tokens.resize(length);
        kv_.truncate(s.pages, length);
        if (mtp_active()) { // the pending hidden rows of the dropped positions go too
            s.mtp_hidden.resize(size_t(length - s.mtp_length) * w_.config.hidden_size);
            s.mtp_rope.resize(std::min<size_t>(s.mtp_rope.size(), length - s.mtp_length));
        }
        s.logits.assign(s.verify_logits.begin() + long(at * V), s.verify_logits.begin() + long(n_keep * V));
    }
    s.verify_kept = n_keep;
}

} // namespace

std::unique_ptr<Backend> make_cpu_backend(const ModelWeights& weights, const MemoryPlan& plan,
                                          const CpuBackendOptions& options) {
    return std::make_unique<CpuBackend>(weights, plan, options);
}

} // namespace ninfer::core
