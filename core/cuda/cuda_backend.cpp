// ninfer::core - CudaBackend: lanes, paged KV bookkeeping, prefill, graph-replayed decode, lane images.
#include "core/cuda/cuda_backend.h"

#include "core/backend/prefill_inputs.h"
#include "core/cpu/cpu_backend.h"
#include "core/cuda/cuda_runner.h"
#include "core/cuda/gpu_sampler.h"
#include "core/cuda/lane_image.h"
#include "core/cuda/mtp_head.h"
#include "core/cuda/multimodal_rows.h"
#include "core/cuda/prefill_runner.h"
#include "core/cuda/verify_window.h"
#include "core/util/error.h"
#include "ninfer/kernels/device.h"
#include "ninfer/kernels/fault.h"
#include "ninfer/kernels/runner_ops.h"
#include "ninfer/kernels/sample.h"

#include <cstdlib>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <numeric>
#include <stdexcept>

namespace ninfer::core {

using cuda::cuda_check;
using cuda::kMaxStepTokens;

namespace {

using cuda::GpuSampler;

// Sampler variants captured per batch size: bit 0 some row draws, bit 1 some row wants top logprobs.
constexpr int kSampleVariants = 4;
int sample_variant(const kernels::SamplePlan& plan) { return (plan.draws ? 1 : 0) | (plan.top ? 2 : 0); }
// The graphs of steps begun by decode_begin_forward: the forward pass only (decode_sample samples).
constexpr int kForwardOnly = kSampleVariants;

// The CPU backend's sampler over host logits (penalties, logit bias, any top_k, top logprobs).
DecodeResult host_sample(const std::vector<float>& logits, const SamplingParams& params,
                         std::span<const int32_t> generated, int n_top) {
    std::vector<float> work = logits;
    DecodeResult r;
    r.token = sample_token(work, params, generated);
    const double lse = log_sum_exp(logits);
    r.logprob = float(double(logits[size_t(r.token)]) - lse);
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t k = std::min<size_t>(size_t(std::max(n_top, 0)), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (size_t i = 0; i < k; ++i)
        r.top_logprobs.push_back({ids[i], float(double(logits[ids[i]]) - lse)});
    return r;
}

// Chunks shorter than this run the decode kernels 8 tokens at a time: below it, dequantising every
// weight to bf16 for the GEMMs costs more than reading the stored weights once per 8 tokens.
constexpr size_t kMinGemmPrefillTokens = 16;

// Tokens per tensor-core prefill chunk: the plan's prefill chunk, at least 64 and at most 8192.
int prefill_tokens_for(uint32_t prefill_chunk) { return int(std::clamp<uint32_t>(prefill_chunk, 64, 8192)); }

struct Lane {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> pages;
    bool has_logits = false;
    int64_t rope_offset = 0; // next text position - token count (backend.h prefill_with)
};

class CudaBackend final : public Backend {
  public:
    CudaBackend(const ModelWeights& w, const MemoryPlan& plan, const CudaBackendOptions& o)
        : plan_(plan), options_(o), run_(w, plan, o.f32_activations), lanes_(size_t(plan.n_lanes)),
          sampler_(plan.n_lanes, run_.config().vocab_size, plan.max_context, run_.stream()),
          windows_(run_, plan, o.graphs),
          copier_(run_, plan), page_refs_(plan.kv_pages, 0) {
        for (uint32_t p = plan.kv_pages; p-- > 0;)
            free_.push_back(p);
        cuda_check(cudaMallocHost(&step_in_host_, GpuSampler::kSlots * 3 * kMaxStepTokens * 4), "pinned step inputs");
        cuda_check(cudaMallocHost(&page_rows_host_, uint64_t(GpuSampler::kSlots) * lanes_.size() * run_.max_pages() * 4),
                   "pinned page rows");
        kernels::sm_count(); // cached before any graph capture
        // The f32-activation check mode keeps prefill on its exact per-token path.
        if (!o.f32_activations)
            prefill_ = std::make_unique<cuda::PrefillRunner>(run_, prefill_tokens_for(plan.prefill_chunk));
        if (plan.mtp)
            mtp_ = std::make_unique<cuda::MtpHead>(run_, plan_);
    }
    ~CudaBackend() override {
        try {
            copier_.take_done(true);
        } catch (...) {
        }
        cudaStreamSynchronize(run_.stream()); // steps begun and never ended read the pinned inputs
        cudaFreeHost(step_in_host_);
        cudaFreeHost(page_rows_host_);
        for (const auto& by_size : graphs_)
            for (cudaGraphExec_t g : by_size)
                if (g)
                    cudaGraphExecDestroy(g);
    }

    std::string name() const override { return "cuda"; }
    int n_lanes() const override { return int(lanes_.size()); }
    uint32_t vocab_size() const override { return run_.config().vocab_size; }
    uint32_t max_context() const override { return plan_.max_context; }
    uint32_t lane_length(int lane) const override { return uint32_t(at(lane).tokens.size()); }

    void reset_lane(int lane) override {
        Lane& s = at(lane);
        windows_.close(lane);
        if (sliced_ && sliced_->lane == lane) // its slices enqueued so far are cleared below, in stream order
            sliced_.reset();
        for (auto it = s.pages.rbegin(); it != s.pages.rend(); ++it)
            release_page(*it);
        s.pages.clear();
        s.tokens.clear();
        s.has_logits = false;
        if (mtp_)
            mtp_->reset(lane);
        set_lane_rope_offset(lane, 0);
        const ModelConfig& c = run_.config();
        for (uint32_t g = 0; g < c.n_linear_attention_layers(); ++g) {
            const uint64_t ce = run_.conv_elems_per_lane();
            cuda_check(run_.f32_activations()
                           ? cudaMemsetAsync(run_.conv_state_f32(g) + lane * ce, 0, ce * 4, run_.stream())
                           : cudaMemsetAsync(run_.conv_state(g) + lane * ce, 0, ce * 2, run_.stream()),
                       "clearing a lane");
            cuda_check(cudaMemsetAsync(run_.recurrent_state(g) + lane * run_.recurrent_floats_per_lane(), 0,
                                       run_.recurrent_floats_per_lane() * 4, run_.stream()), "clearing a lane");
        }
    }

    void prefill(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) override {
        prefill_rows(lane, tokens, nullptr, out, logits);
    }
    void prefill_with(int lane, std::span<const int32_t> tokens, const PrefillInputs& in, LogitsOut out,
                      std::vector<float>* logits) override {
        check_prefill_inputs(tokens.size(), in, run_.config().hidden_size);
        const int64_t before = int64_t(at(lane).tokens.size()) + at(lane).rope_offset;
        prefill_rows(lane, tokens, &in, out, logits);
        set_lane_rope_offset(lane, next_text_position(in, before) - int64_t(at(lane).tokens.size()));
    }
    // A prefill; `mm` (a checked prefill_with chunk) puts its rows and M-RoPE positions in.
    void prefill_rows(int lane, std::span<const int32_t> tokens, const PrefillInputs* mm, LogitsOut out,
                      std::vector<float>* logits) {
        const uint32_t start = prefill_start(lane, tokens, out, logits);
        if (prefill_ && tokens.size() >= kMinGemmPrefillTokens)
            prefill_chunks(lane, start, tokens, mm, out, logits);
        else
            prefill_blocks(lane, start, tokens, mm, out, logits);
        prefill_done(lane, tokens, out, logits);
    }
    // A prefill's checks and page reservation (returns the lane's first new position), and its end.
    uint32_t prefill_start(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) {
        Lane& s = at(lane);
        if (tokens.empty())
            throw Error("backend: prefill with no tokens");
        if (sliced_)
            throw Error("backend: a prefill while a sliced prefill is pending");
        check_tokens(tokens);
        windows_.close(lane);
        const uint32_t start = uint32_t(s.tokens.size());
        grow(lane, tokens.size());
        if (out == LogitsOut::All && logits)
            logits->resize(tokens.size() * size_t(vocab_size()));
        return start;
    }
    void prefill_done(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) {
        Lane& s = at(lane);
        s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
        s.has_logits = out != LogitsOut::None;
        if (out == LogitsOut::Last && logits)
            *logits = last_logits(lane);
        cuda_check(cudaStreamSynchronize(run_.stream()), "prefill");
    }
    // Layer-sliced prefill (backend.h): a chunk that one PrefillRunner pass takes (text, 16 tokens
    // up to the runner's size, no per-position logits) is enqueued a few layers per
    // prefill_advance, with no host wait until its last slice; others run whole (the default).
    void prefill_begin(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) override {
        if (!prefill_ || out == LogitsOut::All || tokens.size() < kMinGemmPrefillTokens ||
            tokens.size() > size_t(prefill_->max_tokens()))
            return Backend::prefill_begin(lane, tokens, out, logits);
        const uint32_t start = prefill_start(lane, tokens, out, logits);
        sliced_ = SlicedChunk{lane, start, std::vector<int32_t>(tokens.begin(), tokens.end()), out, logits};
        prefill_->enqueue_begin(lane, start, sliced_->tokens);
    }
    bool prefill_advance(int max_layers) override {
        if (!sliced_)
            return Backend::prefill_advance(max_layers);
        if (prefill_->enqueue_layers(max_layers > 0 ? max_layers : int(run_.config().num_hidden_layers)) > 0)
            return false;
        const SlicedChunk c = std::move(*sliced_);
        sliced_.reset();
        prefill_->enqueue_end();
        chunk_outputs(c.lane, c.start, c.tokens, 0, int(c.tokens.size()), true, c.out, c.logits);
        prefill_done(c.lane, c.tokens, c.out, c.logits);
        return true;
    }
    bool prefill_pending() const override { return sliced_.has_value(); }

    DecodeResult sample_after_prefill(int lane, const SamplingParams& sampling, std::span<const int32_t> generated,
                                      int n_top) override {
        if (!at(lane).has_logits)
            throw Error("backend: lane " + std::to_string(lane) + " has no logits to sample from");
        if (!GpuSampler::samplable(sampling, n_top))
            return host_sample(last_logits(lane), sampling, generated, n_top);
        const kernels::SampleRowParams p = sampler_.prepare(lane, sampling, generated, n_top);
        sampler_.upload(std::span(&p, 1));
        sampler_.enqueue(run_.lane_logits() + lane * run_.logits_stride(), run_.logits_stride(), 1,
                         {!sampling.is_greedy(), n_top > 0});
        return sampler_.read(std::span(&p, 1))[0];
    }

    std::vector<DecodeResult> decode(std::span<const DecodeStep> steps) override {
        if (!begun_.empty())
            throw Error("backend: decode while pipelined steps are outstanding");
        decode_begin(steps);
        return decode_end();
    }

    void decode_begin(std::span<const DecodeStep> steps) override { begin_step(steps, true); }
    // The forward pass is enqueued now; decode_sample enqueues the sampling behind it, so the host
    // computes constrained rows' masks while the GPU runs the step.
    void decode_begin_forward(std::span<const DecodeStep> steps) override { begin_step(steps, false); }
    void decode_sample(std::span<const DecodeStep> steps) override {
        if (begun_.empty() || !begun_.back().awaiting_sample)
            throw Error("backend: decode_sample with no step begun by decode_begin_forward");
        Begun& b = begun_.back();
        check_same_rows(b.lanes, steps);
        const kernels::SamplePlan plan = prepare_rows(b, steps);
        sampler_.upload(b.params, b.slot);
        sampler_.enqueue(run_.logits(), run_.logits_stride(), int(steps.size()), plan);
        sampler_.enqueue_read(b.slot, plan.top);
        b.awaiting_sample = false;
        sample_host_rows(b, steps);
    }

    // Enqueues one step and returns: its inputs go up through pinned buffers (no wait for the step
    // in flight), rows whose token is kTokenOfLastStep copy it on the device from the previous
    // step's sampled ids, and its results come back into a pinned slot behind an event. A row
    // whose sampling needs the host (penalties read `generated`, host-sampled requests) waits for
    // the previous step's ids instead, and a step with a host-sampled row completes at once.
    // sample_now false: the forward pass only (decode_begin_forward).
    void begin_step(std::span<const DecodeStep> steps, bool sample_now) {
        const int n = int(steps.size());
        if (n < 1 || n > kMaxStepTokens)
            throw Error("backend: decode takes 1.." + std::to_string(kMaxStepTokens) + " lanes");
        if (!begun_.empty() && begun_.back().awaiting_sample)
            throw Error("backend: a decode step begun before decode_sample of the one begun by decode_begin_forward");
        if (begun_.size() >= 2)
            throw Error("backend: a third decode step begun before the first was ended");
        Begun* prev = begun_.empty() ? nullptr : &begun_.back();
        Begun b;
        b.slot = 1 + int(step_counter_++ % 2);
        std::vector<DecodeStep> st(steps.begin(), steps.end());
        std::vector<int> src(size_t(n), -1);
        for (int i = 0; i < n; ++i) {
            at(st[size_t(i)].lane);
            if (sliced_ && sliced_->lane == st[size_t(i)].lane)
                throw Error("backend: lane " + std::to_string(sliced_->lane) + " decodes while its prefill is sliced");
            for (int j = 0; j < i; ++j)
                if (st[size_t(j)].lane == st[size_t(i)].lane)
                    throw Error("backend: lane " + std::to_string(st[size_t(i)].lane) + " appears twice in one decode step");
            if (st[size_t(i)].token != kTokenOfLastStep) {
                check_tokens(std::span(&st[size_t(i)].token, 1));
                continue;
            }
            const int row = prev ? prev->row_of(st[size_t(i)].lane) : -1;
            if (row < 0)
                throw Error("backend: lane " + std::to_string(st[size_t(i)].lane) +
                            " asks for the token of a step it was not in");
            if (GpuSampler::samplable(st[size_t(i)].sampling, st[size_t(i)].n_top_logprobs) &&
                !GpuSampler::penalised(st[size_t(i)].sampling)) {
                src[size_t(i)] = row;
                continue;
            }
            const int32_t t = results_of(*prev)[size_t(row)].token; // waits for the previous step
            b.generated.emplace_back(st[size_t(i)].generated.begin(), st[size_t(i)].generated.end()).push_back(t);
            st[size_t(i)].generated = b.generated.back();
            st[size_t(i)].token = t;
        }
        if (mtp_) // a lane decoding without drafts: the head catches up before its ring wraps
            for (const DecodeStep& d : st)
                mtp_->catch_up_behind(d.lane, at(d.lane).tokens);
        int32_t* in = step_in_host_ + size_t(b.slot) * 3 * kMaxStepTokens;
        std::fill(in, in + 3 * kMaxStepTokens, 0);
        for (int i = 0; i < n; ++i) {
            grow(st[size_t(i)].lane, 1, b.slot);
            in[i] = src[size_t(i)] >= 0 ? 0 : st[size_t(i)].token;
            in[kMaxStepTokens + i] = st[size_t(i)].lane;
            in[2 * kMaxStepTokens + i] = int32_t(at(st[size_t(i)].lane).tokens.size());
        }
        kernels::SamplePlan plan{false, false};
        if (sample_now) // after every check: prepare() advances the lanes' count mirrors
            plan = prepare_rows(b, st);
        cuda_check(cudaMemcpyAsync(run_.step_in(), in, 3 * kMaxStepTokens * 4, cudaMemcpyHostToDevice, run_.stream()),
                   "step inputs");
        for (int i = 0; i < n; ++i)
            if (src[size_t(i)] >= 0)
                cuda_check(cudaMemcpyAsync(run_.step_in() + i, sampler_.last_ids() + src[size_t(i)], 4,
                                           cudaMemcpyDeviceToDevice, run_.stream()), "step inputs");
        if (sample_now)
            sampler_.upload(b.params, b.slot);
        if (options_.graphs)
            cuda_check(cudaGraphLaunch(graph_for(n, plan, sample_now), run_.stream()), "decode graph");
        else
            enqueue_decode(n, plan, sample_now);
        if (sample_now)
            sampler_.enqueue_read(b.slot, plan.top);
        b.awaiting_sample = !sample_now;
        for (int i = 0; i < n; ++i) {
            Lane& s = at(st[size_t(i)].lane);
            windows_.close(st[size_t(i)].lane);
            b.lanes.push_back(st[size_t(i)].lane);
            if (src[size_t(i)] >= 0) // the id arrives with the previous step's results
                prev->feeds.push_back({st[size_t(i)].lane, s.tokens.size(), src[size_t(i)]});
            s.tokens.push_back(src[size_t(i)] >= 0 ? -1 : st[size_t(i)].token);
            s.has_logits = true;
        }
        begun_.push_back(std::move(b));
        if (sample_now)
            sample_host_rows(begun_.back(), st);
    }

    std::vector<DecodeResult> decode_end() override {
        if (begun_.empty())
            throw Error("backend: decode_end with no step begun");
        if (begun_.front().awaiting_sample)
            throw Error("backend: decode_end before decode_sample of the step begun by decode_begin_forward");
        std::vector<DecodeResult> r = results_of(begun_.front());
        for (const Feed& f : begun_.front().feeds) { // the next step's ids, known now
            Lane& s = at(f.lane);
            if (f.index < s.tokens.size() && s.tokens[f.index] == -1)
                s.tokens[f.index] = r[size_t(f.row)].token;
        }
        begun_.pop_front();
        return r;
    }

    std::vector<float> last_logits(int lane) const override {
        if (!at(lane).has_logits)
            throw Error("backend: lane " + std::to_string(lane) + " has no logits");
        std::vector<float> out(vocab_size());
        cuda_check(cudaMemcpyAsync(out.data(), run_.lane_logits() + lane * run_.logits_stride(), out.size() * 4,
                                   cudaMemcpyDeviceToHost, run_.stream()), "reading logits");
        cuda_check(cudaStreamSynchronize(run_.stream()), "reading logits");
        return out;
    }

    LaneImage save_lane(int lane) const override;

    bool has_mtp() const override { return mtp_ != nullptr; }
    std::vector<std::vector<int32_t>> draft_mtp(std::span<const DraftRequest> requests,
                                                std::vector<std::vector<float>>* logits) override {
        if (!mtp_)
            return Backend::draft_mtp(requests, logits);
        if (!begun_.empty())
            throw Error("backend: draft_mtp while pipelined decode steps are outstanding");
        std::vector<std::span<const int32_t>> tokens;
        for (size_t i = 0; i < requests.size(); ++i) {
            for (size_t j = 0; j < i; ++j)
                if (requests[j].lane == requests[i].lane)
                    throw Error("backend: lane " + std::to_string(requests[i].lane) + " appears twice in one draft step");
            tokens.push_back(at(requests[i].lane).tokens);
        }
        return mtp_->draft(requests, tokens, [this](int lane, size_t total) {
            grow(lane, total - std::min(total, at(lane).tokens.size()));
        }, logits);
    }
    void restore_lane(int lane, const LaneImage& image) override;
    // Verify windows (core/cuda/verify_window.h): lanes' windows in forwards of up to 8 rows.
    void verify(std::span<const VerifyStep> steps, std::vector<float>& logits) override;
    // The greedy picks on the device: the ids and the wanted lanes' rows alone come back.
    void verify_greedy(std::span<const VerifyStep> steps, std::span<const uint8_t> want_rows,
                       std::vector<float>& logits, std::vector<int32_t>& ids) override;
    void accept_verified(int lane, uint32_t n_keep) override;

    // The lane's GDN state and page row are snapshotted in stream order now; its pages stay out of
    // reuse until the copier thread has moved the image to host memory (lane_image.h).
    void save_lane_async(int lane, std::function<void(LaneImage)> done) override {
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
    void poll_saves(bool wait) override {
        finish_saves(wait);
        std::vector<std::pair<std::function<void(LaneImage)>, LaneImage>> ready;
        ready.swap(ready_saves_);
        for (auto& [done, image] : ready)
            done(std::move(image));
    }
    bool saves_in_flight() const override { return !pending_saves_.empty() || !ready_saves_.empty(); }
    bool can_save_async() const override { return copier_.in_flight() < cuda::LaneImageCopier::kSaveSlots; }
    // Test-only (NINFER_FAULT): a real sticky fault (kernels/fault.h), thrown by cuda_check as a
    // step's own check would throw it.
    void inject_fault(const std::string& what) override {
        cuda_check(kernels::illegal_write(run_.stream()), what + ": launching the faulting kernel");
        cuda_check(cudaStreamSynchronize(run_.stream()), what);
        throw Error(Errc::Internal, "cuda: " + what + ": the faulting kernel ran without an error");
    }

  private:
    // verify's checks and forwards: the windows are open, their rows and ids on the device.
    size_t enqueue_verify(std::span<const VerifyStep> steps);
    // Tensor-core prefill (PrefillRunner) in chunks of its size; logits through the decode head.
    void prefill_chunks(int lane, uint32_t start, std::span<const int32_t> tokens, const PrefillInputs* mm,
                        LogitsOut out, std::vector<float>* logits) {
        for (size_t b = 0; b < tokens.size(); b += size_t(prefill_->max_tokens())) {
            const int n = int(std::min<size_t>(size_t(prefill_->max_tokens()), tokens.size() - b));
            const PrefillInputs part = mm ? cuda::inputs_part(*mm, b, size_t(n)) : PrefillInputs{};
            prefill_->enqueue_forward(lane, start + uint32_t(b), tokens.subspan(b, size_t(n)), mm ? &part : nullptr);
            chunk_outputs(lane, start, tokens, b, n, b + size_t(n) == tokens.size(), out, logits, mm ? &part : nullptr);
        }
    }
    // After a PrefillRunner pass over tokens [b, b + n) of a prefill call (`last`: its last pass):
    // the logits asked for, through the decode head, and the MTP head's catch-up (mm: the pass's
    // prefill_with inputs, or null).
    void chunk_outputs(int lane, uint32_t start, std::span<const int32_t> tokens, size_t b, int n, bool last,
                       LogitsOut out, std::vector<float>* logits, const PrefillInputs* mm = nullptr) {
        if (out == LogitsOut::All) {
            for (int r = 0; r < n; r += kMaxStepTokens) {
                const int rows = std::min(kMaxStepTokens, n - r);
                prefill_->stage_rows(r, rows);
                take_logits(lane, 0, rows, b + size_t(r), last && r + rows == n, out, logits);
            }
        } else if (out == LogitsOut::Last && last) {
            prefill_->stage_rows(n - 1, 1);
            take_logits(lane, 0, 1, b + size_t(n - 1), true, out, logits);
        }
        if (mtp_) // after the logits: the head reuses the runner's step rows
            mtp_->take_prefill(lane, at(lane).tokens, tokens, start + uint32_t(b), n, prefill_->final_rows_f32(),
                               prefill_->row_stride(), prefill_.get(), mm);
    }

    // The decode kernels over blocks of up to 8 consecutive tokens of the lane (GDN token by token).
    void prefill_blocks(int lane, uint32_t start, std::span<const int32_t> tokens, const PrefillInputs* mm,
                        LogitsOut out, std::vector<float>* logits) {
        for (size_t b = 0; b < tokens.size(); b += kMaxStepTokens) {
            const int n = int(std::min<size_t>(kMaxStepTokens, tokens.size() - b));
            std::vector<int32_t> in(3 * kMaxStepTokens, 0);
            for (int i = 0; i < n; ++i) {
                in[i] = tokens[b + i];
                in[kMaxStepTokens + i] = lane;
                in[2 * kMaxStepTokens + i] = int32_t(start + b + i);
            }
            upload_step(in);
            const PrefillInputs part = mm ? cuda::inputs_part(*mm, b, size_t(n)) : PrefillInputs{};
            run_.enqueue_forward(n, true, mm ? &part : nullptr);
            take_logits(lane, 0, n, b, b + n == tokens.size(), out, logits);
            if (mtp_)
                mtp_->take_prefill(lane, at(lane).tokens, tokens, start + uint32_t(b), n, nullptr, 0, nullptr,
                                   mm ? &part : nullptr);
        }
    }

    // Logits of step rows [row, row + n), which hold prompt tokens first_token.. of this prefill call:
    // with All, every row's logits go to logits (if given) and the last block's last row becomes the
    // lane's logits; with Last, only the call's last row is computed (when `last`), kept for the lane.
    void take_logits(int lane, int row, int n, size_t first_token, bool last, LogitsOut out,
                     std::vector<float>* logits) {
        const uint32_t V = vocab_size();
        if (out == LogitsOut::All) {
            run_.enqueue_head(row, n);
            if (logits)
                cuda_check(cudaMemcpy2DAsync(logits->data() + first_token * V, V * 4, run_.logits(),
                                             run_.logits_stride() * 4, V * 4, n, cudaMemcpyDeviceToHost,
                                             run_.stream()), "reading logits");
            if (last)
                keep_lane_logits(lane, n - 1);
        } else if (out == LogitsOut::Last && last) {
            run_.enqueue_head(row + n - 1, 1);
            keep_lane_logits(lane, 0);
        }
    }

    Lane& at(int lane) {
        if (lane < 0 || size_t(lane) >= lanes_.size())
            throw Error("backend: lane " + std::to_string(lane) + " out of range 0.." + std::to_string(lanes_.size() - 1));
        return lanes_[size_t(lane)];
    }
    const Lane& at(int lane) const { return const_cast<CudaBackend*>(this)->at(lane); }

    void check_tokens(std::span<const int32_t> tokens) const {
        for (int32_t t : tokens)
            if (t < 0 || uint32_t(t) >= vocab_size())
                throw Error("backend: token id " + std::to_string(t) + " is outside the vocabulary");
    }

    // A page leaves the free list while a lane or a save in flight holds it.
    void release_page(uint32_t page) {
        if (page_refs_[page] > 0 && --page_refs_[page] == 0)
            free_.push_back(page);
    }
    // Saves the copier has finished: their pages go back, their images wait for poll_saves.
    void finish_saves(bool wait) {
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

    // Grows the lane's page table to hold n more tokens and uploads its row: synchronously, or
    // (slot > 0, a pipelined step) through that slot's pinned row, in stream order.
    void grow(int lane, size_t n, int slot = 0) {
        Lane& s = at(lane);
        const size_t total = s.tokens.size() + n;
        if (total > plan_.max_context)
            throw Error("backend: context full: " + std::to_string(total) + " tokens > max-context " +
                        std::to_string(plan_.max_context));
        const size_t need = (total + kKvPageTokens - 1) / kKvPageTokens;
        if (need > s.pages.size() + free_.size() && !pending_saves_.empty())
            finish_saves(true); // pages held by saves in flight come back once they are copied
        if (need > s.pages.size() + free_.size())
            throw Error("backend: KV pool full: " + std::to_string(need - s.pages.size()) + " more pages needed, " +
                        std::to_string(free_.size()) + " free");
        if (need <= s.pages.size()) // a draft may have reserved pages ahead (MtpHead::draft)
            return;
        while (s.pages.size() < need) {
            s.pages.push_back(free_.back());
            page_refs_[free_.back()] = 1;
            free_.pop_back();
        }
        upload_page_table(lane, slot);
    }
    void upload_page_table(int lane, int slot = 0) {
        const Lane& s = at(lane);
        if (slot > 0) {
            int32_t* row = page_rows_host_ + (size_t(slot) * lanes_.size() + size_t(lane)) * size_t(run_.max_pages());
            std::copy(s.pages.begin(), s.pages.end(), row);
            cuda_check(cudaMemcpyAsync(run_.page_table() + size_t(lane) * run_.max_pages(), row, s.pages.size() * 4,
                                       cudaMemcpyHostToDevice, run_.stream()), "page table");
            return;
        }
        std::vector<int32_t> row(s.pages.begin(), s.pages.end());
        cuda_check(cudaMemcpyAsync(run_.page_table() + size_t(lane) * run_.max_pages(), row.data(), row.size() * 4,
                                   cudaMemcpyHostToDevice, run_.stream()), "page table");
        cuda_check(cudaStreamSynchronize(run_.stream()), "page table");
    }
    void upload_step(const std::vector<int32_t>& in) {
        cuda_check(cudaMemcpyAsync(run_.step_in(), in.data(), in.size() * 4, cudaMemcpyHostToDevice, run_.stream()),
                   "step inputs");
        cuda_check(cudaStreamSynchronize(run_.stream()), "step inputs");
    }
    // The lane's RoPE offset, here and in the runner's copy every attention prep reads.
    void set_lane_rope_offset(int lane, int64_t offset) {
        Lane& s = at(lane);
        if (s.rope_offset == offset)
            return;
        s.rope_offset = offset;
        if (mtp_) // the head's text positions take it too (MtpHead::set_rope_offset)
            mtp_->set_rope_offset(lane, offset);
        const int32_t v = int32_t(offset);
        cuda_check(cudaMemcpyAsync(run_.rope_offsets() + lane, &v, 4, cudaMemcpyHostToDevice, run_.stream()),
                   "RoPE offset");
        cuda_check(cudaStreamSynchronize(run_.stream()), "RoPE offset");
    }
    void keep_lane_logits(int lane, int row) {
        cuda_check(cudaMemcpyAsync(run_.lane_logits() + lane * run_.logits_stride(),
                                   run_.logits() + row * run_.logits_stride(), vocab_size() * 4,
                                   cudaMemcpyDeviceToDevice, run_.stream()), "lane logits");
    }

    void enqueue_decode(int n, const kernels::SamplePlan& plan, bool sample) {
        run_.enqueue_forward(n, false);
        if (mtp_)
            mtp_->enqueue_keep_step_rows(n);
        run_.enqueue_head(0, n);
        cuda_check(kernels::scatter_rows(run_.logits(), run_.logits_stride(), run_.step_in() + kMaxStepTokens,
                                         run_.lane_logits(), run_.logits_stride(), vocab_size(), n, run_.stream()),
                   "lane logits");
        if (sample)
            sampler_.enqueue(run_.logits(), run_.logits_stride(), n, plan);
    }
    cudaGraphExec_t graph_for(int n, const kernels::SamplePlan& plan, bool sample) {
        cudaGraphExec_t& exec = graphs_[size_t(sample ? sample_variant(plan) : kForwardOnly)][size_t(n)];
        if (exec)
            return exec;
        cudaGraph_t graph = nullptr;
        cuda_check(cudaStreamBeginCapture(run_.stream(), cudaStreamCaptureModeThreadLocal), "graph capture");
        try {
            enqueue_decode(n, plan, sample);
        } catch (...) {
            cudaStreamEndCapture(run_.stream(), &graph);
            if (graph)
                cudaGraphDestroy(graph);
            throw;
        }
        cuda_check(cudaStreamEndCapture(run_.stream(), &graph), "graph capture");
        const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        cuda_check(err, "graph instantiation");
        return exec;
    }
    // A step begun and not yet ended: its rows' lanes and parameters, its results once collected,
    // and where the next step fed a lane this step's sample (patched into the lane's ids at the end).
    struct Feed {
        int lane = 0;
        size_t index = 0;
        int row = 0;
    };
    struct Begun {
        int slot = 1;
        std::vector<int> lanes;
        std::vector<kernels::SampleRowParams> params;
        std::deque<std::vector<int32_t>> generated; // rows' histories with the previous step's id
        std::optional<std::vector<DecodeResult>> results;
        std::vector<Feed> feeds;
        bool awaiting_sample = false; // begun by decode_begin_forward, decode_sample not yet called
        int row_of(int lane) const {
            for (size_t i = 0; i < lanes.size(); ++i)
                if (lanes[i] == lane)
                    return int(i);
            return -1;
        }
    };
    const std::vector<DecodeResult>& results_of(Begun& b) {
        if (!b.results)
            b.results = sampler_.collect(b.slot, b.params);
        return *b.results;
    }
    // The rows' sampler parameters (prepare() enqueues their count, bias and mask uploads).
    kernels::SamplePlan prepare_rows(Begun& b, std::span<const DecodeStep> st) {
        kernels::SamplePlan plan{false, false};
        b.params.assign(st.size(), kernels::SampleRowParams{});
        for (size_t i = 0; i < st.size(); ++i) {
            const DecodeStep& d = st[i];
            if (!GpuSampler::samplable(d.sampling, d.n_top_logprobs))
                continue;
            b.params[i] = sampler_.prepare(d.lane, d.sampling, d.generated, d.n_top_logprobs, b.slot);
            plan.draws |= !d.sampling.is_greedy();
            plan.top |= d.n_top_logprobs > 0;
        }
        return plan;
    }
    // A step with a host-sampled row completes now: the lanes' logits are this step's only until
    // the next one begins.
    void sample_host_rows(Begun& b, std::span<const DecodeStep> st) {
        const bool host_rows = std::any_of(st.begin(), st.end(), [](const DecodeStep& d) {
            return !GpuSampler::samplable(d.sampling, d.n_top_logprobs);
        });
        if (!host_rows)
            return;
        std::vector<DecodeResult> r = sampler_.collect(b.slot, b.params);
        for (size_t i = 0; i < st.size(); ++i) {
            const DecodeStep& d = st[i];
            if (!GpuSampler::samplable(d.sampling, d.n_top_logprobs))
                r[i] = host_sample(last_logits(d.lane), d.sampling, d.generated, d.n_top_logprobs);
        }
        b.results = std::move(r);
    }

    MemoryPlan plan_;
    CudaBackendOptions options_;
    cuda::Runner run_;
    std::vector<Lane> lanes_;
    GpuSampler sampler_;
    cuda::VerifyWindows windows_;
    std::vector<uint32_t> free_;
    std::array<std::array<cudaGraphExec_t, kMaxStepTokens + 1>, kSampleVariants + 1> graphs_{};
    std::unique_ptr<cuda::PrefillRunner> prefill_;
    // The sliced prefill's chunk between prefill_begin and its last prefill_advance.
    struct SlicedChunk {
        int lane = 0;
        uint32_t start = 0;
        std::vector<int32_t> tokens;
        LogitsOut out = LogitsOut::None;
        std::vector<float>* logits = nullptr;
    };
    std::optional<SlicedChunk> sliced_;
    std::unique_ptr<cuda::MtpHead> mtp_; // plan.mtp only
    // Declared after run_ and sampler_: its thread stops (and its copies end) before they go.
    mutable cuda::LaneImageCopier copier_;
    std::deque<Begun> begun_;
    uint64_t step_counter_ = 0;
    int32_t* step_in_host_ = nullptr;  // pinned [GpuSampler::kSlots][3 * kMaxStepTokens]
    int32_t* page_rows_host_ = nullptr; // pinned [GpuSampler::kSlots][n_lanes][max_pages]
    std::vector<uint16_t> page_refs_; // holders of each KV page: its lane, saves in flight
    std::vector<std::pair<uint64_t, std::function<void(LaneImage)>>> pending_saves_;
    std::vector<std::pair<std::function<void(LaneImage)>, LaneImage>> ready_saves_;
};

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

size_t CudaBackend::enqueue_verify(std::span<const VerifyStep> steps) {
    if (!begun_.empty())
        throw Error("backend: verify while pipelined decode steps are outstanding");
    size_t rows = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
        at(steps[i].lane);
        for (size_t j = 0; j < i; ++j)
            if (steps[j].lane == steps[i].lane)
                throw Error("backend: lane " + std::to_string(steps[i].lane) + " appears twice in one verify");
        const size_t T = steps[i].tokens.size();
        if (T < 1 || T > plan_.max_draft_tokens + 1)
            throw Error("backend: a verify step of " + std::to_string(T) + " tokens, the plan allows 1.." +
                        std::to_string(plan_.max_draft_tokens + 1));
        check_tokens(steps[i].tokens);
        rows += T;
    }
    for (const VerifyStep& st : steps)
        grow(st.lane, st.tokens.size());
    std::vector<cuda::VerifyWindows::Request> requests;
    for (const VerifyStep& st : steps) {
        if (mtp_) // a lane verifying n-gram drafts on a plan with the head: its ring must not wrap
            mtp_->catch_up_behind(st.lane, at(st.lane).tokens);
        windows_.close(st.lane);
        requests.push_back({st.lane, uint32_t(at(st.lane).tokens.size()), st.tokens});
    }
    windows_.enqueue(requests, [this](int n) {
        if (mtp_) // the windows' hidden rows wait for the head's next catch-up, as a decode step's
            mtp_->enqueue_keep_step_rows(n);
    });
    for (const VerifyStep& st : steps) {
        Lane& s = at(st.lane);
        s.tokens.insert(s.tokens.end(), st.tokens.begin(), st.tokens.end());
        s.has_logits = true;
    }
    return rows;
}

void CudaBackend::verify(std::span<const VerifyStep> steps, std::vector<float>& logits) {
    if (plan_.max_draft_tokens == 0)
        return Backend::verify(steps, logits);
    const size_t V = vocab_size();
    logits.resize(enqueue_verify(steps) * V);
    size_t row = 0;
    for (const VerifyStep& st : steps) {
        windows_.read_rows(st.lane, logits.data() + row * V);
        row += st.tokens.size();
    }
    cuda_check(cudaStreamSynchronize(run_.stream()), "verify");
}

void CudaBackend::verify_greedy(std::span<const VerifyStep> steps, std::span<const uint8_t> want_rows,
                                std::vector<float>& logits, std::vector<int32_t>& ids) {
    if (plan_.max_draft_tokens == 0 || want_rows.size() != steps.size())
        return Backend::verify_greedy(steps, want_rows, logits, ids);
    const size_t V = vocab_size();
    size_t wanted = 0;
    for (size_t i = 0; i < steps.size(); ++i) wanted += want_rows[i] ? steps[i].tokens.size() : 0;
    const size_t rows = enqueue_verify(steps);
    logits.resize(wanted * V);
    size_t row = 0;
    for (size_t i = 0; i < steps.size(); ++i)
        if (want_rows[i]) {
            windows_.read_rows(steps[i].lane, logits.data() + row * V);
            row += steps[i].tokens.size();
        }
    windows_.read_ids();
    cuda_check(cudaStreamSynchronize(run_.stream()), "verify");
    ids.clear();
    ids.reserve(rows);
    for (const VerifyStep& st : steps) ids.insert(ids.end(), windows_.ids(st.lane), windows_.ids(st.lane) + st.tokens.size());
}

void CudaBackend::accept_verified(int lane, uint32_t n_keep) {
    Lane& s = at(lane);
    const uint32_t count = windows_.count(lane);
    if (count == 0)
        throw Error("backend: lane " + std::to_string(lane) + " has no open verify window");
    if (n_keep < 1 || n_keep > count)
        throw Error("backend: keep " + std::to_string(n_keep) + " of a " + std::to_string(count) +
                    "-token verify window (1.." + std::to_string(count) + ")");
    if (n_keep < count) { // the GDN state and logits of the last kept token; KV only rewinds its length
        const size_t length = windows_.start(lane) + n_keep;
        windows_.rollback(lane, n_keep);
        s.tokens.resize(length);
        for (const size_t need = (length + kKvPageTokens - 1) / kKvPageTokens; s.pages.size() > need;) {
            release_page(s.pages.back());
            s.pages.pop_back();
        }
    }
    windows_.close(lane);
}

} // namespace

CudaBackendOptions cuda_backend_options_from_env(std::string* note) {
    CudaBackendOptions options;
    try {
        options.tuning = kernels::kernel_tuning_from_env();
    } catch (const std::invalid_argument& e) {
        throw Error(std::string("cuda: ") + e.what());
    }
    const std::string set = kernels::kernel_tuning_describe(options.tuning);
    if (note) *note = set.empty() ? std::string() : "cuda: kernel tuning from the environment (A/B timing): " + set;
    return options;
}

std::unique_ptr<Backend> make_cuda_backend(const ModelWeights& weights, const MemoryPlan& plan,
                                           const CudaBackendOptions& options) {
    const std::string why = cuda_unavailable_reason();
    if (!why.empty())
        throw Error("cuda: --device cuda is unavailable: " + why);
    kernels::kernel_tuning_apply(options.tuning); // before the upload and any launch
    return std::make_unique<CudaBackend>(weights, plan, options);
}

std::string cuda_unavailable_reason() {
    const kernels::CudaProbe p = kernels::cuda_probe();
    return p.ok ? std::string() : p.reason;
}

uint64_t cuda_backend_workspace_bytes(const ModelConfig& config, const MemoryRequest& request) {
    return cuda::PrefillRunner::workspace_bytes(config, prefill_tokens_for(request.prefill_chunk)) +
           cuda::LaneImageCopier::device_bytes(config, request.mtp) +
           (request.mtp ? cuda::MtpHead::device_bytes(config, request.max_concurrency, request.max_draft_tokens) : 0);
}

uint64_t cuda_default_margin(uint64_t available_bytes) {
    return std::max<uint64_t>(1ull << 30, available_bytes / 20);
}

uint64_t cuda_free_bytes() {
    size_t free_b = 0, total = 0;
    if (!cuda_unavailable_reason().empty() || cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        return 0;
    return free_b;
}

} // namespace ninfer::core
