// ninfer::core - the CPU MTP head driver: pending hidden rows, catch-up passes and greedy drafts.
#include "core/cpu/mtp_head.h"

#include "core/util/error.h"

#include <algorithm>
#include <limits>

namespace ninfer::core::cpu {

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

int32_t argmax_row(const float* row, size_t n) {
    return int32_t(std::max_element(row, row + n) - row); // the first (lowest id) maximum
}

} // namespace

MtpHead::MtpHead(const ModelWeights& weights, const MemoryPlan& plan, ModelRunner& runner, KvStore& kv)
    : c_(weights.config), plan_(plan), runner_(runner), kv_(kv) {}

void MtpHead::keep_hidden(std::span<const RowSegment> segments) {
    const size_t H = c_.hidden_size;
    for (const RowSegment& s : segments) {
        s.lane->mtp_hidden.insert(s.lane->mtp_hidden.end(), runner_.hidden(s.row),
                                  runner_.hidden(s.row) + size_t(s.n) * H);
        for (uint32_t i = 0; i < s.n; ++i) // the positions the main model gave these rows
            s.lane->mtp_rope.push_back(s.positions ? s.positions[i]
                                                   : MropePosition::text(uint32_t(int64_t(s.start + i) + s.lane->rope_offset)));
    }
}

std::vector<size_t> MtpHead::feed(std::span<LaneState* const> lanes, std::span<const int32_t> next_tokens,
                                  bool keep_last) {
    const size_t H = c_.hidden_size;
    segs_.clear();
    tokens_.clear();
    hidden_.clear();
    rope_.clear();
    embedding_rows_.clear();
    std::vector<size_t> last_row(lanes.size(), kNone);
    for (size_t i = 0; i < lanes.size(); ++i) {
        LaneState& lane = *lanes[i];
        const size_t n = lane.tokens.size(), pending = lane.mtp_hidden.size() / H;
        if (lane.mtp_length + pending != n)
            throw Error("backend: MTP head out of step with lane (" + std::to_string(lane.mtp_length) +
                        " + " + std::to_string(pending) + " != " + std::to_string(n) + ")");
        // Position t needs x_{t+1}: the lane's own tokens up to n - 1, then the given next token.
        const size_t known = n + (next_tokens[i] >= 0 ? 1 : 0);
        const uint32_t count = uint32_t(std::min(pending, known - std::min<size_t>(known, lane.mtp_length + 1)));
        if (count == 0)
            continue;
        segs_.push_back({&lane, lane.mtp_length, count, tokens_.size()});
        const PrefillInputs* chunk = lane.mtp_chunk;
        for (uint32_t j = 0; j < count; ++j) {
            const size_t next = lane.mtp_length + j + 1;
            tokens_.push_back(next < n ? lane.tokens[next] : next_tokens[i]);
            const size_t in_chunk = next - lane.mtp_chunk_start; // wraps when before the chunk
            embedding_rows_.push_back(chunk && next >= lane.mtp_chunk_start && in_chunk < chunk->embedding_rows.size()
                                          ? chunk->embedding_rows[in_chunk] : -1);
            rope_.push_back(j < lane.mtp_rope.size() ? lane.mtp_rope[j]
                                                     : MropePosition::text(uint32_t(int64_t(lane.mtp_length + j) + lane.rope_offset)));
        }
        if (chunk)
            segs_.back().embeddings = chunk->embeddings.data();
        hidden_.insert(hidden_.end(), lane.mtp_hidden.begin(), lane.mtp_hidden.begin() + size_t(count) * H);
        // A draft feeds the lane's last position with a token the lane does not hold yet: that
        // position stays pending, so the next pass feeds it again with the token appended then.
        const uint32_t consumed = count - (keep_last && next_tokens[i] >= 0 ? 1 : 0);
        lane.mtp_hidden.erase(lane.mtp_hidden.begin(), lane.mtp_hidden.begin() + size_t(consumed) * H);
        lane.mtp_rope.erase(lane.mtp_rope.begin(), lane.mtp_rope.begin() + std::min<size_t>(consumed, lane.mtp_rope.size()));
        lane.mtp_length += consumed;
        last_row[i] = tokens_.size() - 1;
    }
    for (RowSegment& seg : segs_) { // the vectors are complete: point into them
        seg.positions = rope_.data() + seg.row;
        if (seg.embeddings)
            seg.embedding_rows = embedding_rows_.data() + seg.row;
    }
    if (!segs_.empty())
        runner_.mtp_forward(segs_, tokens_, hidden_.data());
    return last_row;
}

