// ninfer::core - the reference sampler: bias, penalties, temperature, top-k/top-p/min-p, draw.
//
// Why it is fast and still exact: the contract's arithmetic is a sequence of f64 sums over the
// candidates in (logit desc, id asc) order. Every term is >= 0 and the first is exp(0) = 1, so once
// the terms fall below half an ulp of the running sum they change nothing; a candidate more than
// kHeadSpan below the top logit is such a term in every sum (see head_span note). So only the
// "head" (candidates within kHeadSpan of the top) is ordered - with a radix sort when it is big -
// and the tail is consulted only in the rare cases where a rank inside it decides the token.
#include "core/backend/sampling.h"

#include "core/backend/token_constraint.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

namespace ninfer::core {
namespace {

// exp(-40) = 4.2e-18. A tail term adds nothing to (a) the softmax sum, which is >= 1 after its
// first term, when it is < 2^-53 = 1.1e-16; (b) the running sums of probabilities, which are
// >= p_0 = 1/sum, when p_tail = e_tail/sum < p_0 * 2^-54, i.e. e_tail < 5.5e-17. 40 leaves a 13x
// margin for the rounding of the subtraction and of exp().
constexpr double kHeadSpan = 40.0;
constexpr size_t kRadixMinSize = 2048; // below this std::sort on the packed keys is cheaper

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// First index of the largest value; a NaN never wins unless it is first (as a scan keeping the
// first strictly greater value would do). Lane-wise maxima let the compiler vectorize the scan.
int32_t argmax(std::span<const float> l) {
    const size_t n = l.size();
    if (n == 0 || std::isnan(l[0]))
        return 0;
    constexpr size_t kLanes = 16;
    std::array<float, kLanes> lane;
    lane.fill(l[0]);
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (size_t j = 0; j < kLanes; ++j)
            lane[j] = l[i + j] > lane[j] ? l[i + j] : lane[j];
    float m = lane[0];
    for (float v : lane)
        m = v > m ? v : m;
    for (; i < n; ++i)
        m = l[i] > m ? l[i] : m;
    for (size_t k = 0; k < n; ++k)
        if (l[k] == m)
            return int32_t(k);
    return 0;
}

void apply_penalties(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> generated) {
    if (!p.allowed_tokens.empty()) apply_token_mask(logits, p.allowed_tokens);
    for (const auto& [id, bias] : p.logit_bias)
        if (id >= 0 && size_t(id) < logits.size())
            logits[size_t(id)] += bias;
    if (generated.empty() || (p.presence_penalty == 0 && p.frequency_penalty == 0 &&
                              p.repetition_penalty == 1.0f))
        return;
    thread_local std::vector<int32_t> ids;
    ids.clear();
    for (int32_t id : generated)
        if (id >= 0 && size_t(id) < logits.size())
            ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j < ids.size() && ids[j] == ids[i])
            ++j;
        const int n = int(j - i);
        float& l = logits[size_t(ids[i])];
        if (p.repetition_penalty != 1.0f && p.repetition_penalty > 0)
            l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
        l -= p.presence_penalty + p.frequency_penalty * float(n);
        i = j;
    }
}

// Ascending order of the key == (logit desc, id asc); -0 and +0 compare equal, so they share a
// key (v + 0 turns -0 into +0 and changes nothing else).
uint64_t order_key(float v, int32_t id) {
    const uint32_t u = std::bit_cast<uint32_t>(v + 0.0f);
    const uint32_t ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (uint64_t(~ascending) << 32) | uint32_t(id);
}

int32_t key_id(uint64_t key) { return int32_t(uint32_t(key)); }

float key_value(uint64_t key) {
    const uint32_t ascending = ~uint32_t(key >> 32);
    return std::bit_cast<float>((ascending & 0x80000000u) ? (ascending & 0x7FFFFFFFu) : ~ascending);
}

// The smallest float l with double(l) - top >= -kHeadSpan (the predicate is monotone in l), so the
// head test is one float compare per logit.
float head_threshold(double top) {
    float t = float(top - kHeadSpan);
    while (double(t) - top < -kHeadSpan)
        t = std::nextafter(t, std::numeric_limits<float>::infinity());
    for (float below = std::nextafter(t, -std::numeric_limits<float>::infinity());
         double(below) - top >= -kHeadSpan; below = std::nextafter(t, -std::numeric_limits<float>::infinity()))
        t = below;
    return t;
}

// Sorts keys that were built in ascending id order: a stable LSD radix sort of the value half
// (11+11+10 bits) keeps ids ascending within equal values.
void sort_keys(std::vector<uint64_t>& keys) {
    if (keys.size() < kRadixMinSize) {
        std::sort(keys.begin(), keys.end());
        return;
    }
    thread_local std::vector<uint64_t> scratch;
    scratch.resize(keys.size());
    constexpr int kShifts[3] = {32, 43, 54};
    std::array<std::array<uint32_t, 2048>, 3> count{};
    for (uint64_t k : keys)
        for (int d = 0; d < 3; ++d)
            ++count[size_t(d)][(k >> kShifts[d]) & 2047u];
    for (int d = 0; d < 3; ++d) {
        auto& c = count[size_t(d)];
        if (c[(keys[0] >> kShifts[d]) & 2047u] == keys.size())
            continue; // one bucket holds everything: this pass would not move anything
        uint32_t at = 0;
        for (uint32_t& v : c)
            at += std::exchange(v, at);
        for (uint64_t k : keys)
            scratch[c[(k >> kShifts[d]) & 2047u]++] = k;
        keys.swap(scratch);
    }
}

