// ninfer::core::grammar - closing and advancing sets of parse stacks over the lowered program.
#include "core/grammar/pda.h"

#include <algorithm>

namespace ninfer::core::grammar {
namespace {

bool contains(const std::vector<Frame>& v, Frame f) {
    return std::any_of(v.begin(), v.end(), [&](const Frame& g) { return g.pos == f.pos && g.parent == f.parent; });
}

} // namespace

// work_ holds the pending items; seen_ every item expanded in this closure (items repeat through
// nullable rules and shared continuations).
void Stepper::close(std::vector<Frame>& pool, std::vector<Frame>& out, CloseResult& result) {
    seen_.clear();
    seen_set_.clear();
    while (!work_.empty()) {
        const Frame item = work_.back();
        work_.pop_back();
        if (seen_.size() < 64) {
            if (contains(seen_, item)) continue;
            seen_.push_back(item);
            if (seen_.size() == 64) seen_set_.insert(seen_.begin(), seen_.end()); // switch to hashing
        } else if (!seen_set_.insert(item).second) {
            continue;
        }
        const uint32_t kind = program_.kind(item.pos);
        if (kind == Program::kByteSet) {
            if (out.size() < kMaxTops) out.push_back(item);
        } else if (kind == Program::kRuleRef) {
            uint32_t cont = item.parent;
            if (program_.kind(item.pos + 1) != Program::kEnd) {
                cont = uint32_t(pool.size());
                if (interner_) {
                    auto [it, fresh] = interner_->try_emplace(uint64_t(item.pos + 1) << 32 | item.parent, cont);
                    if (fresh) pool.push_back({item.pos + 1, item.parent});
                    cont = it->second;
                } else {
                    pool.push_back({item.pos + 1, item.parent});
                }
            }
            const uint32_t rule = program_.payload(item.pos);
            for (uint32_t a = program_.rule_alts[rule + 1]; a-- > program_.rule_alts[rule];)
                work_.push_back({program_.alt_starts[a], cont});
        } else if (item.parent == kRootFrame) {
            result.reached_root = true;
        } else if (item.parent == kOpenFrame) {
            result.reached_open = true;
        } else {
            work_.push_back(pool[item.parent]);
        }
    }
}

CloseResult Stepper::advance(std::vector<Frame>& pool, std::span<const Frame> tops, uint8_t byte, std::vector<Frame>& out) {
    CloseResult result;
    work_.clear();
    for (const Frame& top : tops)
        if (program_.byte_set(top.pos).has(byte)) work_.push_back({top.pos + 1, top.parent});
    result.matched = !work_.empty();
    std::reverse(work_.begin(), work_.end()); // keep the tops' order (work_ is a stack)
    close(pool, out, result);
    return result;
}

CloseResult Stepper::start(std::vector<Frame>& pool, std::vector<Frame>& out) {
    CloseResult result;
    work_.clear();
    const uint32_t root = program_.root;
    for (uint32_t a = program_.rule_alts[root + 1]; a-- > program_.rule_alts[root];)
        work_.push_back({program_.alt_starts[a], kRootFrame});
    close(pool, out, result);
    return result;
}

} // namespace ninfer::core::grammar
