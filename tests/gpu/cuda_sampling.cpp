// ninfer tests (GPU) - the CUDA backend's sampling end to end: every step's token, logprob and top
// logprobs against core::sample_token over the very logits that step produced (last_logits), free
// and constrained (allowed-token bitsets, issue 32).
#include "core/backend/token_constraint.h"
#include "core/cpu/cpu_backend.h"
#include "core/cuda/cuda_backend.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/sample_buffers.h"

#include <numeric>

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct LaneRun {
    SamplingParams sp;
    int n_top = 0;
    std::vector<int32_t> generated;
    int32_t pending = 0;
};

struct Tally {
    int equal = 0, boundary = 0;
};

// The CPU's answer for one result of the backend, from the logits the backend sampled.
void check_result(Backend& b, int lane, const LaneRun& run, const DecodeResult& got, Tally& t) {
    const std::vector<float> raw = b.last_logits(lane);
    std::vector<float> z = raw;
    const int32_t want = sample_token(z, run.sp, run.generated);
    if (got.token == want)
        ++t.equal;
    else if (!run.sp.is_greedy() && draw_margin(z, run.sp) <= 1e-9)
        ++t.boundary;
    else
        CHECK(got.token == want);
    const double lse = log_sum_exp(raw);
    CHECK(std::fabs(got.logprob - (double(raw[size_t(got.token)]) - lse)) < 2e-4);
    std::vector<int32_t> order(raw.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t n_top = std::min(size_t(run.n_top), raw.size());
    std::partial_sort(order.begin(), order.begin() + ptrdiff_t(n_top), order.end(),
                      [&](int32_t a, int32_t c) { return raw[a] > raw[c] || (raw[a] == raw[c] && a < c); });
    REQUIRE(got.top_logprobs.size() == n_top);
    for (size_t j = 0; j < n_top; ++j) {
        CHECK(got.top_logprobs[j].first == order[j]);
        CHECK(std::fabs(got.top_logprobs[j].second - (double(raw[size_t(order[j])]) - lse)) < 2e-4);
    }
}

// The lane's next decode step, as the scheduler builds it: the appended token joins `generated`.
DecodeStep next_step(int lane, LaneRun& r, int32_t token) {
    r.generated.push_back(token);
    r.sp.step = r.generated.size();
    DecodeStep st = step(lane, token);
    st.sampling = r.sp;
    st.generated = r.generated;
    st.n_top_logprobs = r.n_top;
    return st;
}

std::vector<LaneRun> lane_configs(uint32_t vocab) {
    std::vector<LaneRun> r(5);
    r[0].sp.repetition_penalty = 1.3f; // greedy with penalties, bias and top logprobs
    r[0].sp.presence_penalty = 0.4f;
    r[0].sp.logit_bias = {{3, 2.5f}, {int32_t(vocab) - 1, -100.f}};
    r[0].n_top = 5;
    r[1].sp.temperature = 0.8f; // the whole vocabulary with top_p and penalties
    r[1].sp.top_p = 0.9f;
    r[1].sp.repetition_penalty = 1.2f;
    r[1].sp.frequency_penalty = 0.3f;
    r[2].sp.temperature = 1.f; // top_k beyond the old 1024 cap, min_p, bias, 20 top logprobs
    r[2].sp.top_k = 2000;
    r[2].sp.min_p = 0.05f;
    r[2].sp.logit_bias = {{7, 4.f}, {11, -3.f}};
    r[2].sp.frequency_penalty = 0.5f;
    r[2].n_top = 20;
    r[3].sp.temperature = 0.7f; // plain temperature
    r[4].sp.temperature = 1.2f; // left to the host: a bias list naming an id twice
    r[4].sp.logit_bias = {{5, 1.f}, {5, 2.f}};
    r[4].n_top = 3;
    for (size_t i = 0; i < r.size(); ++i) r[i].sp.seed = 1000 + i;
    return r;
}

} // namespace

