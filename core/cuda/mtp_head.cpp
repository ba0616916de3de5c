// ninfer::core - the CUDA MTP head driver: the hidden-row ring, catch-up blocks and greedy drafts.
#include "core/cuda/mtp_head.h"

#include "core/cuda/prefill_runner.h"
#include "core/util/error.h"
#include "ninfer/kernels/mtp_ops.h"
#include "ninfer/kernels/spec_round.h"

#include <algorithm>

namespace ninfer::core::cuda {

uint64_t MtpHead::device_bytes(const ModelConfig& c, int n_lanes, uint32_t max_draft_tokens) {
    const uint64_t hs = uint64_t(pad8(c.hidden_size)), B = kMaxStepTokens;
    const uint64_t ring = uint64_t(n_lanes) * kRingRows * hs * 4, hidden = B * hs * 4;
    const uint64_t drafts = uint64_t(n_lanes) * std::max<uint32_t>(1, max_draft_tokens) * 4;
    const uint64_t runner_in = B * 2 * hs * (2 + 2 + 4); // Runner's MTP input rows (bf16, low halves, f32)
    return ring + hidden + drafts + runner_in;
}

MtpHead::MtpHead(Runner& run, const MemoryPlan& plan)
    : run_(run), plan_(plan), hs_(run.hidden_stride()), drafts_w_(int(std::max<uint32_t>(1, plan.max_draft_tokens))),
      mtp_length_(size_t(plan.n_lanes), 0), rope_(size_t(plan.n_lanes)), rope_offset_(size_t(plan.n_lanes), 0),
      step_in_(3 * kMaxStepTokens, 0), marks_(size_t(plan.n_lanes)) {
    if (!run.has_mtp())
        throw Error("cuda: the MTP head needs a plan with mtp and weights with the head");
    ring_ = arena_.alloc_n<float>(uint64_t(plan.n_lanes) * kRingRows * hs_, "MTP hidden rows");
    cuda_check(cudaMemset(ring_, 0, uint64_t(plan.n_lanes) * kRingRows * hs_ * 4), "clearing MTP rows");
    hidden_ = arena_.alloc_n<float>(uint64_t(kMaxStepTokens) * hs_, "MTP step hidden rows");
    drafts_ = arena_.alloc_n<int32_t>(uint64_t(plan.n_lanes) * drafts_w_, "MTP drafts");
    cuda_check(cudaMemset(drafts_, 0, uint64_t(plan.n_lanes) * drafts_w_ * 4), "clearing MTP drafts");
    cuda_check(cudaMallocHost(&drafts_host_, uint64_t(plan.n_lanes) * drafts_w_ * 4), "pinned MTP drafts");
    cuda_check(cudaMallocHost(&round_in_host_, size_t(round_slots()) * 3 * kMaxStepTokens * 4),
               "pinned MTP round inputs");
}

MtpHead::~MtpHead() {
    cudaStreamSynchronize(run_.stream()); // a round's read-back in flight writes the pinned drafts
    cudaFreeHost(drafts_host_);
    cudaFreeHost(round_in_host_);
}

float* MtpHead::ring_row(int lane, uint32_t position) const {
    return ring_ + (int64_t(lane) * kRingRows + int64_t(position % kRingRows)) * hs_;
}

MtpPart MtpHead::ring_pieces(int lane, uint32_t p0, uint32_t p1) const {
    MtpPart part;
    part.mtp_length = p0;
    for (uint32_t p = p0; p < p1;) {
        const uint32_t end = std::min(p1, p + (kRingRows - p % kRingRows));
        part.rows.push_back({ring_row(lane, p), end - p});
        p = end;
    }
    return part;
}

MtpPart MtpHead::pending(int lane, uint32_t n) const {
    const uint32_t m = mtp_length_.at(size_t(lane));
    return ring_pieces(lane, std::min(n, std::max(m, n > kRingRows ? n - kRingRows : 0)), n);
}

MtpPart MtpHead::restore_target(int lane, uint32_t m, uint32_t n) const {
    return ring_pieces(lane, std::max(m, n > kRingRows ? n - kRingRows : 0), n);
}

void MtpHead::restored(int lane, uint32_t m, uint32_t n) {
    if (m == LaneImageCopier::kNoMtp)
        skip_to(lane, n);
    else // the image keeps no positions: its pending rows take text positions, as on the CPU
        advance(lane, std::max(m, n > kRingRows ? n - kRingRows : 0), true);
}

void MtpHead::advance(int lane, uint32_t m, bool clear) {
    uint32_t& length = mtp_length_.at(size_t(lane));
    std::vector<MropePosition>& kept = rope_.at(size_t(lane));
    if (clear || m < length)
        kept.clear();
    else
        kept.erase(kept.begin(), kept.begin() + long(std::min<size_t>(m - length, kept.size())));
    length = m;
}

void MtpHead::keep_positions(int lane, uint32_t start, std::span<const MropePosition> positions) {
    const uint32_t m = mtp_length_.at(size_t(lane));
    std::vector<MropePosition>& kept = rope_.at(size_t(lane));
    kept.resize(std::min<size_t>(kept.size(), start > m ? start - m : 0));
    for (uint32_t t = m + uint32_t(kept.size()); t < start; ++t) // pending before the chunk: text
        kept.push_back(MropePosition::text(uint32_t(int64_t(t) + rope_offset_.at(size_t(lane)))));
    kept.insert(kept.end(), positions.begin(), positions.end());
}

MtpHead::Row MtpHead::pending_row(int lane, uint32_t t, int32_t token) const {
    Row r{lane, t, token, -1, std::nullopt, -1};
    const uint32_t m = mtp_length_.at(size_t(lane));
    const std::vector<MropePosition>& kept = rope_.at(size_t(lane));
    if (t >= m && t - m < kept.size())
        r.rope = kept[t - m];
    return r;
}

void MtpHead::enqueue_keep_step_rows(int n) {
    cuda_check(kernels::mtp_keep_rows(run_.step_rows_f32(), hs_, run_.step_in() + kMaxStepTokens,
                                      run_.step_in() + 2 * kMaxStepTokens, 0, ring_, kRingRows, hs_,
                                      run_.config().hidden_size, n, run_.stream()), "MTP rows");
}

void MtpHead::stage_rows(int lane, uint32_t p0, uint32_t p1, const float* src, uint32_t src_start, int64_t stride) {
    for (uint32_t p = p0; p < p1;) { // up to the ring's wrap, one 2-D copy
        const uint32_t end = std::min(p1, p + (kRingRows - p % kRingRows));
        cuda_check(cudaMemcpy2DAsync(ring_row(lane, p), hs_ * 4, src + int64_t(p - src_start) * stride, stride * 4,
                                     run_.config().hidden_size * 4, end - p, cudaMemcpyDeviceToDevice, run_.stream()),
                   "MTP rows");
        p = end;
    }
}

void MtpHead::clamp_pending(int lane, uint32_t end) {
    if (end > mtp_length_.at(size_t(lane)) + kRingRows)
        advance(lane, end - kRingRows);
}

MtpHead::Block MtpHead::stage_block(const std::vector<Row>& rows, size_t b0, size_t b1, int32_t* staged) const {
    Block b;
    b.n = int(b1 - b0);
    b.first_draft = b.n;
    b.staged = staged;
    std::fill(staged, staged + 3 * kMaxStepTokens, 0);
    for (int i = 0; i < b.n; ++i) {
        const Row& r = rows[b0 + size_t(i)];
        staged[i] = r.token;
        staged[kMaxStepTokens + i] = r.lane;
        staged[2 * kMaxStepTokens + i] = int32_t(r.position);
        if (r.request >= 0)
            b.first_draft = std::min(b.first_draft, i);
        // a kept M-RoPE position or a tower row: the block states them all
        b.multimodal = b.multimodal || r.rope || r.embedding_row >= 0;
        b.positions.push_back(
            r.rope.value_or(MropePosition::text(uint32_t(int64_t(r.position) + rope_offset_.at(size_t(r.lane))))));
        b.embedding_rows.push_back(r.embedding_row);
    }
    return b;
}

void MtpHead::enqueue_block(const Block& b, int column, bool chained, bool keep_drafts,
                            std::span<const float> embeddings, const RoundInputs* round) {
    const uint32_t V = run_.config().vocab_size;
    int32_t* in = run_.step_in();
    const int n = b.n;
    cuda_check(cudaMemcpyAsync(in, b.staged, 3 * kMaxStepTokens * 4, cudaMemcpyHostToDevice, run_.stream()),
               "MTP step inputs");
    if (round) // the positions after each lane's kept tokens, known on the device only
        cuda_check(kernels::round_draft_inputs(in, in + kMaxStepTokens, in + 2 * kMaxStepTokens, n, round->starts,
                                               round->n_keep, round->ids, round->ids_stride, drafts_, drafts_w_, column,
                                               run_.stream()), "MTP round inputs");
    else if (chained)
        cuda_check(kernels::mtp_draft_tokens(in, in + kMaxStepTokens, drafts_, drafts_w_, column - 1, n, run_.stream()),
                   "MTP draft tokens");
    cuda_check(kernels::mtp_take_rows(ring_, kRingRows, hs_, in + kMaxStepTokens, in + 2 * kMaxStepTokens, hidden_, hs_,
                                      run_.config().hidden_size, n, run_.stream()), "MTP hidden rows");
    const PrefillInputs block{b.positions, b.embedding_rows, embeddings};
    run_.enqueue_mtp(n, hidden_, hs_, b.multimodal ? &block : nullptr);
    if (b.first_draft == n)
        return;
    const int first = b.first_draft, d = n - first; // draft rows are the block's last ones
    run_.enqueue_head(first, d);
    cuda_check(kernels::mtp_argmax(run_.logits(), run_.logits_stride(), int(V), in + kMaxStepTokens + first, drafts_,
                                   drafts_w_, column, d, run_.stream()), "MTP argmax");
    if (keep_drafts) // d feeds the next draft step, at the next position
        cuda_check(kernels::mtp_keep_rows(run_.step_rows_f32() + first * hs_, hs_, in + kMaxStepTokens + first,
                                          in + 2 * kMaxStepTokens + first, 1, ring_, kRingRows, hs_,
                                          run_.config().hidden_size, d, run_.stream()), "MTP draft rows");
}

void MtpHead::run(const std::vector<Row>& rows, int column, bool chained, bool keep_drafts,
                  const std::function<void(size_t, size_t)>& stage, std::vector<std::vector<float>>* logits,
                  std::span<const float> embeddings) {
    const uint32_t V = run_.config().vocab_size;
    for (size_t b0 = 0; b0 < rows.size(); b0 += kMaxStepTokens) {
        const size_t b1 = std::min(rows.size(), b0 + kMaxStepTokens);
        if (stage)
            stage(b0, b1);
        // Pageable host memory: the copy stages it at once, so step_in_ may be rewritten for the next block.
        const Block b = stage_block(rows, b0, b1, step_in_.data());
        enqueue_block(b, column, chained, keep_drafts, embeddings, nullptr);
        for (int i = 0; logits && i < b.n - b.first_draft; ++i) {
            std::vector<float>& out = (*logits)[size_t(rows[b0 + size_t(b.first_draft + i)].request)];
            const size_t at = out.size();
            out.resize(at + V);
            cuda_check(cudaMemcpyAsync(out.data() + at, run_.logits() + int64_t(i) * run_.logits_stride(), V * 4,
                                       cudaMemcpyDeviceToHost, run_.stream()), "MTP logits");
            cuda_check(cudaStreamSynchronize(run_.stream()), "MTP logits");
        }
    }
}

void MtpHead::catch_up_behind(int lane, std::span<const int32_t> tokens) {
    const uint32_t n = uint32_t(tokens.size());
    if (n < mtp_length_.at(size_t(lane)) + kCatchUpRows)
        return;
    clamp_pending(lane, n);
    const uint32_t m = mtp_length_.at(size_t(lane));
    std::vector<Row> todo;
    for (uint32_t t = m; t + 1 < n && tokens[t + 1] >= 0; ++t)
        todo.push_back(pending_row(lane, t, tokens[t + 1]));
    run(todo, 0, false, false, nullptr, nullptr);
    advance(lane, m + uint32_t(todo.size()));
}

void MtpHead::take_prefill(int lane, std::span<const int32_t> before, std::span<const int32_t> added, uint32_t start,
                           int n, const float* rows, int64_t stride, PrefillRunner* chunk,
                           const PrefillInputs* multimodal) {
    const uint32_t end = start + uint32_t(n);
    auto token_at = [&](uint32_t p) { return p < before.size() ? before[p] : added[p - before.size()]; };
    // x_{t+1}'s tower row when it is a placeholder of this chunk (-1: its token's embedding).
    auto embedding_row = [&](uint32_t p) { return multimodal && p >= start ? multimodal->embedding_rows[p - start] : -1; };
    const std::span<const float> embeddings = multimodal ? multimodal->embeddings : std::span<const float>{};
    clamp_pending(lane, start);
    if (multimodal)
        keep_positions(lane, start, multimodal->positions);
    const uint32_t mtp = mtp_length_.at(size_t(lane));
    if (chunk && rows && (mtp + 1 == start || mtp == start) && end - 1 - mtp >= kMinChunkRows &&
        chunk->can_run_mtp()) { // x_{t+1} are the chunk's own ids, already on the device
        const bool first_pending = mtp + 1 == start;
        if (first_pending) // out of the ring first: the row kept next may take its slot (n % kRingRows == 0)
            cuda_check(cudaMemcpyAsync(hidden_, ring_row(lane, mtp), run_.config().hidden_size * 4,
                                       cudaMemcpyDeviceToDevice, run_.stream()), "MTP rows");
        stage_rows(lane, end - 1, end, rows, start, stride); // the last row stays pending: keep it first
        std::vector<MropePosition> positions;
        std::vector<int32_t> embedding_rows;
        const bool explicit_rows = multimodal || !rope_.at(size_t(lane)).empty();
        for (uint32_t t = mtp; explicit_rows && t + 1 < end; ++t) {
            const Row r = pending_row(lane, t, 0);
            positions.push_back(r.rope.value_or(MropePosition::text(uint32_t(int64_t(t) + rope_offset_.at(size_t(lane))))));
            embedding_rows.push_back(embedding_row(t + 1));
        }
        const PrefillInputs mtp_rows{positions, embedding_rows, embeddings};
        chunk->enqueue_mtp(lane, mtp, int(end - 1 - mtp), int(mtp + 1 - start), first_pending ? hidden_ : nullptr,
                           explicit_rows ? &mtp_rows : nullptr);
        advance(lane, end - 1);
        return;
    }
    if (!rows) { // the runner's step rows: into the ring before the head overwrites them
        enqueue_keep_step_rows(n);
        clamp_pending(lane, end);
    }
    const uint32_t m = mtp_length_.at(size_t(lane));
    std::vector<Row> todo;
    for (uint32_t t = m; t + 1 < end && token_at(t + 1) >= 0; ++t) {
        todo.push_back(pending_row(lane, t, token_at(t + 1)));
        todo.back().embedding_row = embedding_row(t + 1);
    }
    uint32_t staged = rows ? start : end;
    run(todo, 0, false, false, [&](size_t, size_t b1) { // the block's hidden rows into the ring
        const uint32_t need = todo[b1 - 1].position + 1;
        if (staged < need) {
            stage_rows(lane, staged, need, rows, start, stride);
            staged = need;
        }
    }, nullptr, embeddings);
    advance(lane, m + uint32_t(todo.size()));
    if (staged < end) // the rows still pending (the last one at least)
        stage_rows(lane, std::max(staged, mtp_length_.at(size_t(lane))), end, rows, start, stride);
}

std::vector<std::vector<int32_t>> MtpHead::draft(std::span<const DraftRequest> requests,
                                                 std::span<const std::span<const int32_t>> lane_tokens,
                                                 const std::function<void(int, size_t)>& reserve,
                                                 std::vector<std::vector<float>>* logits) {
    const ModelConfig& c = run_.config();
    std::vector<std::vector<int32_t>> drafts(requests.size());
    if (logits)
        logits->assign(requests.size(), {});
    std::vector<int> k(requests.size(), 0);
    std::vector<Row> rows, firsts;
    int k_max = 0;
    for (size_t i = 0; i < requests.size(); ++i) { // every request checked before any state moves
        const DraftRequest& q = requests[i];
        if (q.k < 1 || uint32_t(q.k) > plan_.max_draft_tokens)
            throw Error("backend: " + std::to_string(q.k) + " drafts asked, the plan allows 1.." +
                        std::to_string(plan_.max_draft_tokens));
        if (q.next_token < 0 || uint32_t(q.next_token) >= c.vocab_size)
            throw Error("backend: token id " + std::to_string(q.next_token) + " is outside the vocabulary");
        const uint32_t from = std::min<size_t>(mtp_length_.at(size_t(q.lane)) + 1, lane_tokens[i].size());
        if (std::find(lane_tokens[i].begin() + from, lane_tokens[i].end(), -1) != lane_tokens[i].end())
            throw Error("backend: draft_mtp on lane " + std::to_string(q.lane) +
                        " while one of its decode steps is not ended");
    }
    for (size_t i = 0; i < requests.size(); ++i) { // the pages first: reserve may throw (pool full)
        const uint32_t n = uint32_t(lane_tokens[i].size());
        const size_t room = plan_.max_context > n + 1 ? plan_.max_context - n - 1 : 0;
        const int want = int(std::min<size_t>(size_t(requests[i].k), room));
        if (n > 0 && mtp_length_.at(size_t(requests[i].lane)) < n && want > 1) // as has_last below
            reserve(requests[i].lane, size_t(n) + size_t(want) - 1);
    }
    for (size_t i = 0; i < requests.size(); ++i) {
        const DraftRequest& q = requests[i];
        const std::span<const int32_t> tokens = lane_tokens[i];
        const uint32_t n = uint32_t(tokens.size());
        clamp_pending(q.lane, n);
        const uint32_t m = mtp_length_.at(size_t(q.lane));
        const bool has_last = n > 0 && m < n;
        const size_t room = plan_.max_context > n + 1 ? plan_.max_context - n - 1 : 0;
        k[i] = has_last ? int(std::min<size_t>(size_t(q.k), room)) : 0;
        if (!has_last)
            continue;
        for (uint32_t t = m; t + 1 < n; ++t) // the catch-up, drafts or not
            rows.push_back(pending_row(q.lane, t, tokens[t + 1]));
        Row first = pending_row(q.lane, n - 1, q.next_token);
        advance(q.lane, n - 1); // position n - 1 is fed below with next_token, and left pending
        if (k[i] == 0)
            continue;
        first.request = int(i);
        firsts.push_back(first);
        k_max = std::max(k_max, k[i]);
    }
    // Draft 1: the catch-up ends with every lane's last position, fed with next_token.
    rows.insert(rows.end(), firsts.begin(), firsts.end());
    run(rows, 0, false, k_max > 1, nullptr, logits);
    for (int j = 1; j < k_max; ++j) { // draft j + 1 at position n - 1 + j: (d, draft j)
        std::vector<Row> step;
        for (const Row& f : firsts)
            if (k[size_t(f.request)] > j)
                step.push_back({f.lane, f.position + uint32_t(j), 0, f.request, std::nullopt, -1});
        run(step, j, true, j + 1 < k_max, nullptr, logits);
    }
    if (k_max == 0)
        return drafts;
    std::vector<int32_t> table(size_t(plan_.n_lanes) * size_t(drafts_w_));
    cuda_check(cudaMemcpyAsync(table.data(), drafts_, table.size() * 4, cudaMemcpyDeviceToHost, run_.stream()),
               "MTP drafts");
    cuda_check(cudaStreamSynchronize(run_.stream()), "MTP drafts");
    for (size_t i = 0; i < requests.size(); ++i)
        drafts[i].assign(table.begin() + long(requests[i].lane) * drafts_w_,
                         table.begin() + long(requests[i].lane) * drafts_w_ + k[i]);
    return drafts;
}

} // namespace ninfer::core::cuda
