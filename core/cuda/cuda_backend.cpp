// ninfer::core - CudaBackend (cuda_backend_impl.h): construction, lanes, KV pages; the free functions.
#include "core/cuda/cuda_backend_impl.h"

#include "core/util/error.h"
#include "ninfer/kernels/device.h"
#include "ninfer/kernels/fault.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace ninfer::core {
namespace {

// Tokens per tensor-core prefill chunk: the plan's prefill chunk, at least 64 and at most 8192.
int prefill_tokens_for(uint32_t prefill_chunk) { return int(std::clamp<uint32_t>(prefill_chunk, 64, 8192)); }

} // namespace

namespace cuda_detail {

CudaBackend::CudaBackend(const ModelWeights& w, const MemoryPlan& plan, const CudaBackendOptions& o)
    : plan_(plan), options_(o), run_(w, plan, o.f32_activations), lanes_(size_t(plan.n_lanes)),
      sampler_(plan.n_lanes, run_.config().vocab_size, plan.max_context, run_.stream()),
      windows_(run_, plan, o.graphs), round_graphs_(o.max_round_graphs), round_graphs_on_(o.round_graphs),
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

CudaBackend::~CudaBackend() {
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

void CudaBackend::reset_lane(int lane) {
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

std::vector<float> CudaBackend::last_logits(int lane) const {
    if (!at(lane).has_logits)
        throw Error("backend: lane " + std::to_string(lane) + " has no logits");
    std::vector<float> out(vocab_size());
    cuda_check(cudaMemcpyAsync(out.data(), run_.lane_logits() + lane * run_.logits_stride(), out.size() * 4,
                               cudaMemcpyDeviceToHost, run_.stream()), "reading logits");
    cuda_check(cudaStreamSynchronize(run_.stream()), "reading logits");
    return out;
}

void CudaBackend::inject_fault(const std::string& what) {
    cuda_check(kernels::illegal_write(run_.stream()), what + ": launching the faulting kernel");
    cuda_check(cudaStreamSynchronize(run_.stream()), what);
    throw Error(Errc::Internal, "cuda: " + what + ": the faulting kernel ran without an error");
}

Lane& CudaBackend::at(int lane) {
    if (lane < 0 || size_t(lane) >= lanes_.size())
        throw Error("backend: lane " + std::to_string(lane) + " out of range 0.." + std::to_string(lanes_.size() - 1));
    return lanes_[size_t(lane)];
}

void CudaBackend::check_tokens(std::span<const int32_t> tokens) const {
    for (int32_t t : tokens)
        if (t < 0 || uint32_t(t) >= vocab_size())
            throw Error("backend: token id " + std::to_string(t) + " is outside the vocabulary");
}

void CudaBackend::release_page(uint32_t page) {
    if (page_refs_[page] > 0 && --page_refs_[page] == 0)
        free_.push_back(page);
}

void CudaBackend::grow(int lane, size_t n, int slot) {
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

void CudaBackend::upload_page_table(int lane, int slot) {
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

void CudaBackend::set_lane_rope_offset(int lane, int64_t offset) {
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

} // namespace cuda_detail

using cuda_detail::CudaBackend;

CudaBackendOptions cuda_backend_options_from_env(std::string* note) {
    CudaBackendOptions options;
    try {
        options.tuning = kernels::kernel_tuning_from_env();
    } catch (const std::invalid_argument& e) {
        throw Error(std::string("cuda: ") + e.what());
    }
    std::string set = kernels::kernel_tuning_describe(options.tuning);
    if (const char* fused = std::getenv("NINFER_CUDA_FUSED_ROUNDS"); fused && *fused) {
        const std::string v = fused;
        if (v != "0" && v != "1")
            throw Error("cuda: NINFER_CUDA_FUSED_ROUNDS='" + v + "' is not 0 or 1");
        options.fused_rounds = v == "1";
        set += std::string(set.empty() ? "" : ", ") + "NINFER_CUDA_FUSED_ROUNDS=" + v;
    }
    if (note) *note = set.empty() ? std::string() : "cuda: switches from the environment (A/B timing): " + set;
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

size_t set_cuda_round_graphs(Backend& backend, bool on) {
    auto* b = dynamic_cast<cuda_detail::CudaBackend*>(&backend);
    if (!b)
        throw Error("cuda: round graphs switched on a " + backend.name() + " backend");
    b->set_round_graphs(on);
    return b->round_graphs();
}

void cuda_fail_next_round_capture(Backend& backend) {
    auto* b = dynamic_cast<cuda_detail::CudaBackend*>(&backend);
    if (!b)
        throw Error("cuda: a round capture failure asked of a " + backend.name() + " backend");
    b->fail_next_round_capture();
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
