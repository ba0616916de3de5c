// ninfer::core::grammar - the per-request matcher: token masks from the cached tables, advancing, rollback.
#include "core/grammar/matcher.h"

#include "core/grammar/pda.h"
#include "core/grammar/token_masks.h"
#include "core/util/error.h"

#include <algorithm>
#include <random>

namespace ninfer::core::grammar {

struct Matcher::Scratch {
    explicit Scratch(const Program& program) : stepper(program), walker(program) {}
    Stepper stepper;
    MaskWalker walker;
    std::vector<Frame> a, b;
};

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenIndex> index)
    : grammar_(std::move(grammar)), index_(std::move(index)) {
    if (!grammar_ || !index_) throw Error("grammar: matcher needs a grammar and a token index");
    masks_ = grammar_->masks_for(index_);
    scratch_ = std::make_unique<Scratch>(grammar_->program());
    frames_ = new_frame_pool();
    const CloseResult r = scratch_->stepper.start(frames_, tops_);
    steps_.push_back({0, uint32_t(tops_.size()), uint32_t(frames_.size()), r.reached_root, false});
}

Matcher::Matcher(const Matcher& other)
    : grammar_(other.grammar_), index_(other.index_), masks_(other.masks_), frames_(other.frames_), tops_(other.tops_),
      steps_(other.steps_), scratch_(std::make_unique<Scratch>(grammar_->program())) {}

Matcher::~Matcher() = default;

std::span<const Frame> Matcher::tops() const {
    const Step& s = steps_.back();
    return std::span<const Frame>(tops_).subspan(s.tops_begin, s.tops_end - s.tops_begin);
}

bool Matcher::accepting() const { return steps_.back().accepting; }

bool Matcher::finished() const { return steps_.back().ended || steps_.back().tops_begin == steps_.back().tops_end; }

void Matcher::fill_mask(std::span<uint32_t> words) const {
    if (words.size() < index_->n_words())
        throw Error("grammar: mask has " + std::to_string(words.size()) + " words, the vocabulary needs " +
                    std::to_string(index_->n_words()));
    std::fill(words.begin(), words.end(), 0u);
    const Step& s = steps_.back();
    if (!s.ended) {
        for (const Frame& top : tops()) {
            const PositionMask& mask = masks_->get(top, frames_);
            mask.add_accepted(words);
            scratch_->walker.add_uncertain(*index_, mask, top, frames_, words);
        }
    }
    if (s.accepting && !s.ended)
        for (int32_t id : index_->end_ids()) words[size_t(id) >> 5] |= uint32_t(1) << (id & 31);
}

bool Matcher::advance_bytes(std::string_view bytes, bool& accepting) {
    Scratch& s = *scratch_;
    s.a.assign(tops().begin(), tops().end());
    accepting = steps_.back().accepting;
    for (char c : bytes) {
        s.b.clear();
        const CloseResult r = s.stepper.advance(frames_, s.a, uint8_t(c), s.b);
        if (!r.matched) return false;
        accepting = r.reached_root;
        std::swap(s.a, s.b);
    }
    return true;
}

bool Matcher::accept_bytes(std::string_view bytes) {
    if (steps_.back().ended) return false;
    const size_t pool_size = frames_.size();
    bool accepting = false;
    if (!advance_bytes(bytes, accepting)) {
        frames_.resize(pool_size);
        return false;
    }
    const auto begin = uint32_t(tops_.size());
    tops_.insert(tops_.end(), scratch_->a.begin(), scratch_->a.end());
    steps_.push_back({begin, uint32_t(tops_.size()), uint32_t(frames_.size()), accepting, false});
    return true;
}

bool Matcher::accept(int32_t token) {
    if (index_->is_end(token)) {
        if (!accepting() || steps_.back().ended) return false;
        const auto end = uint32_t(tops_.size());
        steps_.push_back({end, end, uint32_t(frames_.size()), true, true});
        return true;
    }
    const std::string_view bytes = index_->bytes(token);
    if (bytes.empty()) return false;
    return accept_bytes(bytes);
}

void Matcher::rollback(size_t n_tokens) {
    if (n_tokens > n_accepted())
        throw Error("grammar: rollback of " + std::to_string(n_tokens) + " tokens, only " +
                    std::to_string(n_accepted()) + " accepted");
    steps_.resize(steps_.size() - n_tokens);
    tops_.resize(steps_.back().tops_end);
    frames_.resize(steps_.back().pool_size);
}

bool allowed_tokens(std::span<const uint32_t> words, const TokenIndex& index, std::vector<int32_t>& tokens) {
    bool end = false;
    for (size_t w = 0; w < words.size(); ++w)
        for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
            const auto t = int32_t(w * 32 + size_t(__builtin_ctz(bits)));
            if (index.is_end(t)) end = true;
            else tokens.push_back(t);
        }
    return end;
}

size_t warm_up(const std::shared_ptr<const Grammar>& grammar, const std::shared_ptr<const TokenIndex>& index,
               std::chrono::milliseconds budget, uint32_t seed) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    std::mt19937 rng(seed);
    std::vector<uint32_t> words(index->n_words());
    std::vector<int32_t> allowed;
    size_t steps = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        Matcher m(grammar, index);
        for (size_t n = 0; n < 4096 && std::chrono::steady_clock::now() < deadline; ++n, ++steps) {
            m.fill_mask(words);
            allowed.clear();
            const bool end = allowed_tokens(words, *index, allowed);
            if (allowed.empty() || (end && rng() % 4 == 0)) break;
            // The shorter of two random tokens: walks then leave strings and reach more of the
            // grammar's structure than uniform picks, which mostly extend long strings.
            const int32_t a = allowed[rng() % allowed.size()], b = allowed[rng() % allowed.size()];
            m.accept(index->bytes(a).size() <= index->bytes(b).size() ? a : b);
        }
    }
    return steps;
}

} // namespace ninfer::core::grammar
