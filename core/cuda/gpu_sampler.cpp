// ninfer::core - GpuSampler: the lanes' count and bias rows, kernels::sample calls and their results.
#include "core/cuda/gpu_sampler.h"

#include "core/backend/token_constraint.h"
#include "core/cuda/cuda_runner.h"
#include "core/util/error.h"

#include <algorithm>
#include <cstring>

namespace ninfer::core::cuda {

static_assert(kMaxStepTokens <= 8, "GpuSampler's result words hold 8 rows");

GpuSampler::GpuSampler(int n_lanes, uint32_t vocab, uint32_t max_history, cudaStream_t stream)
    : vocab_(vocab), max_history_(std::max(max_history, vocab)), stream_(stream), lanes_(size_t(n_lanes)) {
    const uint64_t cells = uint64_t(n_lanes) * vocab;
    params_ = arena_.alloc_n<kernels::SampleRowParams>(kRows, "sampling parameters");
    out_ = arena_.alloc_n<int32_t>(kOutWords, "sampled ids");
    workspace_ = arena_.alloc_n<uint8_t>(kernels::sample_workspace_bytes(int(kRows), int(vocab)), "sampler workspace");
    counts_ = arena_.alloc_n<int32_t>(cells, "sampler token counts");
    bias_ = arena_.alloc_n<float>(cells, "sampler logit bias");
    uploads_ = arena_.alloc_n<int32_t>(max_history_, "sampler uploads");
    bias_values_ = arena_.alloc_n<float>(vocab, "sampler uploads");
    cuda_check(cudaMemsetAsync(counts_, 0, cells * 4, stream_), "sampler token counts");
    last_ids_ = arena_.alloc_n<int32_t>(kRows, "last sampled ids");
    cuda_check(cudaMallocHost(&out_host_, kSlots * kOutWords * 4), "pinned result buffer");
    cuda_check(cudaMallocHost(&params_host_, kSlots * kRows * sizeof(kernels::SampleRowParams)), "pinned parameters");
    mask_words_ = token_mask_words(vocab);
    mask_ = arena_.alloc_n<uint32_t>(size_t(n_lanes) * mask_words_, "sampler token masks");
    cuda_check(cudaMallocHost(&mask_host_, size_t(kSlots) * size_t(n_lanes) * mask_words_ * 4), "pinned token masks");
    for (cudaEvent_t& e : read_done_)
        cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "sampler events");
}

GpuSampler::~GpuSampler() {
    for (cudaEvent_t e : read_done_)
        cudaEventDestroy(e);
    cudaFreeHost(params_host_);
    cudaFreeHost(mask_host_);
    cudaFreeHost(out_host_);
}

bool GpuSampler::samplable(const SamplingParams& p, int n_top) {
    if (n_top < 0 || n_top > kernels::kSampleMaxTopLogprobs)
        return false;
    if (p.logit_bias.size() < 2)
        return true;
    std::vector<int32_t> ids;
    for (const auto& [id, bias] : p.logit_bias)
        ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    return std::adjacent_find(ids.begin(), ids.end()) == ids.end();
}

kernels::SampleRowParams GpuSampler::prepare(int lane, const SamplingParams& p, std::span<const int32_t> generated,
                                             int n_top, int slot) {
    kernels::SampleRowParams r;
    r.temperature = p.is_greedy() ? 0.f : p.temperature;
    r.top_k = p.top_k;
    r.top_p = p.top_p;
    r.min_p = p.min_p;
    r.presence_penalty = p.presence_penalty;
    r.frequency_penalty = p.frequency_penalty;
    r.repetition_penalty = p.repetition_penalty;
    r.seed = p.seed;
    r.step = p.step;
    r.lane = lane;
    r.n_top_logprobs = n_top;
    // The CPU sampler leaves the logits alone in exactly these cases; the counts then stay as they are.
    const bool penalised =
        !generated.empty() && !(p.presence_penalty == 0.f && p.frequency_penalty == 0.f && p.repetition_penalty == 1.f);
    if (penalised) {
        r.flags |= kernels::kSampleUseCounts;
        r.count_token = sync_counts(lane, generated);
    }
    if (!p.logit_bias.empty()) {
        r.flags |= kernels::kSampleUseBias;
        sync_bias(lane, p.logit_bias);
    }
    if (!p.allowed_tokens.empty()) { // a constrained row: its bitset goes up through the slot's pinned row
        r.flags |= kernels::kSampleUseMask;
        uint32_t* staged = mask_host_ + (size_t(slot) * lanes_.size() + size_t(lane)) * mask_words_;
        const size_t n = std::min(mask_words_, p.allowed_tokens.size());
        std::copy_n(p.allowed_tokens.begin(), n, staged);
        std::fill(staged + n, staged + mask_words_, 0u);
        cuda_check(cudaMemcpyAsync(mask_ + size_t(lane) * mask_words_, staged, mask_words_ * 4, cudaMemcpyHostToDevice,
                                   stream_), "sampler token mask");
    }
    return r;
}

