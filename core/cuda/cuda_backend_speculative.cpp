// ninfer::core - CudaBackend's speculation (cuda_backend_impl.h): MTP drafts, verify windows, acceptance.
#include "core/cuda/cuda_backend_impl.h"

#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core::cuda_detail {

namespace {
// A verify's page-table rows go up through a pipelined step's pinned slot, in stream order and
// without a wait: verify runs only while no step is outstanding, so the slot is free.
constexpr int kVerifyPageSlot = 1;
} // namespace

std::vector<std::vector<int32_t>> CudaBackend::draft_mtp(std::span<const DraftRequest> requests,
                                                         std::vector<std::vector<float>>* logits) {
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

std::vector<cuda::VerifyWindows::Request> CudaBackend::stage_verify(std::span<const VerifyStep> steps) {
    if (!begun_.empty())
        throw Error("backend: verify while pipelined decode steps are outstanding");
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
    }
    for (const VerifyStep& st : steps)
        grow(st.lane, st.tokens.size(), kVerifyPageSlot);
    std::vector<cuda::VerifyWindows::Request> requests;
    for (const VerifyStep& st : steps) {
        if (mtp_) // a lane verifying n-gram drafts on a plan with the head: its ring must not wrap
            mtp_->catch_up_behind(st.lane, at(st.lane).tokens);
        windows_.close(st.lane);
        requests.push_back({st.lane, uint32_t(at(st.lane).tokens.size()), st.tokens});
    }
    windows_.stage(requests);
    for (const VerifyStep& st : steps) {
        Lane& s = at(st.lane);
        s.tokens.insert(s.tokens.end(), st.tokens.begin(), st.tokens.end());
        s.has_logits = true;
    }
    return requests;
}

void CudaBackend::enqueue_windows(std::span<const cuda::VerifyWindows::Request> requests, bool graphs) {
    windows_.enqueue_staged(requests, [this](int n) {
        if (mtp_) // the windows' hidden rows wait for the head's next catch-up, as a decode step's
            mtp_->enqueue_keep_step_rows(n);
    }, graphs);
}

