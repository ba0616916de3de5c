// ninfer::core::grammar - per-position token tables (a pruned vocabulary-trie walk) and their runtime check.
#include "core/grammar/token_masks.h"

#include <algorithm>

namespace ninfer::core::grammar {

void PositionMask::add_accepted(std::span<uint32_t> words) const {
    if (!accepted_words.empty()) {
        for (size_t w = 0; w < accepted_words.size(); ++w) words[w] |= accepted_words[w];
        return;
    }
    for (int32_t id : accepted_ids) words[size_t(id) >> 5] |= uint32_t(1) << (id & 31);
}

void MaskWalker::reset(Frame top, std::vector<Frame>& pool) {
    tops_.assign(1, top);
    level_end_.assign(1, 1);
    level_pool_.assign(1, uint32_t(pool.size()));
}

void MaskWalker::truncate(size_t n_levels, std::vector<Frame>& pool) {
    level_end_.resize(n_levels);
    level_pool_.resize(n_levels);
    tops_.resize(level_end_.back());
    pool.resize(level_pool_.back());
}

CloseResult MaskWalker::push(uint8_t byte, std::vector<Frame>& pool) {
    const size_t k = level_end_.size() - 1;
    out_.clear();
    const CloseResult result = stepper_.advance(pool, std::span<const Frame>(tops_).subspan(level_begin(k), level_end_[k] - level_begin(k)),
                                                byte, out_);
    tops_.insert(tops_.end(), out_.begin(), out_.end());
    level_end_.push_back(uint32_t(tops_.size()));
    level_pool_.push_back(uint32_t(pool.size()));
    return result;
}

void MaskWalker::add_uncertain(const TokenIndex& index, const PositionMask& mask, Frame top, std::vector<Frame>& pool,
                               std::span<uint32_t> words) {
    if (mask.uncertain_ranks.empty()) return;
    const size_t pool_size = pool.size();
    reset(top, pool);
    constexpr size_t kNone = SIZE_MAX;
    size_t fail_at = kNone; // index of the byte the previous token failed on
    for (size_t j = 0; j < mask.uncertain_ranks.size(); ++j) {
        const size_t lcp = mask.uncertain_lcp[j];
        if (fail_at != kNone && lcp > fail_at) continue; // shares the failed byte
        const uint32_t rank = mask.uncertain_ranks[j];
        const std::string_view b = index.bytes_at_rank(rank);
        truncate(std::min(lcp, n_levels() - 1) + 1, pool);
        fail_at = kNone;
        for (size_t k = n_levels() - 1; k < b.size(); ++k) {
            const CloseResult r = push(uint8_t(b[k]), pool);
            if (!r.matched || (k + 1 < b.size() && last_level_empty())) {
                fail_at = r.matched ? k + 1 : k;
                if (!r.matched) truncate(n_levels() - 1, pool);
                break;
            }
        }
        if (fail_at == kNone) {
            const int32_t id = index.sorted_ids()[rank];
            words[size_t(id) >> 5] |= uint32_t(1) << (id & 31);
        }
    }
    truncate(1, pool);
    pool.resize(pool_size);
}

TokenMaskCache::TokenMaskCache(const Program& program, std::shared_ptr<const TokenIndex> index)
    : program_(program), index_(std::move(index)) {}

TokenMaskCache::~TokenMaskCache() = default;

size_t TokenMaskCache::n_tables() const {
    std::shared_lock lock(mutex_);
    return tables_.size();
}

size_t TokenMaskCache::memory_bytes() const {
    std::shared_lock lock(mutex_);
    size_t bytes = 0;
    for (const auto& [key, table] : tables_) bytes += key.size() + table->memory_bytes();
    return bytes;
}

// The key: the top's position, then each context frame's position; a trailing marker when the
// stack ends (at the root) within the context.
const PositionMask& TokenMaskCache::get(Frame top, const std::vector<Frame>& pool) {
    std::vector<uint32_t> context{top.pos};
    uint32_t parent = top.parent;
    for (size_t k = 0; k < kContextFrames && parent != kRootFrame && parent != kOpenFrame; ++k) {
        context.push_back(pool[parent].pos);
        parent = pool[parent].parent;
    }
    const bool reaches_root = parent == kRootFrame;
    std::string key(reinterpret_cast<const char*>(context.data()), context.size() * sizeof(uint32_t));
    key += reaches_root ? 'r' : 'o';
    {
        std::shared_lock lock(mutex_);
        if (auto it = tables_.find(key); it != tables_.end()) return *it->second;
    }
    // Computed outside the lock (it takes milliseconds and other matchers keep reading); two
    // threads may compute the same table, the first one stored is kept.
    auto table = std::make_unique<PositionMask>(compute(context, reaches_root));
    std::unique_lock lock(mutex_);
    return *tables_.try_emplace(key, std::move(table)).first->second;
}

namespace {

// The automaton seen from one table's partial stack as a graph of states: frames are interned, a
// state is its sorted set of tops, and byte transitions are memoized, so the trie walk costs one
// lookup per node once a state repeats (inside a string every character leads back to one state).
class StateGraph {
  public:
    struct Transition {
        uint32_t next = 0;
        bool matched = false, reached_open = false;
    };

