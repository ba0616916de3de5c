// ninfer::core - CUDA verify windows: lanes' K + 1 tokens in forwards of <= 8 rows, GDN snapshots, rollback.
#include "core/cuda/verify_window.h"

#include "core/util/error.h"
#include "ninfer/kernels/spec_round.h"

#include <algorithm>
#include <functional>
#include <string>

namespace ninfer::core::cuda {

namespace {

// Clears the runner's GDN windows however the capture or launch sequence ends.
struct WindowsScope {
    Runner& run;
    WindowsScope(Runner& r, const GdnWindowPlan* w) : run(r) { run.set_gdn_windows(w); }
    ~WindowsScope() { run.set_gdn_windows(nullptr); }
};

uint64_t snapshot_bytes(const Runner& run) {
    return uint64_t(run.config().n_linear_attention_layers()) *
           (run.conv_bytes_per_lane() + run.recurrent_floats_per_lane() * 4);
}

// The forwards of a call: consecutive windows up to kMaxStepTokens rows, as [first, end) ranges.
std::vector<std::pair<size_t, size_t>> forwards_of(std::span<const VerifyWindows::Request> windows) {
    std::vector<std::pair<size_t, size_t>> out;
    for (size_t first = 0; first < windows.size();) {
        size_t end = first, rows = 0;
        while (end < windows.size() && rows + windows[end].tokens.size() <= size_t(kMaxStepTokens))
            rows += windows[end++].tokens.size();
        out.emplace_back(first, end);
        first = end;
    }
    return out;
}

// Token-major rows of one forward: row[i][j] is window i's token j; every token j's rows are
// consecutive (the windows that have a token j, in order).
std::vector<std::vector<int>> token_major_rows(std::span<const VerifyWindows::Request> group) {
    std::vector<std::vector<int>> row(group.size());
    size_t longest = 0;
    for (const auto& w : group) longest = std::max(longest, w.tokens.size());
    int r = 0;
    for (size_t j = 0; j < longest; ++j)
        for (size_t i = 0; i < group.size(); ++i)
            if (j < group[i].tokens.size()) row[i].push_back(r++);
    return row;
}

} // namespace

uint8_t* Runner::conv_state_bytes(uint32_t gi, int lane) const {
    return f32_ ? reinterpret_cast<uint8_t*>(f32m_.conv[gi] + uint64_t(lane) * conv_elems_per_lane())
                : reinterpret_cast<uint8_t*>(conv_[gi] + uint64_t(lane) * conv_elems_per_lane());
}

// The kernels' view of the windows for GDN layer gi: each lane's slot, rows and this layer's snapshots.
kernels::GdnWindows Runner::gdn_windows(uint32_t gi) const {
    kernels::GdnWindows k;
    if (gdn_windows_->windows.size() > size_t(kernels::kGdnWindowMax))
        throw Error("cuda: " + std::to_string(gdn_windows_->windows.size()) + " verify windows in one forward");
    for (const GdnWindowPlan::Window& w : gdn_windows_->windows) {
        if (w.rows.empty() || w.rows.size() > size_t(kernels::kGdnWindowMaxTokens))
            throw Error("cuda: a verify window of " + std::to_string(w.rows.size()) + " tokens");
        kernels::GdnWindow& kw = k.w[k.n++];
        kw.slot = w.lane;
        kw.n_tokens = int(w.rows.size());
        std::copy(w.rows.begin(), w.rows.end(), kw.rows);
        kw.conv_snap = (*w.conv)[gi];
        kw.state_snap = (*w.recurrent)[gi];
    }
    return k;
}

uint64_t VerifyWindows::device_bytes(const Runner& run, const MemoryPlan& plan) {
    const uint64_t K = plan.max_draft_tokens;
    if (K == 0)
        return 0;
    const uint64_t spans = K * (2 * uint64_t(run.config().n_linear_attention_layers()) + 1);
    return uint64_t(plan.n_lanes) * (K * snapshot_bytes(run) + (K + 1) * uint64_t(run.logits_stride()) * 4 +
                                     (K + 1) * 4 + spans * sizeof(kernels::CopySpan) +
                                     (kernels::kRoundTableHead + K + 1 + 2) * 4) +
           kernels::argmax_work_bytes(int(K + 1));
}

VerifyWindows::VerifyWindows(Runner& run, const MemoryPlan& plan, bool graphs)
    : run_(run), max_draft_(plan.max_draft_tokens), graphs_(graphs), lanes_(size_t(plan.n_lanes)), graph_(kMaxGraphs) {
    if (max_draft_ == 0)
        return;
    if (max_draft_ + 1 > uint32_t(kMaxStepTokens))
        throw Error("cuda: verify windows of " + std::to_string(max_draft_ + 1) + " tokens exceed a step's " +
                    std::to_string(kMaxStepTokens));
    const uint32_t n_gdn = run.config().n_linear_attention_layers();
    const uint64_t cb = run.conv_bytes_per_lane(), rf = run.recurrent_floats_per_lane();
    for (Window& w : lanes_) {
        for (uint32_t g = 0; g < n_gdn; ++g) {
            w.conv.push_back(arena_.alloc_n<uint8_t>(max_draft_ * cb, "verify GDN conv snapshots"));
            w.recurrent.push_back(arena_.alloc_n<float>(max_draft_ * rf, "verify GDN state snapshots"));
        }
        w.logits = arena_.alloc_n<float>((max_draft_ + 1) * uint64_t(run.logits_stride()), "verify window logits");
    }
    cuda_check(cudaMallocHost(&step_in_host_, lanes_.size() * 3 * kMaxStepTokens * 4), "pinned verify inputs");
    // The greedy picks: (K + 1) ids per lane, the argmax workspace (its counters start at zero).
    const uint64_t n_ids = lanes_.size() * (max_draft_ + 1);
    // One block, ids then the round's kept counts then its window starts: a round reads the ids and
    // counts back in one copy.
    ids_ = arena_.alloc_n<int32_t>(n_ids + 2 * lanes_.size(), "verify greedy ids, round kept counts and starts");
    n_keep_ = ids_ + n_ids;
    starts_ = n_keep_ + lanes_.size();
    const size_t work = kernels::argmax_work_bytes(int(max_draft_ + 1));
    argmax_work_ = arena_.alloc(work, "verify argmax workspace");
    cuda_check(cudaMemset(argmax_work_, 0, work), "verify argmax workspace");
    cuda_check(cudaMallocHost(&ids_host_, (n_ids + lanes_.size()) * 4), "pinned verify ids and kept counts");
    n_keep_host_ = ids_host_ + n_ids;
    // Rollback tables: for lane l and kept prefix n, every GDN layer's conv and recurrent copies from
    // snapshot n - 1 into the live state, then window row n - 1 into the lane's logits.
    rollback_spans_ = 2 * n_gdn + 1;
    const uint64_t V = run.config().vocab_size, stride = uint64_t(run.logits_stride());
    std::vector<kernels::CopySpan> table;
    for (size_t l = 0; l < lanes_.size(); ++l)
        for (uint32_t at = 0; at < max_draft_; ++at) {
            for (uint32_t g = 0; g < n_gdn; ++g) {
                table.push_back({run.conv_state_bytes(g, int(l)), lanes_[l].conv[g] + at * cb, cb});
                table.push_back({run.recurrent_state(g) + l * rf, lanes_[l].recurrent[g] + at * rf, rf * 4});
            }
            table.push_back({run.lane_logits() + l * stride, lanes_[l].logits + at * stride, V * 4});
        }
    rollback_table_ = arena_.alloc_n<kernels::CopySpan>(table.size(), "verify rollback table");
    cuda_check(cudaMemcpy(rollback_table_, table.data(), table.size() * sizeof(kernels::CopySpan),
                          cudaMemcpyHostToDevice), "verify rollback table");
    rollback_max_bytes_ = std::max({cb, rf * 4, V * 4});
    // The greedy round's table, kept counts and window starts.
    round_width_ = kernels::kRoundTableHead + int(max_draft_) + 1;
    round_table_ = arena_.alloc_n<int32_t>(lanes_.size() * size_t(round_width_), "round table");
    cuda_check(cudaMallocHost(&round_host_, lanes_.size() * size_t(round_width_) * 4), "pinned round table");
}

VerifyWindows::~VerifyWindows() {
    if (step_in_host_) {
        cudaStreamSynchronize(run_.stream()); // a window in flight reads the pinned inputs
        cudaFreeHost(step_in_host_);
        cudaFreeHost(ids_host_);
        cudaFreeHost(round_host_);
    }
}

void VerifyWindows::stage(std::span<const Request> windows) {
    if (windows.size() > lanes_.size())
        throw Error("backend: " + std::to_string(windows.size()) + " verify windows for " +
                    std::to_string(lanes_.size()) + " lanes");
    for (const Request& w : windows)
        if (max_draft_ == 0 || w.tokens.empty() || w.tokens.size() > max_draft_ + 1)
            throw Error("backend: a verify step of " + std::to_string(w.tokens.size()) + " tokens, the plan allows 1.." +
                        std::to_string(max_draft_ + 1));
    // The pinned row of forward f is f's: the copies (or a round's graph) read them when they run.
    const auto forwards = forwards_of(windows);
    for (size_t f = 0; f < forwards.size(); ++f) {
        const auto [first, end] = forwards[f];
        const std::span<const Request> group = windows.subspan(first, end - first);
        const std::vector<std::vector<int>> row = token_major_rows(group);
        int32_t* in = step_in_host_ + f * 3 * kMaxStepTokens;
        std::fill(in, in + 3 * kMaxStepTokens, 0);
        for (size_t i = 0; i < group.size(); ++i)
            for (size_t j = 0; j < group[i].tokens.size(); ++j) {
                const int r = row[i][j];
                in[r] = group[i].tokens[j];
                in[kMaxStepTokens + r] = group[i].lane;
                in[2 * kMaxStepTokens + r] = int32_t(group[i].start + j);
            }
    }
    for (const Request& w : windows) {
        lanes_[size_t(w.lane)].start = w.start;
        lanes_[size_t(w.lane)].count = uint32_t(w.tokens.size());
        lanes_[size_t(w.lane)].kept = 0;
    }
}

void VerifyWindows::enqueue_staged(std::span<const Request> windows, const std::function<void(int)>& after_forward,
                                   bool graphs) {
    const auto forwards = forwards_of(windows);
    for (size_t f = 0; f < forwards.size(); ++f) {
        const auto [first, end] = forwards[f];
        const std::span<const Request> group = windows.subspan(first, end - first);
        cuda_check(cudaMemcpyAsync(run_.step_in(), step_in_host_ + f * 3 * kMaxStepTokens, 3 * kMaxStepTokens * 4,
                                   cudaMemcpyHostToDevice, run_.stream()), "verify inputs");
        const auto body = [&] { enqueue_device(group, after_forward); };
        std::vector<int> key;
        for (const Request& w : group) {
            key.push_back(w.lane);
            key.push_back(int(w.tokens.size()));
        }
        if (!graphs || !graph_.run(run_.stream(), key, body, "verify graph"))
            body();
    }
}

void VerifyWindows::enqueue_device(std::span<const Request> group, const std::function<void(int)>& after_forward) {
    const std::vector<std::vector<int>> row = token_major_rows(group);
    GdnWindowPlan windows;
    int n = 0;
    for (size_t i = 0; i < group.size(); ++i) {
        const Window& w = lanes_[size_t(group[i].lane)];
        windows.windows.push_back({group[i].lane, row[i], &w.conv, &w.recurrent});
        n += int(row[i].size());
    }
    {
        const WindowsScope scope(run_, &windows);
        run_.enqueue_forward(n, true);
    }
    if (after_forward)
        after_forward(n);
    run_.enqueue_head(0, n);
    // Every window row to its lane's window logits and each window's last row to its lane's logits
    // (n + group.size() <= 16 spans: one launch), then each window's greedy picks.
    const uint64_t V = run_.config().vocab_size, stride = uint64_t(run_.logits_stride());
    std::vector<kernels::CopySpan> spans;
    for (size_t i = 0; i < group.size(); ++i) {
        const Window& w = lanes_[size_t(group[i].lane)];
        for (size_t j = 0; j < row[i].size(); ++j)
            spans.push_back({w.logits + j * stride, run_.logits() + uint64_t(row[i][j]) * stride, V * 4});
        spans.push_back({run_.lane_logits() + uint64_t(group[i].lane) * stride,
                         run_.logits() + uint64_t(row[i].back()) * stride, V * 4});
    }
    cuda_check(kernels::copy_spans(spans.data(), int(spans.size()), run_.stream()), "verify logits");
    for (size_t i = 0; i < group.size(); ++i)
        cuda_check(kernels::argmax_rows(lanes_[size_t(group[i].lane)].logits, int64_t(stride), int(row[i].size()),
                                        int(V), argmax_work_, ids_ + size_t(group[i].lane) * (max_draft_ + 1),
                                        run_.stream()), "verify greedy ids");
}

void VerifyWindows::read_ids() const {
    cuda_check(cudaMemcpyAsync(ids_host_, ids_, lanes_.size() * (max_draft_ + 1) * 4, cudaMemcpyDeviceToHost,
                               run_.stream()), "verify greedy ids");
}

void VerifyWindows::read_rows(int lane, float* host_rows) const {
    const Window& w = lanes_[size_t(lane)];
    const uint64_t V = run_.config().vocab_size, stride = uint64_t(run_.logits_stride());
    cuda_check(cudaMemcpy2DAsync(host_rows, V * 4, w.logits, stride * 4, V * 4, w.count, cudaMemcpyDeviceToHost,
                                 run_.stream()), "verify logits");
}

void VerifyWindows::rollback(int lane, uint32_t n_keep) {
    Window& w = lanes_[size_t(lane)];
    if (n_keep < 1 || n_keep >= w.count)
        throw Error("backend: rollback to " + std::to_string(n_keep) + " of a " + std::to_string(w.count) +
                    "-token window");
    const uint64_t at = uint64_t(lane) * max_draft_ + (n_keep - 1);
    cuda_check(kernels::copy_span_table(rollback_table_ + at * rollback_spans_, int(rollback_spans_),
                                        rollback_max_bytes_, run_.stream()), "GDN rollback");
    w.kept = n_keep;
}

void VerifyWindows::stage_accept(std::span<const Request> windows, std::span<const uint32_t> forced) {
    if (windows.size() > lanes_.size() || forced.size() != windows.size())
        throw Error("backend: a greedy round of " + std::to_string(windows.size()) + " windows and " +
                    std::to_string(forced.size()) + " forced keeps");
    for (size_t i = 0; i < windows.size(); ++i) {
        const Request& w = windows[i];
        if (w.tokens.empty() || w.tokens.size() > max_draft_ + 1 || forced[i] > w.tokens.size())
            throw Error("backend: a greedy round's window of " + std::to_string(w.tokens.size()) + " tokens keeps " +
                        std::to_string(forced[i]));
        int32_t* row = round_host_ + i * size_t(round_width_);
        row[0] = w.lane;
        row[1] = int32_t(w.tokens.size());
        row[2] = int32_t(w.start);
        row[3] = int32_t(forced[i]);
        std::copy(w.tokens.begin(), w.tokens.end(), row + kernels::kRoundTableHead);
    }
}

void VerifyWindows::enqueue_accept(int n) {
    if (n < 0 || size_t(n) > lanes_.size())
        throw Error("backend: a greedy round of " + std::to_string(n) + " windows");
    // Pinned source: the copy reads it when it runs; the caller synchronises before the next round.
    cuda_check(cudaMemcpyAsync(round_table_, round_host_, size_t(n) * size_t(round_width_) * 4, cudaMemcpyHostToDevice,
                               run_.stream()), "round table");
    cuda_check(kernels::greedy_accept(round_table_, round_width_, n, ids_, int(max_draft_ + 1), n_keep_, starts_,
                                      run_.stream()), "greedy acceptance");
    cuda_check(kernels::copy_span_table_kept(rollback_table_, int(rollback_spans_), int(max_draft_), round_table_,
                                             round_width_, n, n_keep_, rollback_max_bytes_, run_.stream()),
               "GDN rollback");
}

void VerifyWindows::read_round() const {
    cuda_check(cudaMemcpyAsync(ids_host_, ids_, lanes_.size() * (max_draft_ + 2) * 4, cudaMemcpyDeviceToHost,
                               run_.stream()), "verify greedy ids and kept counts");
}

} // namespace ninfer::core::cuda