// Returns the id kernels::sample adds to the lane's counts itself (-1: none).
int32_t GpuSampler::sync_counts(int lane, std::span<const int32_t> g) {
    std::vector<int32_t>& counted = lanes_[size_t(lane)].counted;
    const bool prefix = counted.size() <= g.size() && std::equal(counted.begin(), counted.end(), g.begin());
    if (prefix && counted.size() == g.size())
        return -1;
    if (prefix && counted.size() + 1 == g.size()) {
        counted.push_back(g.back());
        return g.back();
    }
    // Another request on the lane (or a history that moved by more than one token): rebuild once.
    if (g.size() > max_history_)
        throw Error("backend: penalty history of " + std::to_string(g.size()) + " tokens exceeds max-context");
    int32_t* row = counts_ + uint64_t(lane) * vocab_;
    cuda_check(cudaMemsetAsync(row, 0, uint64_t(vocab_) * 4, stream_), "sampler counts");
    cuda_check(cudaMemcpyAsync(uploads_, g.data(), g.size() * 4, cudaMemcpyHostToDevice, stream_), "sampler counts");
    cuda_check(kernels::sample_counts_add(row, uploads_, int(g.size()), int(vocab_), stream_), "sampler counts");
    counted.assign(g.begin(), g.end());
    return -1;
}

void GpuSampler::sync_bias(int lane, const std::vector<std::pair<int32_t, float>>& bias) {
    std::vector<std::pair<int32_t, float>>& held = lanes_[size_t(lane)].bias;
    if (held == bias)
        return;
    std::vector<int32_t> ids;
    std::vector<float> values;
    for (const auto& [id, b] : bias)
        if (id >= 0 && uint32_t(id) < vocab_) { // the CPU skips ids outside the vocabulary too
            ids.push_back(id);
            values.push_back(b);
        }
    float* row = bias_ + uint64_t(lane) * vocab_;
    cuda_check(cudaMemsetAsync(row, 0, uint64_t(vocab_) * 4, stream_), "sampler bias");
    cuda_check(cudaMemcpyAsync(uploads_, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, stream_), "sampler bias");
    cuda_check(cudaMemcpyAsync(bias_values_, values.data(), values.size() * 4, cudaMemcpyHostToDevice, stream_),
               "sampler bias");
    cuda_check(kernels::sample_bias_scatter(row, uploads_, bias_values_, int(ids.size()), int(vocab_), stream_),
               "sampler bias");
    held = bias;
}

void GpuSampler::upload(std::span<const kernels::SampleRowParams> rows, int slot) {
    if (rows.size() > kRows)
        throw Error("backend: more than " + std::to_string(kRows) + " sampling rows in one step");
    kernels::SampleRowParams* staged = params_host_ + size_t(slot) * kRows;
    std::copy(rows.begin(), rows.end(), staged);
    cuda_check(cudaMemcpyAsync(params_, staged, rows.size_bytes(), cudaMemcpyHostToDevice, stream_),
               "sampling parameters");
}

void GpuSampler::enqueue(const float* logits, int64_t stride, int n, const kernels::SamplePlan& plan) {
    kernels::SampleArgs a;
    a.logits = logits;
    a.stride = stride;
    a.vocab = int(vocab_);
    a.n_rows = n;
    a.rows = params_;
    a.counts = counts_;
    a.bias = bias_;
    a.mask = mask_;
    a.mask_words = int(mask_words_);
    a.workspace = workspace_;
    a.ids = out_;
    a.logprobs = reinterpret_cast<float*>(out_ + kRows);
    a.top_ids = out_ + kTopIdsAt;
    a.top_logprobs = reinterpret_cast<float*>(out_ + kTopLogprobsAt);
    a.plan = plan;
    cuda_check(kernels::sample(a, stream_), "sampling");
}

// One copy brings ids, logprobs and top logprobs back (the result words are contiguous).
void GpuSampler::enqueue_read(int slot, bool top) {
    cuda_check(cudaMemcpyAsync(out_host_ + size_t(slot) * kOutWords, out_, (top ? kOutWords : kTopIdsAt) * 4,
                               cudaMemcpyDeviceToHost, stream_), "sampled ids");
    if (slot != 0) // a decode step's ids, for the next step's kTokenOfLastStep rows (not a prefill's sample)
        cuda_check(cudaMemcpyAsync(last_ids_, out_, kRows * 4, cudaMemcpyDeviceToDevice, stream_), "sampled ids");
    cuda_check(cudaEventRecord(read_done_[slot], stream_), "sampled ids");
}

std::vector<DecodeResult> GpuSampler::collect(int slot, std::span<const kernels::SampleRowParams> rows) {
    cuda_check(cudaEventSynchronize(read_done_[slot]), "decode step");
    const int32_t* words = out_host_ + size_t(slot) * kOutWords;
    std::vector<DecodeResult> r(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        r[i].token = words[i];
        std::memcpy(&r[i].logprob, words + kRows + i, 4);
        const size_t n_top = std::min<size_t>(size_t(std::max(rows[i].n_top_logprobs, 0)), vocab_);
        for (size_t j = 0; j < n_top; ++j) {
            const size_t at = i * kernels::kSampleMaxTopLogprobs + j;
            float lp;
            std::memcpy(&lp, words + kTopLogprobsAt + at, 4);
            r[i].top_logprobs.push_back({words[kTopIdsAt + at], lp});
        }
    }
    return r;
}

std::vector<DecodeResult> GpuSampler::read(std::span<const kernels::SampleRowParams> rows) {
    const bool top = std::any_of(rows.begin(), rows.end(), [](const auto& p) { return p.n_top_logprobs > 0; });
    enqueue_read(0, top);
    return collect(0, rows);
}

} // namespace ninfer::core::cuda
