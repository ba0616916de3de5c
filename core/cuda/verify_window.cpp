// ninfer::core - CUDA verify windows: one lane's K + 1 tokens in one forward, GDN snapshots, rollback.
#include "core/cuda/verify_window.h"

#include "core/util/error.h"

#include <algorithm>
#include <functional>
#include <string>

namespace ninfer::core::cuda {

namespace {

// Clears the runner's snapshot target however the capture or launch sequence ends.
struct SnapshotScope {
    Runner& run;
    SnapshotScope(Runner& r, const GdnSnapshotTarget* t) : run(r) { run.set_gdn_snapshots(t); }
    ~SnapshotScope() { run.set_gdn_snapshots(nullptr); }
};

uint64_t snapshot_bytes(const Runner& run) {
    return uint64_t(run.config().n_linear_attention_layers()) *
           (run.conv_bytes_per_lane() + run.recurrent_floats_per_lane() * 4);
}

// Runs body on the stream, through a graph captured on first use when `exec` is given.
void replay(cudaStream_t stream, cudaGraphExec_t* exec, const std::function<void()>& body) {
    if (!exec) {
        body();
        return;
    }
    if (!*exec) {
        cudaGraph_t graph = nullptr;
        cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "verify graph capture");
        try {
            body();
        } catch (...) {
            cudaStreamEndCapture(stream, &graph);
            if (graph)
                cudaGraphDestroy(graph);
            throw;
        }
        cuda_check(cudaStreamEndCapture(stream, &graph), "verify graph capture");
        const cudaError_t err = cudaGraphInstantiate(exec, graph, 0);
        cudaGraphDestroy(graph);
        cuda_check(err, "verify graph instantiation");
    }
    cuda_check(cudaGraphLaunch(*exec, stream), "verify graph");
}

} // namespace

uint8_t* Runner::conv_state_bytes(uint32_t gi, int lane) const {
    return f32_ ? reinterpret_cast<uint8_t*>(f32m_.conv[gi] + uint64_t(lane) * conv_elems_per_lane())
                : reinterpret_cast<uint8_t*>(conv_[gi] + uint64_t(lane) * conv_elems_per_lane());
}

void Runner::snapshot_gdn(uint32_t gi, int token) {
    if (token >= snapshots_->count)
        return;
    const uint64_t cb = conv_bytes_per_lane(), rf = recurrent_floats_per_lane();
    const int lane = snapshots_->lane;
    cuda_check(cudaMemcpyAsync(snapshots_->conv[gi] + uint64_t(token) * cb, conv_state_bytes(gi, lane), cb,
                               cudaMemcpyDeviceToDevice, stream_), "GDN snapshot");
    cuda_check(cudaMemcpyAsync(snapshots_->recurrent[gi] + uint64_t(token) * rf, recurrent_[gi] + uint64_t(lane) * rf,
                               rf * 4, cudaMemcpyDeviceToDevice, stream_), "GDN snapshot");
}

uint64_t VerifyWindows::device_bytes(const Runner& run, const MemoryPlan& plan) {
    const uint64_t K = plan.max_draft_tokens;
    if (K == 0)
        return 0;
    return uint64_t(plan.n_lanes) * (K * snapshot_bytes(run) + (K + 1) * uint64_t(run.logits_stride()) * 4);
}

VerifyWindows::VerifyWindows(Runner& run, const MemoryPlan& plan, bool graphs)
    : run_(run), max_draft_(plan.max_draft_tokens), graphs_(graphs), lanes_(size_t(plan.n_lanes)) {
    if (max_draft_ == 0)
        return;
    if (max_draft_ + 1 > uint32_t(kMaxStepTokens))
        throw Error("cuda: verify windows of " + std::to_string(max_draft_ + 1) + " tokens exceed a step's " +
                    std::to_string(kMaxStepTokens));
    const uint32_t n_gdn = run.config().n_linear_attention_layers();
    const uint64_t cb = run.conv_bytes_per_lane(), rf = run.recurrent_floats_per_lane();
    for (size_t l = 0; l < lanes_.size(); ++l) {
        Window& w = lanes_[l];
        w.snapshots.lane = int(l);
        for (uint32_t g = 0; g < n_gdn; ++g) {
            w.snapshots.conv.push_back(arena_.alloc_n<uint8_t>(max_draft_ * cb, "verify GDN conv snapshots"));
            w.snapshots.recurrent.push_back(arena_.alloc_n<float>(max_draft_ * rf, "verify GDN state snapshots"));
        }
        w.logits = arena_.alloc_n<float>((max_draft_ + 1) * uint64_t(run.logits_stride()), "verify window logits");
    }
    cuda_check(cudaMallocHost(&step_in_host_, lanes_.size() * 3 * kMaxStepTokens * 4), "pinned verify inputs");
    graph_.assign(lanes_.size(), std::vector<cudaGraphExec_t>(size_t(max_draft_ + 2), nullptr));
}

