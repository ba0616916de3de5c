// ninfer tests - the prompt-lookup n-gram drafter against a brute-force scan of the sequence, and
// its rules (longest suffix first, most recent occurrence, continuation cut at the sequence end).
#include "core/engine/ngram_drafter.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

#include <random>

using namespace ninfer::core;

namespace {

// The definition, evaluated directly: longest recurring suffix, most recent earlier end.
std::vector<int32_t> brute_force(const std::vector<int32_t>& s, int k, uint32_t min_n, uint32_t max_n) {
    const size_t size = s.size();
    for (uint32_t n = max_n; n >= min_n; --n) {
        if (n > size)
            continue;
        for (size_t end = size - 1; end-- > n - 1;) { // earlier ends, latest first
            if (std::equal(s.end() - n, s.end(), s.begin() + long(end + 1 - n))) {
                const size_t to = std::min(size, end + 1 + size_t(k));
                return {s.begin() + long(end + 1), s.begin() + long(to)};
            }
        }
    }
    return {};
}

NgramDrafter with(const std::vector<int32_t>& tokens, NgramOptions o = {}) {
    NgramDrafter d(o);
    d.append(tokens);
    return d;
}

} // namespace

TEST_CASE("ngram_drafter: the longest recurring suffix, its latest occurrence", "[ngram_drafter]") {
    using V = std::vector<int32_t>;
    CHECK(with({1, 2, 3, 4, 5, 9, 1, 2, 3}).draft(2) == V{4, 5});
    // "7 8 9" recurs at the start (then 10); the shorter "8 9" more recently (then 11): longest wins.
    CHECK(with({7, 8, 9, 10, 5, 8, 9, 11, 7, 8, 9}).draft(1) == V{10});
    // Equal lengths: the most recent occurrence.
    CHECK(with({1, 2, 20, 1, 2, 30, 1, 2}).draft(1) == V{30});
    // The continuation stops where the sequence does (here it runs into the suffix itself).
    CHECK(with({1, 2, 3, 1, 2}).draft(5) == V{3, 1, 2});
    // Nothing recurs, or only a single token while min_ngram is 2.
    CHECK(with({1, 2, 3, 4}).draft(3).empty());
    CHECK(with({5, 1, 6, 1}).draft(3).empty());
    CHECK(with({5, 1, 6, 1}, {.min_ngram = 1, .max_ngram = 3}).draft(3) == V{6, 1});
    CHECK(with({1, 2, 1, 2}).draft(0).empty());
    CHECK(NgramDrafter().draft(3).empty());
}

TEST_CASE("ngram_drafter: appended in pieces it drafts what a scan of the sequence gives", "[ngram_drafter]") {
    std::mt19937_64 rng(7);
    for (const NgramOptions o : {NgramOptions{2, 4}, NgramOptions{1, 3}, NgramOptions{3, 8}}) {
        for (int32_t vocab : {3, 8, 50}) {
            NgramDrafter d(o);
            std::vector<int32_t> seq;
            for (int step = 0; step < 300; ++step) {
                std::vector<int32_t> piece(1 + rng() % 4);
                for (int32_t& t : piece)
                    t = int32_t(rng() % uint64_t(vocab));
                d.append(piece);
                seq.insert(seq.end(), piece.begin(), piece.end());
                const int k = 1 + int(rng() % 5);
                INFO("n-grams " << o.min_ngram << ".." << o.max_ngram << " vocab " << vocab << " step " << step);
                REQUIRE(d.draft(k) == brute_force(seq, k, o.min_ngram, o.max_ngram));
            }
            CHECK(d.tokens() == seq);
            d.reset();
            CHECK(d.tokens().empty());
            CHECK(d.draft(3).empty());
        }
    }
}

TEST_CASE("ngram_drafter: n-gram sizes are checked", "[ngram_drafter]") {
    CHECK_THROWS_WITH(NgramDrafter({.min_ngram = 0, .max_ngram = 3}), Catch::Contains("not within 1..16"));
    CHECK_THROWS_WITH(NgramDrafter({.min_ngram = 4, .max_ngram = 3}), Catch::Contains("not within 1..16"));
    CHECK_THROWS_WITH(NgramDrafter({.min_ngram = 2, .max_ngram = 17}), Catch::Contains("not within 1..16"));
}

TEST_CASE("ngram_drafter: may_draft_after_next is false exactly when no next token gives a draft", "[ngram_drafter]") {
    // Small vocabularies, so both answers occur often; every next token is tried by brute force.
    std::mt19937 rng(7);
    for (uint32_t min_n : {1u, 2u, 3u}) {
        for (int vocab : {3, 6, 40}) {
            std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
            int said_no = 0, said_yes = 0;
            for (int trial = 0; trial < 60; ++trial) {
                const NgramOptions options{min_n, 4};
                NgramDrafter d(options);
                std::vector<int32_t> s;
                const int length = 1 + trial % 24;
                for (int i = 0; i < length; ++i) s.push_back(pick(rng));
                d.append(s);
                bool some_next_drafts = false;
                for (int32_t t = 0; t < vocab && !some_next_drafts; ++t) {
                    std::vector<int32_t> with(s);
                    with.push_back(t);
                    some_next_drafts = !brute_force(with, 1, min_n, 4).empty();
                }
                INFO("min_ngram " << min_n << " vocab " << vocab << " length " << length);
                CHECK(d.may_draft_after_next() == some_next_drafts);
                (some_next_drafts ? said_yes : said_no) += 1;
            }
            if (min_n > 1 && vocab == 40) CHECK(said_no > 0); // the case the scheduler saves work on
            if (vocab == 3) CHECK(said_yes > 0);
        }
    }
}