    StateGraph(const Program& program, const std::vector<uint32_t>& context, bool reaches_root)
        : stepper_(program), pool_(new_frame_pool()) {
        stepper_.set_interner(&frame_ids_);
        uint32_t below = reaches_root ? kRootFrame : kOpenFrame;
        for (size_t k = context.size(); k-- > 1;) {
            frame_ids_[uint64_t(context[k]) << 32 | below] = uint32_t(pool_.size());
            pool_.push_back({context[k], below});
            below = uint32_t(pool_.size() - 1);
        }
        state_of({Frame{context[0], below}});
    }

    Transition step(uint32_t state, uint8_t byte) {
        const uint64_t key = uint64_t(state) << 8 | byte;
        if (auto it = memo_.find(key); it != memo_.end()) return it->second;
        out_.clear();
        const CloseResult r = stepper_.advance(pool_, states_[state], byte, out_);
        std::sort(out_.begin(), out_.end(), [](const Frame& a, const Frame& b) { return a.pos != b.pos ? a.pos < b.pos : a.parent < b.parent; });
        const Transition t{state_of(out_), r.matched, r.reached_open};
        memo_.emplace(key, t);
        return t;
    }
    bool empty(uint32_t state) const { return states_[state].empty(); }

  private:
    uint32_t state_of(const std::vector<Frame>& tops) {
        std::string key(reinterpret_cast<const char*>(tops.data()), tops.size() * sizeof(Frame));
        auto [it, fresh] = state_ids_.try_emplace(std::move(key), uint32_t(states_.size()));
        if (fresh) states_.push_back(tops);
        return it->second;
    }

    Stepper stepper_;
    std::vector<Frame> pool_;
    std::unordered_map<uint64_t, uint32_t> frame_ids_;
    std::vector<std::vector<Frame>> states_;
    std::unordered_map<std::string, uint32_t> state_ids_;
    std::unordered_map<uint64_t, Transition> memo_;
    std::vector<Frame> out_;
};

} // namespace

// Walks the trie in preorder with level k = the state after k bytes, from the context's partial
// stack over the open frame (or the root). open_ended[k]: the partial stack could have emptied
// within the first k bytes, so a token that fails later may still continue in the real stack.
PositionMask TokenMaskCache::compute(const std::vector<uint32_t>& context, bool reaches_root) {
    const auto& nodes = index_->nodes();
    const auto& ids = index_->sorted_ids();
    StateGraph graph(program_, context, reaches_root);
    std::vector<uint32_t> level_state{0};
    std::vector<bool> open_ended{false};
    std::vector<int32_t> accepted;
    std::vector<uint32_t> uncertain;
    auto mark_uncertain = [&](uint32_t from, uint32_t to) { for (uint32_t r = from; r < to; ++r) uncertain.push_back(r); };
    for (size_t i = 0; i < nodes.size();) {
        const TrieNode& node = nodes[i];
        level_state.resize(node.depth);
        open_ended.resize(node.depth);
        const bool open_before = open_ended.back();
        const StateGraph::Transition t = graph.step(level_state.back(), node.byte);
        if (!t.matched) {
            if (open_before) mark_uncertain(node.rank_begin, node.rank_subtree_end);
            i = node.subtree_end;
            continue;
        }
        for (uint32_t rank = node.rank_begin; rank < node.rank_here_end; ++rank) accepted.push_back(ids[rank]);
        const bool open_now = open_before || t.reached_open;
        if (graph.empty(t.next)) {
            if (open_now) mark_uncertain(node.rank_here_end, node.rank_subtree_end);
            i = node.subtree_end;
            continue;
        }
        level_state.push_back(t.next);
        open_ended.push_back(open_now);
        ++i;
    }
    PositionMask mask;
    if (accepted.size() > index_->n_tokens() / 32) {
        mask.accepted_words.assign(index_->n_words(), 0);
        for (int32_t id : accepted) mask.accepted_words[size_t(id) >> 5] |= uint32_t(1) << (id & 31);
    } else {
        std::sort(accepted.begin(), accepted.end());
        mask.accepted_ids = std::move(accepted);
    }
    std::sort(uncertain.begin(), uncertain.end());
    mask.uncertain_lcp.reserve(uncertain.size());
    std::string_view previous;
    for (uint32_t rank : uncertain) {
        const std::string_view b = index_->bytes_at_rank(rank);
        size_t common = 0;
        while (common < previous.size() && common < b.size() && previous[common] == b[common]) ++common;
        mask.uncertain_lcp.push_back(uint16_t(std::min<size_t>(common, UINT16_MAX)));
        previous = b;
    }
    mask.uncertain_ranks = std::move(uncertain);
    return mask;
}

} // namespace ninfer::core::grammar