VerifyWindows::~VerifyWindows() {
    if (step_in_host_) {
        cudaStreamSynchronize(run_.stream()); // a window in flight reads the pinned inputs
        cudaFreeHost(step_in_host_);
    }
    for (const auto& by_n : graph_)
        for (cudaGraphExec_t g : by_n)
            if (g)
                cudaGraphExecDestroy(g);
}

void VerifyWindows::enqueue(int lane, uint32_t start, std::span<const int32_t> tokens,
                            const std::function<void(int)>& after_forward) {
    const int n = int(tokens.size());
    if (max_draft_ == 0 || n < 1 || uint32_t(n) > max_draft_ + 1)
        throw Error("backend: a verify step of " + std::to_string(n) + " tokens, the plan allows 1.." +
                    std::to_string(max_draft_ + 1));
    Window& w = lanes_[size_t(lane)];
    // A lane's own pinned row: the previous verify's copies of every lane were waited for.
    int32_t* in = step_in_host_ + size_t(lane) * 3 * kMaxStepTokens;
    std::fill(in, in + 3 * kMaxStepTokens, 0);
    for (int i = 0; i < n; ++i) {
        in[i] = tokens[size_t(i)];
        in[kMaxStepTokens + i] = lane;
        in[2 * kMaxStepTokens + i] = int32_t(start) + i;
    }
    cuda_check(cudaMemcpyAsync(run_.step_in(), in, 3 * kMaxStepTokens * 4, cudaMemcpyHostToDevice, run_.stream()),
               "verify inputs");
    replay(run_.stream(), graphs_ ? &graph_[size_t(lane)][size_t(n)] : nullptr, [&] { enqueue_device(lane, n, after_forward); });
    w.start = start;
    w.count = uint32_t(n);
}

void VerifyWindows::read_rows(int lane, float* host_rows) const {
    const Window& w = lanes_[size_t(lane)];
    const uint64_t V = run_.config().vocab_size, stride = uint64_t(run_.logits_stride());
    cuda_check(cudaMemcpy2DAsync(host_rows, V * 4, w.logits, stride * 4, V * 4, w.count, cudaMemcpyDeviceToHost,
                                 run_.stream()), "verify logits");
}

void VerifyWindows::enqueue_device(int lane, int n, const std::function<void(int)>& after_forward) {
    Window& w = lanes_[size_t(lane)];
    w.snapshots.count = n - 1; // the state after the last token is the lane's own
    {
        const SnapshotScope scope(run_, &w.snapshots);
        run_.enqueue_forward(n, true);
    }
    if (after_forward)
        after_forward(n);
    run_.enqueue_head(0, n);
    const uint64_t V = run_.config().vocab_size, stride = uint64_t(run_.logits_stride());
    cuda_check(cudaMemcpy2DAsync(w.logits, stride * 4, run_.logits(), stride * 4, V * 4, size_t(n),
                                 cudaMemcpyDeviceToDevice, run_.stream()), "verify logits");
    cuda_check(cudaMemcpyAsync(run_.lane_logits() + uint64_t(lane) * stride, run_.logits() + uint64_t(n - 1) * stride,
                               V * 4, cudaMemcpyDeviceToDevice, run_.stream()), "lane logits");
}

void VerifyWindows::rollback(int lane, uint32_t n_keep) {
    Window& w = lanes_[size_t(lane)];
    if (n_keep < 1 || n_keep >= w.count)
        throw Error("backend: rollback to " + std::to_string(n_keep) + " of a " + std::to_string(w.count) +
                    "-token window");
    const uint32_t at = n_keep - 1;
    const uint64_t cb = run_.conv_bytes_per_lane(), rf = run_.recurrent_floats_per_lane();
    const uint64_t V = run_.config().vocab_size, stride = uint64_t(run_.logits_stride());
    for (uint32_t g = 0; g < w.snapshots.conv.size(); ++g) {
        cuda_check(cudaMemcpyAsync(run_.conv_state_bytes(g, lane), w.snapshots.conv[g] + at * cb, cb,
                                   cudaMemcpyDeviceToDevice, run_.stream()), "GDN rollback");
        cuda_check(cudaMemcpyAsync(run_.recurrent_state(g) + uint64_t(lane) * rf, w.snapshots.recurrent[g] + at * rf,
                                   rf * 4, cudaMemcpyDeviceToDevice, run_.stream()), "GDN rollback");
    }
    cuda_check(cudaMemcpyAsync(run_.lane_logits() + uint64_t(lane) * stride, w.logits + at * stride, V * 4,
                               cudaMemcpyDeviceToDevice, run_.stream()), "lane logits");
    w.count = 0;
}

} // namespace ninfer::core::cuda