size_t CudaBackend::enqueue_verify(std::span<const VerifyStep> steps) {
    enqueue_windows(stage_verify(steps), options_.graphs);
    size_t rows = 0;
    for (const VerifyStep& st : steps) rows += st.tokens.size();
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

void CudaBackend::keep_tokens(int lane, size_t length, size_t pages_for) {
    Lane& s = at(lane);
    s.tokens.resize(length);
    for (const size_t need = (pages_for + kKvPageTokens - 1) / kKvPageTokens; s.pages.size() > need;) {
        release_page(s.pages.back());
        s.pages.pop_back();
    }
}

void CudaBackend::accept_verified(int lane, uint32_t n_keep) {
    at(lane);
    const uint32_t count = windows_.count(lane), kept = windows_.kept(lane);
    if (count == 0)
        throw Error("backend: lane " + std::to_string(lane) + " has no open verify window");
    const uint32_t held = kept ? kept : count; // the window's tokens in the lane now
    if (n_keep < 1 || n_keep > held)
        throw Error("backend: keep " + std::to_string(n_keep) + " of a " + std::to_string(held) +
                    "-token verify window (1.." + std::to_string(held) + ")");
    if (mtp_ && kept == 0) // the head as the verify left it, for a smaller keep after a draft
        mtp_->mark(lane);
    if (n_keep < held) { // the GDN state and logits of the last kept token; KV only rewinds its length
        if (mtp_ && kept > 0) // a draft since the first keep took positions that are dropped now
            mtp_->rewind(lane);
        const size_t length = windows_.start(lane) + n_keep;
        windows_.rollback(lane, n_keep);
        keep_tokens(lane, length, length);
    }
    windows_.set_kept(lane, n_keep);
}

// The verify windows, the acceptance, the rollback and the head's next drafts all enqueued at
// once, reading the kept counts on the device; one synchronisation brings the ids, the counts and
// the drafts back together, and the host's bookkeeping follows from the counts.
void CudaBackend::verify_accept_greedy(std::span<const GreedyRoundStep> steps, GreedyRoundResult& result) {
    if (plan_.max_draft_tokens == 0 || steps.empty())
        return Backend::verify_accept_greedy(steps, result);
    std::vector<VerifyStep> windows;
    std::vector<uint32_t> forced;
    for (const GreedyRoundStep& st : steps) {
        if (st.next_k < 0 || uint32_t(st.next_k) > plan_.max_draft_tokens || (st.next_k > 0 && !mtp_))
            throw Error("backend: " + std::to_string(st.next_k) + " next drafts asked of a greedy round (the plan: " +
                        (mtp_ ? "1.." + std::to_string(plan_.max_draft_tokens) : std::string("no MTP head")) + ")");
        if (st.forced_keep > st.tokens.size())
            throw Error("backend: keep " + std::to_string(st.forced_keep) + " of a " +
                        std::to_string(st.tokens.size()) + "-token verify window");
        windows.push_back({st.lane, st.tokens});
        forced.push_back(st.forced_keep);
    }
    // The host's half: every check, page and pinned input, with nothing enqueued yet but the
    // page-table uploads (and a lane's catch-up behind its ring) that must precede the round.
    const std::vector<cuda::VerifyWindows::Request> requests = stage_verify(windows);
    size_t rows = 0;
    std::vector<cuda::VerifyWindows::Request> accept;
    std::vector<cuda::MtpHead::RoundLane> heads;
    for (const GreedyRoundStep& st : steps) {
        const uint32_t start = windows_.start(st.lane), count = windows_.count(st.lane);
        rows += count;
        accept.push_back({st.lane, start, st.tokens});
        if (mtp_)
            mtp_->mark(st.lane);
        if (st.next_k > 0)
            heads.push_back({st.lane, st.next_k, start, count, at(st.lane).tokens});
    }
    windows_.stage_accept(accept, forced);
    std::vector<int> k;
    if (!heads.empty())
        try {
            k = mtp_->stage_round(heads, [this](int lane, size_t total) {
                grow(lane, total - std::min(total, at(lane).tokens.size()), kVerifyPageSlot);
            });
        } catch (...) { // the pool is full: the windows run, open and unaccepted, as verify_greedy leaves them
            enqueue_windows(requests, options_.graphs);
            // Their copies read pinned step inputs and page rows that the next call rewrites.
            cudaStreamSynchronize(run_.stream());
            throw;
        }
    const bool drafts = std::any_of(k.begin(), k.end(), [](int n) { return n > 0; });
    // The device's half: one graph per shape (the windows' lanes and sizes, the head's blocks).
    const cuda::VerifyWindows::RoundDevice d = windows_.round();
    const auto enqueue = [&](bool window_graphs) {
        enqueue_windows(requests, window_graphs);
        windows_.enqueue_accept(int(steps.size()));
        if (drafts) {
            mtp_->enqueue_round({d.starts, d.n_keep, d.ids, d.ids_stride});
            mtp_->read_round_drafts();
        }
        windows_.read_round();
    };
    std::vector<int> key;
    for (const cuda::VerifyWindows::Request& w : requests) key.insert(key.end(), {w.lane, int(w.tokens.size())});
    key.push_back(-1);
    const bool graph = round_graphs_on_ && (!drafts || mtp_->round_key(key)) &&
                       round_graphs_.run(run_.stream(), key, [&] { enqueue(false); }, "round graph");
    if (!graph) // the windows' forwards through their own graphs
        enqueue(options_.graphs);
    cuda_check(cudaStreamSynchronize(run_.stream()), "greedy round");
    result.ids.clear();
    result.ids.reserve(rows);
    result.n_keep.clear();
    result.drafts.assign(steps.size(), {});
    size_t head = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
        const int lane = steps[i].lane;
        const uint32_t start = windows_.start(lane), count = windows_.count(lane), n_keep = windows_.device_kept(lane);
        if (n_keep < 1 || n_keep > count)
            throw Error(Errc::Internal, "cuda: the device kept " + std::to_string(n_keep) + " of a " +
                                            std::to_string(count) + "-token window");
        result.ids.insert(result.ids.end(), windows_.ids(lane), windows_.ids(lane) + count);
        result.n_keep.push_back(n_keep);
        windows_.set_kept(lane, n_keep);
        const size_t length = size_t(start) + n_keep;
        int drafted = 0;
        if (steps[i].next_k > 0) {
            drafted = k.at(head++);
            if (drafted > 0) {
                mtp_->finish_round(lane, start, n_keep);
                result.drafts[i] = mtp_->round_drafts(lane, drafted);
            }
        }
        keep_tokens(lane, length, length + size_t(std::max(drafted - 1, 0))); // the drafts' pages stay, as draft()'s
    }
}

} // namespace ninfer::core::cuda_detail
