// ninfer::core - CpuBackend: lanes, prefill/decode over ModelRunner, sampling, lane images.
#include "core/cpu/cpu_backend.h"

#include "core/cpu/forward.h"
#include "core/cpu/lane_state.h"
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
          runner_(w, plan_, kv_, pool_, cpu::ForwardOptions{o.gdn_chunked}), lanes_(plan.n_lanes) {
        for (cpu::LaneState& lane : lanes_) {
            lane.conv.assign(runner_.conv_floats(), 0.0f);
            lane.recurrent.assign(runner_.recurrent_floats(), 0.0f);
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
    }

    void prefill(int lane, std::span<const int32_t> tokens, LogitsOut out,
                 std::vector<float>* logits) override {
        cpu::LaneState& s = at(lane);
        if (tokens.empty())
            throw Error("backend: prefill with no tokens");
        const uint32_t start = uint32_t(s.tokens.size());
        grow(s, tokens.size());
        const cpu::RowSegment seg{&s, start, uint32_t(tokens.size()), 0};
        runner_.forward(std::span(&seg, 1), tokens);
        s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
        s.has_logits = false;
        if (out == LogitsOut::None)
            return; // a middle chunk: skip the output head
        const uint32_t V = w_.config.vocab_size;
        std::vector<size_t> rows;
        if (out == LogitsOut::All) {
            rows.resize(tokens.size());
            std::iota(rows.begin(), rows.end(), size_t(0));
        }
        if (!rows.empty() && logits) {
            logits->resize(rows.size() * size_t(V));
            runner_.logits(rows, logits->data());
            s.logits.assign(logits->end() - V, logits->end());
        } else {
            const size_t last = tokens.size() - 1;
            s.logits.resize(V);
            runner_.logits(std::span(&last, 1), s.logits.data());
            if (logits && out == LogitsOut::Last)
                *logits = s.logits;
        }
        s.has_logits = true;
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
            cpu::LaneState& s = at(steps[i].lane);
            for (size_t j = 0; j < i; ++j)
                if (steps[j].lane == steps[i].lane)
                    throw Error("backend: lane " + std::to_string(steps[i].lane) +
                                " appears twice in one decode step");
            grow(s, 1);
            segs.push_back({&s, uint32_t(s.tokens.size()), 1, i});
            tokens.push_back(steps[i].token);
        }
        runner_.forward(segs, tokens);
        const uint32_t V = w_.config.vocab_size;
        std::vector<size_t> rows(steps.size());
        std::iota(rows.begin(), rows.end(), size_t(0));
        std::vector<float> all(rows.size() * size_t(V));
        runner_.logits(rows, all.data());
        std::vector<DecodeResult> results;
        for (size_t i = 0; i < steps.size(); ++i) {
            cpu::LaneState& s = *segs[i].lane;
            s.tokens.push_back(steps[i].token);
            s.logits.assign(all.begin() + i * V, all.begin() + (i + 1) * V);
            s.has_logits = true;
            results.push_back(sample(s.logits, steps[i].sampling, steps[i].generated,
                                     steps[i].n_top_logprobs));
        }
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
        img.kv.resize(plan_.lane_image_kv_bytes(n));
        for_each_kv_row(n, [&](uint32_t fl, bool value, uint32_t pos, uint32_t h, size_t at) {
            std::memcpy(img.kv.data() + at, kv_.row(fl, value, s.pages, pos, h), kv_.row_bytes());
        });
        img.gdn.resize(plan_.lane_image_gdn_bytes());
        std::memcpy(img.gdn.data(), s.conv.data(), s.conv.size() * sizeof(float));
        std::memcpy(img.gdn.data() + s.conv.size() * sizeof(float), s.recurrent.data(),
                    s.recurrent.size() * sizeof(float));
        return img;
    }

    void restore_lane(int lane, const LaneImage& img) override {
        cpu::LaneState& s = at(lane);
        const uint32_t n = uint32_t(img.tokens.size());
        if (img.kv_dtype != plan_.kv_dtype)
            throw Error("backend: lane image KV dtype differs from the plan's");
        if (n > plan_.max_context)
            throw Error("backend: lane image of " + std::to_string(n) + " tokens exceeds max-context");
        if (img.kv.size() != plan_.lane_image_kv_bytes(n) || img.gdn.size() != plan_.lane_image_gdn_bytes())
            throw Error("backend: lane image sizes do not match the plan (kv " +
                        std::to_string(img.kv.size()) + " bytes, gdn " + std::to_string(img.gdn.size()) + ")");
        reset_lane(lane);
        kv_.reserve(s.pages, n);
        s.tokens = img.tokens;
        for_each_kv_row(n, [&](uint32_t fl, bool value, uint32_t pos, uint32_t h, size_t at) {
            std::memcpy(kv_.row(fl, value, s.pages, pos, h), img.kv.data() + at, kv_.row_bytes());
        });
        std::memcpy(s.conv.data(), img.gdn.data(), s.conv.size() * sizeof(float));
        std::memcpy(s.recurrent.data(), img.gdn.data() + s.conv.size() * sizeof(float),
                    s.recurrent.size() * sizeof(float));
        s.has_logits = false;
    }

  private:
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
    template <class Fn> void for_each_kv_row(uint32_t n, Fn&& fn) const {
        const uint32_t n_full = w_.config.n_full_attention_layers(), nkv = w_.config.num_key_value_heads;
        size_t at = 0;
        for (uint32_t fl = 0; fl < n_full; ++fl)
            for (int value = 0; value < 2; ++value)
                for (uint32_t pos = 0; pos < n; ++pos)
                    for (uint32_t h = 0; h < nkv; ++h, at += kv_.row_bytes())
                        fn(fl, bool(value), pos, h, at);
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
    std::vector<cpu::LaneState> lanes_;
};

} // namespace

std::unique_ptr<Backend> make_cpu_backend(const ModelWeights& weights, const MemoryPlan& plan,
                                          const CpuBackendOptions& options) {
    return std::make_unique<CpuBackend>(weights, plan, options);
}

} // namespace ninfer::core