void MtpHead::catch_up(std::span<LaneState* const> lanes, std::span<const int32_t> next_tokens) {
    feed(lanes, next_tokens, false);
}

std::vector<std::vector<int32_t>> MtpHead::draft(std::span<LaneState* const> lanes,
                                                 std::span<const DraftRequest> requests,
                                                 std::vector<std::vector<float>>* logits) {
    const size_t H = c_.hidden_size, V = c_.vocab_size;
    std::vector<std::vector<int32_t>> drafts(requests.size());
    if (logits)
        logits->assign(requests.size(), {});
    // How many drafts each lane can have: the head needs the hidden state of the lane's last
    // position, and the verify step after it appends k + 1 tokens within max-context.
    std::vector<int> k(requests.size(), 0);
    std::vector<int32_t> next(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
        LaneState& lane = *lanes[i];
        const size_t n = lane.tokens.size();
        if (requests[i].k < 1 || uint32_t(requests[i].k) > plan_.max_draft_tokens)
            throw Error("backend: " + std::to_string(requests[i].k) + " drafts asked, the plan allows 1.." +
                        std::to_string(plan_.max_draft_tokens));
        if (requests[i].next_token < 0 || uint32_t(requests[i].next_token) >= c_.vocab_size)
            throw Error("backend: token id " + std::to_string(requests[i].next_token) +
                        " is outside the vocabulary");
        const bool has_last = n > 0 && lane.mtp_length < n;
        const size_t room = plan_.max_context > n + 1 ? plan_.max_context - n - 1 : 0;
        k[i] = has_last ? int(std::min<size_t>(size_t(requests[i].k), room)) : 0;
        next[i] = k[i] > 0 ? requests[i].next_token : -1;
        if (k[i] > 1)
            kv_.reserve(lane.pages, uint32_t(n + size_t(k[i]) - 1));
    }
    // Draft 1: the catch-up pass ends at each lane's last position, fed with next_token.
    std::vector<size_t> rows = feed(lanes, next, true);
    fed_back_.assign(requests.size() * H, 0.0f);
    std::vector<size_t> active, out_rows;
    for (size_t i = 0; i < requests.size(); ++i)
        if (k[i] > 0) {
            active.push_back(i);
            out_rows.push_back(rows[i]);
        }
    for (int step = 1; !active.empty(); ++step) {
        logits_.resize(out_rows.size() * V);
        runner_.logits(out_rows, logits_.data());
        std::vector<size_t> still;
        for (size_t a = 0; a < active.size(); ++a) {
            const size_t i = active[a];
            const float* row = logits_.data() + a * V;
            drafts[i].push_back(argmax_row(row, V));
            if (logits)
                (*logits)[i].insert((*logits)[i].end(), row, row + V);
            std::copy_n(runner_.hidden(out_rows[a]), H, fed_back_.data() + i * H);
            if (step < k[i])
                still.push_back(i);
        }
        active.swap(still);
        if (active.empty())
            break;
        // Draft step + 1 at position n + step - 1: (d, the draft just made).
        segs_.clear();
        tokens_.clear();
        hidden_.clear();
        out_rows.clear();
        for (size_t i : active) {
            LaneState& lane = *lanes[i];
            segs_.push_back({&lane, uint32_t(lane.tokens.size()) + uint32_t(step) - 1, 1, tokens_.size()});
            out_rows.push_back(tokens_.size());
            tokens_.push_back(drafts[i].back());
            hidden_.insert(hidden_.end(), fed_back_.begin() + i * H, fed_back_.begin() + (i + 1) * H);
        }
        runner_.mtp_forward(segs_, tokens_, hidden_.data());
    }
    return drafts;
}

} // namespace ninfer::core::cpu
