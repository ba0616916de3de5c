// ninfer::core - BPE merges: a flat pair->rank hash table and heap-ordered merging.
#include "core/frontend/tokenizer_bpe.h"

#include <algorithm>

namespace ninfer::core {

namespace {

uint64_t pair_key(TokenId left, TokenId right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
}

size_t slot_hash(uint64_t key, size_t mask) {
    return size_t((key * 0x9E3779B97F4A7C15ull) >> 29) & mask;
}

struct Symbol {
    TokenId id;
    int prev;
    int next;
    bool alive;
};

struct Candidate {
    uint32_t rank;
    int pos;
    TokenId merged;
    // std heap is a max-heap: "less" means lower priority, i.e. higher rank or later position.
    bool operator<(const Candidate& o) const {
        return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
};

} // namespace

BpeMerger::BpeMerger() {
    byte_token_.fill(-1);
    slots_.resize(1024);
}

void BpeMerger::grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
        if (s.key == kEmpty) continue;
        size_t i = slot_hash(s.key, mask);
        while (slots_[i].key != kEmpty)
            i = (i + 1) & mask;
        slots_[i] = s;
    }
}

void BpeMerger::add_merge(TokenId left, TokenId right, TokenId merged) {
    if ((n_merges_ + 1) * 2 > slots_.size()) grow();
    uint64_t key = pair_key(left, right);
    size_t mask = slots_.size() - 1;
    size_t i = slot_hash(key, mask);
    while (slots_[i].key != kEmpty && slots_[i].key != key)
        i = (i + 1) & mask;
    slots_[i] = Slot{key, uint32_t(n_merges_), merged};
    ++n_merges_;
}

const BpeMerger::Slot* BpeMerger::lookup(TokenId left, TokenId right) const {
    uint64_t key = pair_key(left, right);
    size_t mask = slots_.size() - 1;
    for (size_t i = slot_hash(key, mask);; i = (i + 1) & mask) {
        if (slots_[i].key == key) return &slots_[i];
        if (slots_[i].key == kEmpty) return nullptr;
    }
}

void BpeMerger::encode_word(std::string_view bytes, std::vector<TokenId>& out) const {
    thread_local std::vector<Symbol> symbols;
    thread_local std::vector<Candidate> heap;
    symbols.clear();
    heap.clear();
    for (unsigned char b : bytes) {
        TokenId id = byte_token_[b];
        if (id < 0) continue;
        int index = int(symbols.size());
        symbols.push_back(Symbol{id, index - 1, index + 1, true});
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;
    auto push_pair = [&](int pos, int next) {
        if (const Slot* s = lookup(symbols[pos].id, symbols[next].id)) {
            heap.push_back(Candidate{s->rank, pos, s->merged});
            std::push_heap(heap.begin(), heap.end());
        }
    };
    for (int i = 0; i + 1 < int(symbols.size()); ++i)
        push_pair(i, i + 1);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end());
        Candidate top = heap.back();
        heap.pop_back();
        Symbol& left = symbols[top.pos];
        if (!left.alive || left.next < 0) continue;
        Symbol& right = symbols[left.next];
        const Slot* current = lookup(left.id, right.id);
        if (!current || current->merged != top.merged) continue; // stale entry
        left.id = top.merged;
        right.alive = false;
        left.next = right.next;
        if (left.next >= 0) symbols[left.next].prev = top.pos;
        if (left.prev >= 0) push_pair(left.prev, top.pos);
        if (left.next >= 0) push_pair(top.pos, left.next);
    }
    for (int i = 0; i >= 0; i = symbols[i].next)
        out.push_back(symbols[i].id);
}

} // namespace ninfer::core