TEST_CASE("cuda backend: sampling on the GPU equals the CPU sampler on the same logits", "[cuda_sampling]") {
    require_gpu();
    for (const std::string fixture : {"kernel/dense", "kernel/moe"}) {
        INFO(fixture);
        auto m = load(fixture, "q4");
        const auto ids = read_refs(fixture).ppl_ids;
        for (bool graphs : {true, false}) {
            INFO("graphs " << graphs);
            auto b = make_cuda_backend(m->weights, m->plan, {graphs});
            std::vector<LaneRun> runs = lane_configs(b->vocab_size());
            Tally t;
            const int n = int(runs.size());
            for (int l = 0; l < n; ++l) {
                b->reset_lane(l);
                b->prefill(l, std::span(ids).subspan(size_t(l) * 5, 20 + size_t(l)), LogitsOut::Last, nullptr);
                LaneRun& r = runs[size_t(l)];
                r.sp.step = 0;
                const DecodeResult first = b->sample_after_prefill(l, r.sp, r.generated, r.n_top);
                check_result(*b, l, r, first, t);
                r.pending = first.token;
            }
            for (int s = 1; s <= 24; ++s) {
                if (s == 12) { // mid-request changes: new penalties (counts rebuilt) and a new bias row
                    runs[3].sp.presence_penalty = 0.7f;
                    runs[2].sp.logit_bias = {{13, 6.f}};
                }
                // Batches of 5, then 2 + 3 (other graph sizes); the history follows the scheduler:
                // the appended token joins `generated`, and at step 9 a forced token replaces a sample.
                const std::vector<std::vector<int>> batches = s % 2 ? std::vector<std::vector<int>>{{0, 1, 2, 3, 4}}
                                                                   : std::vector<std::vector<int>>{{4, 1}, {0, 2, 3}};
                for (const auto& lanes : batches) {
                    std::vector<DecodeStep> steps;
                    for (int l : lanes) {
                        LaneRun& r = runs[size_t(l)];
                        steps.push_back(next_step(l, r, s == 9 && l == 1 ? 42 : r.pending));
                    }
                    const auto res = b->decode(steps);
                    for (size_t i = 0; i < lanes.size(); ++i) {
                        INFO("step " << s << " lane " << lanes[i]);
                        check_result(*b, lanes[i], runs[size_t(lanes[i])], res[i], t);
                        runs[size_t(lanes[i])].pending = res[i].token;
                    }
                }
            }
            INFO("equal " << t.equal << " at a boundary " << t.boundary);
            CHECK(t.boundary * 50 <= t.equal);
            std::printf("RESULT cuda_sampling %s graphs %d equal %d boundary %d\n", fixture.c_str(), int(graphs), t.equal,
                        t.boundary);
        }
    }
}

TEST_CASE("cuda backend: constrained sampling equals the CPU's", "[cuda_sampling]") {
    // Issue 32: rows with an allowed-token bitset (kSampleUseMask, uploaded per step from pinned
    // rows) beside a free lane, greedy and drawn, with bias and penalties; every token is allowed
    // and equals core::sample_token with the same bitset over the step's logits.
    require_gpu();
    auto m = load("kernel/dense", "q4");
    const auto ids = read_refs("kernel/dense").ppl_ids;
    for (bool graphs : {true, false}) {
        INFO("graphs " << graphs);
        auto b = make_cuda_backend(m->weights, m->plan, {graphs});
        const uint32_t vocab = b->vocab_size();
        std::vector<LaneRun> runs = lane_configs(vocab);
        runs.resize(4); // lanes 0..2 constrained, lane 3 free
        std::vector<std::vector<uint32_t>> masks(runs.size());
        Rng rng(5 + int(graphs));
        // A new bitset every step: a few ids, about 1%, about half, or one id past the vocabulary too.
        auto refresh = [&](size_t l, int s) {
            if (l == 3) return;
            std::vector<uint32_t>& w = masks[l];
            w.assign(token_mask_words(vocab), 0u);
            const int kind = (int(l) + s) % 3;
            const int n = kind == 0 ? 3 : kind == 1 ? int(vocab / 100) : int(vocab / 2);
            for (int i = 0; i < n; ++i) token_mask_set(w, rng.integer(0, int(vocab) - 1), true);
            runs[l].sp.allowed_tokens = w;
        };
        Tally t;
        for (int l = 0; l < 4; ++l) {
            b->reset_lane(l);
            b->prefill(l, std::span(ids).subspan(size_t(l) * 5, 20 + size_t(l)), LogitsOut::Last, nullptr);
            LaneRun& r = runs[size_t(l)];
            refresh(size_t(l), 0);
            r.sp.step = 0;
            const DecodeResult first = b->sample_after_prefill(l, r.sp, r.generated, r.n_top);
            check_result(*b, l, r, first, t);
            if (l < 3) CHECK(token_mask_test(masks[size_t(l)], first.token));
            r.pending = first.token;
        }
        for (int s = 1; s <= 16; ++s) {
            std::vector<DecodeStep> steps;
            for (int l = 0; l < 4; ++l) {
                refresh(size_t(l), s);
                steps.push_back(next_step(l, runs[size_t(l)], runs[size_t(l)].pending));
            }
            const auto res = b->decode(steps);
            for (int l = 0; l < 4; ++l) {
                INFO("step " << s << " lane " << l);
                check_result(*b, l, runs[size_t(l)], res[size_t(l)], t);
                if (l < 3) CHECK(token_mask_test(masks[size_t(l)], res[size_t(l)].token));
                runs[size_t(l)].pending = res[size_t(l)].token;
            }
        }
        INFO("equal " << t.equal << " at a boundary " << t.boundary);
        CHECK(t.boundary * 50 <= t.equal);
        std::printf("RESULT cuda_sampling constrained graphs %d equal %d boundary %d\n", int(graphs), t.equal, t.boundary);
    }
}
