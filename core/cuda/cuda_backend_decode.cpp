// ninfer::core - CudaBackend's decode steps (cuda_backend_impl.h): pipelined, sampled, graph-replayed.
#include "core/cuda/cuda_backend_impl.h"

#include "core/cpu/cpu_backend.h"
#include "core/util/error.h"
#include "ninfer/kernels/runner_ops.h"

#include <algorithm>
#include <numeric>

namespace ninfer::core::cuda_detail {
namespace {

// A plan's sampler variant (kSampleVariants, cuda_backend_impl.h).
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

} // namespace

DecodeResult CudaBackend::sample_after_prefill(int lane, const SamplingParams& sampling,
                                               std::span<const int32_t> generated, int n_top) {
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

std::vector<DecodeResult> CudaBackend::decode(std::span<const DecodeStep> steps) {
    if (!begun_.empty())
        throw Error("backend: decode while pipelined steps are outstanding");
    decode_begin(steps);
    return decode_end();
}

void CudaBackend::decode_sample(std::span<const DecodeStep> steps) {
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

void CudaBackend::begin_step(std::span<const DecodeStep> steps, bool sample_now) {
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

std::vector<DecodeResult> CudaBackend::decode_end() {
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

void CudaBackend::enqueue_decode(int n, const kernels::SamplePlan& plan, bool sample) {
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

cudaGraphExec_t CudaBackend::graph_for(int n, const kernels::SamplePlan& plan, bool sample) {
    cudaGraphExec_t& exec = graphs_[size_t(sample ? sample_variant(plan) : kForwardOnly)][size_t(n)];
    if (exec)
        return exec;
    exec = cuda::capture_graph(run_.stream(), [&] { enqueue_decode(n, plan, sample); }, "decode graph");
    return exec;
}

const std::vector<DecodeResult>& CudaBackend::results_of(Begun& b) {
    if (!b.results)
        b.results = sampler_.collect(b.slot, b.params);
    return *b.results;
}

kernels::SamplePlan CudaBackend::prepare_rows(Begun& b, std::span<const DecodeStep> st) {
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

void CudaBackend::sample_host_rows(Begun& b, std::span<const DecodeStep> st) {
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

} // namespace ninfer::core::cuda_detail
