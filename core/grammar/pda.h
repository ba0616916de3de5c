// ninfer::core::grammar - the pushdown automaton's step: closing a set of stacks and advancing it by a byte.
//
// Contract:
// - A stack is a Frame {pos, parent}: pos is the byte-set element it waits on (a "top"), parent
//   the index of its continuation in a frame pool (a vector<Frame> that only grows; callers
//   truncate it to undo). Pool index kRootFrame means "bottom of the stack", kOpenFrame "unknown
//   context below" (token_masks.cpp simulates a rule alone with it).
// - Stepper::close(items, out) expands (pos, parent) items depth-first through rule references
//   (a reference in tail position reuses the parent: right recursion does not grow the stack) and
//   End elements (popping to the parent), appending each distinct top to out. It reports whether
//   an End reached the root (the text so far is complete) or the open bottom.
// - Stepper::advance(tops, byte, out) moves every top whose byte set has `byte` past it and closes
//   the result; matched says whether any top took the byte.
// - Grammars are free of left recursion (lower() checks), so closing always terminates.
// Thread safety: a Stepper holds scratch space; one per thread.
#pragma once

#include "core/grammar/grammar_program.h"
#include "core/grammar/matcher.h"

#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ninfer::core::grammar {

inline constexpr uint32_t kRootFrame = 0;
inline constexpr uint32_t kOpenFrame = 1;
inline constexpr size_t kMaxTops = 4096; // past this, further stacks are dropped (the language only narrows)

struct CloseResult {
    bool matched = false;        // advance: some top took the byte
    bool reached_root = false;   // an End popped the root frame: the text so far is complete
    bool reached_open = false;   // an End popped the open frame (unknown context)
};

class Stepper {
  public:
    explicit Stepper(const Program& program) : program_(program) {}
    // With an interner, equal continuation frames share one pool entry ((pos << 32 | parent) ->
    // index), so equal stacks are equal Frame values (token_masks.cpp memoizes on them).
    void set_interner(std::unordered_map<uint64_t, uint32_t>* interner) { interner_ = interner; }
    void close(std::vector<Frame>& pool, std::vector<Frame>& out, CloseResult& result);
    CloseResult advance(std::vector<Frame>& pool, std::span<const Frame> tops, uint8_t byte, std::vector<Frame>& out);
    // The tops of the start state (root rule alternatives over kRootFrame).
    CloseResult start(std::vector<Frame>& pool, std::vector<Frame>& out);

  private:
    const Program& program_;
    std::unordered_map<uint64_t, uint32_t>* interner_ = nullptr;
    std::vector<Frame> work_;
    struct FrameHash {
        size_t operator()(const Frame& f) const { return (uint64_t(f.pos) << 32 | f.parent) * 0x9E3779B97F4A7C15ull >> 16; }
    };
    struct FrameEq {
        bool operator()(const Frame& a, const Frame& b) const { return a.pos == b.pos && a.parent == b.parent; }
    };
    std::vector<Frame> seen_;                                   // small closures: linear search
    std::unordered_set<Frame, FrameHash, FrameEq> seen_set_;    // large ones (big enums)
};

// A fresh pool: the two sentinel frames.
inline std::vector<Frame> new_frame_pool() { return {Frame{0, 0}, Frame{0, 0}}; }

} // namespace ninfer::core::grammar