// The contract's softmax / top-p / min-p over the first `n` candidates of the full order, given
// the first keys.size() of that order: fills prob (f64 softmax of the known ones) and returns how
// many candidates are kept (more than known when the cut lies in the unordered tail), or nullopt
// when min_p's cut needs a rank beyond the given keys (possible only when keys.size() < n).
std::optional<size_t> kept_candidates(std::span<const uint64_t> keys, size_t n, const SamplingParams& p,
                                      std::vector<double>& prob) {
    const size_t known = std::min(keys.size(), n);
    prob.resize(known);
    const double top = key_value(keys[0]);
    double sum = 0;
    for (size_t i = 0; i < known; ++i)
        sum += prob[i] = std::exp(double(key_value(keys[i])) - top);
    for (double& q : prob)
        q /= sum;
    size_t keep = n;
    if (p.top_p < 1.0f) {
        double cum = 0;
        for (size_t i = 0; i < known; ++i) {
            cum += prob[i];
            if (cum >= double(p.top_p)) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p.min_p > 0.0f) {
        const double floor = double(p.min_p) * prob[0];
        size_t i = 1;
        while (i < keep && i < known && prob[i] >= floor)
            ++i;
        // A tail probability is below exp(-kHeadSpan) * p_0 < 1e-17 * p_0, so with min_p >= 1e-16
        // the cut never passes the head; below that it may fall inside the unordered tail.
        if (i == known && i < keep && double(p.min_p) < 1e-16)
            return std::nullopt;
        keep = i;
    }
    return keep;
}

// The draw over the kept candidates; nullopt when it needs a candidate's rank beyond the keys.
std::optional<int32_t> draw_sorted(std::span<const uint64_t> keys, size_t n, const SamplingParams& p) {
    thread_local std::vector<double> prob;
    const std::optional<size_t> kept = kept_candidates(keys, n, p, prob);
    if (!kept)
        return std::nullopt;
    const size_t keep = *kept, known = prob.size();
    const size_t summed = std::min(keep, known);
    double total = 0;
    for (size_t i = 0; i < summed; ++i)
        total += prob[i];
    const double u = sampling_uniform(p.seed, p.step) * total;
    double cum = 0;
    for (size_t i = 0; i < summed; ++i) {
        cum += prob[i];
        if (u < cum)
            return key_id(keys[i]);
    }
    if (keep > known)
        return std::nullopt; // the fallback is the last kept candidate, inside the tail
    return key_id(keys[keep - 1]);
}

} // namespace

int32_t argmax_token(std::span<const float> logits) { return argmax(logits); }

double sampling_uniform(uint64_t seed, uint64_t step) {
    const uint64_t r = splitmix64(splitmix64(seed) ^ (step * 0xD1B54A32D192ED03ull));
    return double(r >> 11) * (1.0 / 9007199254740992.0); // 53 bits -> [0, 1)
}

int32_t sample_token(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> generated) {
    apply_penalties(logits, p, generated);
    if (p.is_greedy() || logits.empty())
        return argmax(logits);
    const float inv_t = 1.0f / p.temperature;
    for (float& l : logits)
        l *= inv_t;
    const size_t vocab = logits.size();
    const size_t n = p.top_k > 0 && size_t(p.top_k) < vocab ? size_t(p.top_k) : vocab;
    const double top = logits[size_t(argmax(logits))];
    thread_local std::vector<uint64_t> keys;
    keys.clear();
    if (std::isfinite(top)) {
        const float threshold = head_threshold(top);
        keys.resize(vocab);
        size_t head = 0;
        for (size_t i = 0; i < vocab; ++i) { // branch-free: write every key, keep the head's
            keys[head] = order_key(logits[i], int32_t(i));
            head += logits[i] >= threshold;
        }
        keys.resize(head);
        if (keys.size() > n && n < kRadixMinSize) { // a small top_k: select, then order k keys
            std::nth_element(keys.begin(), keys.begin() + ptrdiff_t(n), keys.end());
            keys.resize(n);
            std::sort(keys.begin(), keys.end());
        } else {
            sort_keys(keys);
            keys.resize(std::min(keys.size(), n));
        }
        if (const auto token = draw_sorted(keys, n, p))
            return *token;
    }
    // Non-finite top or a rank inside the tail decides: order every candidate.
    keys.clear();
    for (size_t i = 0; i < vocab; ++i)
        keys.push_back(order_key(logits[i], int32_t(i)));
    sort_keys(keys);
    return *draw_sorted(keys, n, p);
}

SamplingCandidates sampling_candidates(std::span<float> logits, const SamplingParams& p,
                                       std::span<const int32_t> generated) {
    SamplingCandidates c;
    apply_penalties(logits, p, generated);
    if (logits.empty())
        return c;
    if (p.is_greedy()) {
        c.ids = {argmax(logits)};
        c.prob = {1.0};
        c.total = 1.0;
        return c;
    }
    const float inv_t = 1.0f / p.temperature;
    for (float& l : logits)
        l *= inv_t;
    std::vector<uint64_t> keys;
    keys.reserve(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
        keys.push_back(order_key(logits[i], int32_t(i)));
    sort_keys(keys);
    const size_t n = p.top_k > 0 && size_t(p.top_k) < keys.size() ? size_t(p.top_k) : keys.size();
    std::vector<double> prob;
    const size_t keep = *kept_candidates(std::span(keys).first(n), n, p, prob); // every rank known
    for (size_t i = 0; i < keep; ++i) {
        c.ids.push_back(key_id(keys[i]));
        c.prob.push_back(prob[i]);
        c.total += prob[i];
    }
    return c;
}

} // namespace ninfer::core
