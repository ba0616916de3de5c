// ninfer tests (GPU) - the greedy round with one host synchronisation (Backend::verify_accept_greedy
// on the CUDA backend, issue 28 point 5): its device kernels (kernels/spec_round.h greedy_accept,
// copy_span_table_kept, round_draft_inputs) against the host on random data; and on random weights
// with an MTP head (the kernel fixtures' dense and MoE shapes, q4), batch 1..8, K 1..5, drafts all
// right, all wrong, mixed (windows of different lengths) and the MTP head's own drafts carried from
// round to round, three rounds each: the round equals verify_greedy + accept_greedy_ids +
// accept_verified + draft_mtp on a second backend bit for bit (ids, kept counts, next drafts, lane
// lengths, lane logits, then the lane images and the next decode step), the round through its CUDA
// graphs and launched eagerly giving the same bits; a smaller keep after the round (a stop inside
// the window) equals that keep straight after the verify; the round's graphs replayed with other
// tokens, acceptance and forced keeps, shapes apart only in k or one window's size, and more
// shapes than the cache holds (eager), batch 1, 2, 4, 8.
#include "core/backend/speculative.h"
#include "ninfer/kernels/spec_round.h"
#include "tests/gpu/mtp_test_util.h"

#include <cstdio>
#include <random>

using namespace ninfer;
using namespace ninfer::core;
using namespace ninfer::test;

namespace {

constexpr uint32_t kK = 5;
constexpr int kLanes = 8;
constexpr size_t kTruth = 40;

// CUDA backends on the same random weights: the round through its graphs (fused), the round
// launched eagerly (eager), the separate calls (ref) and a plain one.
struct Trio {
    std::unique_ptr<InMemoryModel> model;
    ModelWeights weights;
    MemoryPlan plan;
    std::unique_ptr<Backend> fused, eager, ref, plain;
    std::vector<std::vector<int32_t>> prompts, truths; // truths[l]: the greedy continuation, first sample on
};

// The graph backend: every shape of a test captured (max_graphs 0: the default cap).
std::unique_ptr<Backend> graph_backend(const Trio& t, size_t max_graphs) {
    CudaBackendOptions o;
    o.round_graphs = true;
    o.max_round_graphs = max_graphs;
    return make_cuda_backend(t.weights, t.plan, o);
}

std::unique_ptr<Trio> make_trio(const std::string& fixture, uint64_t seed) {
    auto t = std::make_unique<Trio>();
    const ModelConfig config = fixture_config(fixture);
    RandomModelOptions o;
    o.seed = seed;
    o.matrix_format = TensorFormat::Q4G64Fp16;
    o.with_mtp = true;
    t->model = InMemoryModel::random(config, o);
    t->weights = t->model->weights();
    t->plan = mtp_plan(config, t->weights, kLanes, KvDtype::Bf16, kK);
    t->fused = graph_backend(*t, 4096);
    CudaBackendOptions eager;
    eager.round_graphs = false;
    t->eager = make_cuda_backend(t->weights, t->plan, eager);
    t->ref = make_cuda_backend(t->weights, t->plan);
    t->plain = make_cuda_backend(t->weights, t->plan);
    const uint32_t V = config.vocab_size;
    for (int l = 0; l < kLanes; ++l) {
        t->prompts.push_back(random_tokens(20 + 9 * size_t(l), V, seed * 100 + uint64_t(l)));
        t->plain->prefill(l, t->prompts.back(), LogitsOut::Last, nullptr);
        std::vector<int32_t> c{t->plain->sample_after_prefill(l, {}, {}, 0).token};
        while (c.size() < kTruth) {
            DecodeStep s;
            s.lane = l;
            s.token = c.back();
            c.push_back(t->plain->decode(std::span(&s, 1))[0].token);
        }
        t->truths.push_back(c);
    }
    return t;
}

void check_same_image(const LaneImage& a, const LaneImage& b) {
    CHECK(a.tokens == b.tokens);
    REQUIRE(a.sections.size() == b.sections.size());
    for (size_t i = 0; i < a.sections.size(); ++i) {
        INFO("section tag " << int(a.sections[i].tag));
        CHECK(a.sections[i] == b.sections[i]);
    }
}

// Lanes 0..batch-1 of both backends hold their prompts; returns each lane's first sample.
std::vector<int32_t> start_lanes(Trio& t, int batch) {
    std::vector<int32_t> pending;
    for (int l = 0; l < batch; ++l) {
        for (Backend* b : {t.fused.get(), t.eager.get(), t.ref.get()}) {
            b->reset_lane(l);
            b->prefill(l, t.prompts[size_t(l)], LogitsOut::Last, nullptr);
        }
        pending.push_back(t.ref->sample_after_prefill(l, {}, {}, 0).token);
        CHECK(t.fused->sample_after_prefill(l, {}, {}, 0).token == pending.back());
        CHECK(t.eager->sample_after_prefill(l, {}, {}, 0).token == pending.back());
    }
    return pending;
}

enum Pattern { AllRight, AllWrong, Mixed, Head };

// Lane l's drafts in round r: the truth after its g-th token (right, wrong, or wrong at one place
// in a window of 1..K), or none for Head (the caller puts the head's drafts).
std::vector<int32_t> drafts_of(const Trio& t, Pattern p, int l, int r, size_t g, int k, uint32_t V) {
    std::vector<int32_t> d;
    if (p == Head) return d;
    const int n = p == Mixed ? 1 + (l + r) % k : k;
    const auto& c = t.truths[size_t(l)];
    for (int j = 1; j <= n; ++j) {
        const int32_t truth = g + size_t(j) < c.size() ? c[g + size_t(j)] : 1;
        const bool wrong = p == AllWrong || (p == Mixed && j == 1 + (l * 3 + r) % n);
        d.push_back(wrong ? (truth + 1) % int32_t(V) : truth);
    }
    return d;
}

// The same windows (lane l: windows[l]) through the fused backend's round (next drafts: k), the
// eager backend's (the same bits, checked here) and the reference backend's verify_greedy;
// returns the round's result, ids gets verify_greedy's.
GreedyRoundResult both_verify(Trio& t, const std::vector<std::vector<int32_t>>& windows, int k,
                              std::vector<int32_t>& ids, const std::vector<uint32_t>& forced = {}) {
    std::vector<GreedyRoundStep> steps;
    std::vector<VerifyStep> verify;
    for (size_t l = 0; l < windows.size(); ++l) {
        steps.push_back({int(l), windows[l], k, forced.empty() ? 0 : forced[l]});
        verify.push_back({int(l), windows[l]});
    }
    GreedyRoundResult got, eager;
    t.fused->verify_accept_greedy(steps, got);
    t.eager->verify_accept_greedy(steps, eager);
    CHECK(got.ids == eager.ids);
    CHECK(got.n_keep == eager.n_keep);
    CHECK(got.drafts == eager.drafts);
    for (size_t l = 0; l < windows.size(); ++l) {
        INFO("lane " << l << ": graph against eager");
        CHECK(t.fused->lane_length(int(l)) == t.eager->lane_length(int(l)));
        CHECK(t.fused->last_logits(int(l)) == t.eager->last_logits(int(l)));
    }
    std::vector<float> rows;
    t.ref->verify_greedy(verify, std::vector<uint8_t>(windows.size(), 0), rows, ids);
    return got;
}

// A round of windows on lanes 0..batch-1 (next drafts: k; forced: each lane's forced keep, 0 or
// none: greedy) against the separate calls: ids, kept counts, next drafts, lane lengths and logits
// bit for bit; pending and g (each lane's pending token and its index in the truth) advance.
// Returns each lane's accepted drafts (by the greedy rule).
std::vector<uint32_t> round_against_split(Trio& t, const std::vector<std::vector<int32_t>>& windows, int k,
                                          std::vector<int32_t>& pending, std::vector<size_t>& g,
                                          GreedyRoundResult* result = nullptr,
                                          const std::vector<uint32_t>& forced = {}) {
    std::vector<int32_t> ids;
    const GreedyRoundResult got = both_verify(t, windows, k, ids, forced);
    CHECK(got.ids == ids);
    REQUIRE(got.n_keep.size() == windows.size());
    std::vector<DraftRequest> next;
    std::vector<uint32_t> accepted;
    size_t at = 0;
    for (size_t l = 0; l < windows.size(); ++l) {
        const size_t n = windows[l].size();
        const DraftAcceptance a = accept_greedy_ids(std::span(ids).subspan(at, n), std::span(windows[l]).subspan(1));
        const uint32_t keep = forced.empty() || forced[l] == 0 ? a.accepted + 1 : forced[l];
        const int32_t next_token = ids[at + keep - 1];
        at += n;
        CHECK(got.n_keep[l] == keep);
        t.ref->accept_verified(int(l), keep);
        next.push_back({int(l), next_token, k});
        pending[l] = next_token;
        g[l] += keep;
        accepted.push_back(a.accepted);
    }
    const auto want_next = t.ref->draft_mtp(next, nullptr);
    for (size_t l = 0; l < windows.size(); ++l) {
        INFO("lane " << l);
        CHECK(got.drafts[l] == want_next[l]);
        CHECK(t.fused->lane_length(int(l)) == t.ref->lane_length(int(l)));
        CHECK(t.fused->last_logits(int(l)) == t.ref->last_logits(int(l)));
    }
    if (result)
        *result = got;
    return accepted;
}

// The lanes as a whole on the three backends, then a plain step on each: the GDN state and KV too.
void check_lanes_and_step(Trio& t, const std::vector<int32_t>& pending) {
    std::vector<DecodeStep> step(pending.size());
    for (size_t l = 0; l < pending.size(); ++l) {
        INFO("lane " << l);
        const LaneImage want = t.ref->save_lane(int(l));
        check_same_image(t.fused->save_lane(int(l)), want);
        check_same_image(t.eager->save_lane(int(l)), want);
        step[l].lane = int(l);
        step[l].token = pending[l];
    }
    const auto a = t.fused->decode(step), e = t.eager->decode(step), b = t.ref->decode(step);
    for (size_t l = 0; l < pending.size(); ++l) {
        CHECK(a[l].token == b[l].token);
        CHECK(e[l].token == b[l].token);
        CHECK(t.fused->last_logits(int(l)) == t.ref->last_logits(int(l)));
        CHECK(t.eager->last_logits(int(l)) == t.ref->last_logits(int(l)));
    }
}

} // namespace

TEST_CASE("cuda_round: the greedy round's kernels against the host", "[cuda_round]") {
    require_gpu();
    std::mt19937_64 rng(11);
    const int W = kernels::kRoundTableHead + int(kK) + 1, ids_stride = int(kK) + 1;
    for (int n : {1, 3, 8}) {
        INFO("entries " << n);
        // A round table of n distinct lanes among 8; ids agreeing with the drafts up to a random point.
        std::vector<int32_t> table(size_t(n) * size_t(W), -7), ids(size_t(kLanes) * size_t(ids_stride));
        for (auto& x : ids) x = int32_t(rng() % 50);
        std::vector<int> lanes(kLanes);
        for (int l = 0; l < kLanes; ++l) lanes[size_t(l)] = (l * 5 + n) % kLanes;
        std::vector<int32_t> want_keep(kLanes, -1), want_start(kLanes, -1);
        for (int i = 0; i < n; ++i) {
            int32_t* e = table.data() + size_t(i) * size_t(W);
            const int lane = lanes[size_t(i)], count = 1 + int(rng() % (kK + 1)), right = int(rng() % size_t(count));
            const int forced = i == 1 ? 1 + int(rng() % size_t(count)) : 0;
            e[0] = lane, e[1] = count, e[2] = 100 + i, e[3] = forced;
            e[4] = int32_t(rng() % 50);
            for (int j = 1; j < count; ++j)
                e[4 + j] = j <= right ? ids[size_t(lane) * size_t(ids_stride) + size_t(j - 1)]
                                      : (ids[size_t(lane) * size_t(ids_stride) + size_t(j - 1)] + 1) % 50;
            const DraftAcceptance a = accept_greedy_ids(std::span(ids).subspan(size_t(lane) * size_t(ids_stride), size_t(count)),
                                                        std::span(e + 5, size_t(count - 1)));
            want_keep[size_t(lane)] = forced ? forced : int32_t(a.accepted + 1);
            want_start[size_t(lane)] = 100 + i;
        }
        DeviceBuffer<int32_t> d_table(table), d_ids(ids), d_keep(kLanes, 0xff), d_start(kLanes, 0xff);
        CUDA_OK(kernels::greedy_accept(d_table.get(), W, n, d_ids.get(), ids_stride, d_keep.get(), d_start.get(), nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        const std::vector<int32_t> keep = d_keep.download(), start = d_start.download();
        for (int i = 0; i < n; ++i) {
            const int lane = lanes[size_t(i)];
            INFO("lane " << lane);
            CHECK(keep[size_t(lane)] == want_keep[size_t(lane)]);
            CHECK(start[size_t(lane)] == want_start[size_t(lane)]);
        }
        // The rollback selected by those keeps: per lane K entries of 3 spans, each into its own place.
        const int per_entry = 3, span_bytes = 40;
        const size_t n_spans = size_t(kLanes) * kK * per_entry;
        std::vector<uint8_t> src(n_spans * span_bytes);
        for (auto& b : src) b = uint8_t(rng());
        DeviceBuffer<uint8_t> d_src(src), d_dst(n_spans * span_bytes, 0);
        std::vector<kernels::CopySpan> spans;
        for (size_t s = 0; s < n_spans; ++s) spans.push_back({d_dst.get() + s * span_bytes, d_src.get() + s * span_bytes, span_bytes});
        DeviceBuffer<uint8_t> d_spans(n_spans * sizeof(kernels::CopySpan));
        CUDA_OK(cudaMemcpy(d_spans.get(), spans.data(), n_spans * sizeof(kernels::CopySpan), cudaMemcpyHostToDevice));
        CUDA_OK(kernels::copy_span_table_kept(reinterpret_cast<const kernels::CopySpan*>(d_spans.get()), per_entry,
                                              int(kK), d_table.get(), W, n, d_keep.get(), span_bytes, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint8_t> want(n_spans * span_bytes, 0);
        for (int i = 0; i < n; ++i) {
            const int lane = lanes[size_t(i)], count = table[size_t(i) * size_t(W) + 1], k = want_keep[size_t(lane)];
            if (k >= count) continue; // a whole window: nothing to roll back
            const size_t first = (size_t(lane) * kK + size_t(k - 1)) * per_entry;
            std::copy(src.begin() + long(first * span_bytes), src.begin() + long((first + per_entry) * span_bytes),
                      want.begin() + long(first * span_bytes));
        }
        CHECK(d_dst.download() == want);
        CHECK(d_dst.guards_intact());
        // The draft rows' inputs: position start + keep - 1 + column, token the bonus or the draft before.
        const int rows = n, dw = int(kK);
        std::vector<int32_t> step(24, 0), drafts(size_t(kLanes) * size_t(dw));
        for (auto& x : drafts) x = int32_t(rng() % 50);
        for (int r = 0; r < rows; ++r) step[size_t(8 + r)] = lanes[size_t(r)];
        for (int column : {0, 2}) {
            DeviceBuffer<int32_t> d_step(step), d_drafts(drafts);
            CUDA_OK(kernels::round_draft_inputs(d_step.get(), d_step.get() + 8, d_step.get() + 16, rows, d_start.get(),
                                                d_keep.get(), d_ids.get(), ids_stride, d_drafts.get(), dw, column, nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            const std::vector<int32_t> got = d_step.download();
            for (int r = 0; r < rows; ++r) {
                const int lane = lanes[size_t(r)], k = want_keep[size_t(lane)];
                INFO("row " << r << " column " << column);
                CHECK(got[size_t(16 + r)] == want_start[size_t(lane)] + k - 1 + column);
                CHECK(got[size_t(r)] == (column == 0 ? ids[size_t(lane) * size_t(ids_stride) + size_t(k - 1)]
                                                     : drafts[size_t(lane) * size_t(dw) + size_t(column - 1)]));
            }
        }
    }
    CHECK(kernels::greedy_accept(nullptr, W, 1, nullptr, 1, nullptr, nullptr, nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::round_draft_inputs(nullptr, nullptr, nullptr, 1, nullptr, nullptr, nullptr, 1, nullptr, 1, 0, nullptr) ==
          cudaErrorInvalidValue);
}

TEST_CASE("cuda_round: a greedy round equals verify_greedy, accept_verified and draft_mtp bit for bit",
          "[cuda_round]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        auto t = make_trio(fixture, 31);
        const uint32_t V = t->weights.config.vocab_size;
        size_t rounds = 0, accepted = 0, drafted = 0, right_accepted = 0, right_drafted = 0;
        for (int batch = 1; batch <= kLanes; ++batch)
            for (int k = 1; k <= int(kK); ++k)
                for (Pattern p : {AllRight, AllWrong, Mixed, Head}) {
                    INFO(fixture << " batch " << batch << " K " << k << " pattern " << int(p));
                    std::vector<int32_t> pending = start_lanes(*t, batch);
                    std::vector<size_t> g(static_cast<size_t>(batch), 0); // index of the pending token in the truth
                    std::vector<std::vector<int32_t>> carried(static_cast<size_t>(batch));
                    for (int r = 0; r < 3; ++r) {
                        std::vector<std::vector<int32_t>> windows(static_cast<size_t>(batch));
                        std::vector<DraftRequest> heads;
                        for (int l = 0; l < batch; ++l) heads.push_back({l, pending[size_t(l)], k});
                        const auto head_drafts = p == Head ? t->ref->draft_mtp(heads, nullptr) : decltype(carried){};
                        if (p == Head && r == 0) {
                            carried = t->fused->draft_mtp(heads, nullptr);
                            CHECK(t->eager->draft_mtp(heads, nullptr) == carried);
                        }
                        for (int l = 0; l < batch; ++l) {
                            std::vector<int32_t> d = drafts_of(*t, p, l, r, g[size_t(l)], k, V);
                            if (p == Head) {
                                CHECK(carried[size_t(l)] == head_drafts[size_t(l)]); // the round's drafts are draft_mtp's
                                d = head_drafts[size_t(l)];
                            }
                            windows[size_t(l)] = {pending[size_t(l)]};
                            windows[size_t(l)].insert(windows[size_t(l)].end(), d.begin(), d.end());
                        }
                        GreedyRoundResult got;
                        const std::vector<uint32_t> acc = round_against_split(*t, windows, k, pending, g, &got);
                        for (int l = 0; l < batch; ++l) {
                            const size_t n = windows[size_t(l)].size();
                            accepted += acc[size_t(l)], drafted += n - 1;
                            if (p == AllRight) right_accepted += acc[size_t(l)], right_drafted += n - 1;
                        }
                        carried = got.drafts;
                        ++rounds;
                    }
                    check_lanes_and_step(*t, pending);
                }
        const size_t graphs = set_cuda_round_graphs(*t->fused, true);
        std::printf("RESULT %s greedy_round_rounds %zu drafts %zu accepted %zu (right drafts %zu accepted %zu) "
                    "round_graphs %zu\n", fixture.c_str(), rounds, drafted, accepted, right_drafted, right_accepted,
                    graphs);
        CHECK(graphs > 0);
        // The truth is plain decoding's: a verify row's near tie may flip a pick and cut a run short.
        CHECK(right_accepted * 2 > right_drafted);
    }
}

TEST_CASE("cuda_round: a smaller keep after a greedy round equals that keep straight after the verify",
          "[cuda_round]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        auto t = make_trio(fixture, 32);
        const uint32_t V = t->weights.config.vocab_size;
        for (int batch : {1, 3, 8})
            for (int k : {2, 5}) {
                INFO(fixture << " batch " << batch << " K " << k);
                const std::vector<int32_t> pending = start_lanes(*t, batch);
                std::vector<std::vector<int32_t>> windows(static_cast<size_t>(batch));
                for (int l = 0; l < batch; ++l) {
                    const auto d = drafts_of(*t, AllRight, l, 0, 0, k, V);
                    windows[size_t(l)] = {pending[size_t(l)]};
                    windows[size_t(l)].insert(windows[size_t(l)].end(), d.begin(), d.end());
                }
                std::vector<int32_t> ids;
                const GreedyRoundResult got = both_verify(*t, windows, k, ids);
                for (int l = 0; l < batch; ++l) {
                    INFO("lane " << l);
                    const uint32_t n_keep = got.n_keep[size_t(l)];
                    const uint32_t kept = 1 + uint32_t(l) % n_keep; // the host reports fewer on most lanes
                    if (kept < n_keep) t->fused->accept_verified(l, kept);
                    t->ref->accept_verified(l, kept);
                    const int32_t next = ids[size_t(l) * size_t(k + 1) + kept - 1];
                    const std::vector<DraftRequest> q{{l, next, k}};
                    if (kept == n_keep) CHECK(t->ref->draft_mtp(q, nullptr)[0] == got.drafts[size_t(l)]);
                    CHECK(t->fused->lane_length(l) == t->ref->lane_length(l));
                    CHECK(t->fused->last_logits(l) == t->ref->last_logits(l));
                    check_same_image(t->fused->save_lane(l), t->ref->save_lane(l));
                    CHECK(t->fused->draft_mtp(q, nullptr) == t->ref->draft_mtp(q, nullptr));
                    DecodeStep s;
                    s.lane = l;
                    s.token = next;
                    CHECK(t->fused->decode(std::span(&s, 1))[0].token == t->ref->decode(std::span(&s, 1))[0].token);
                    CHECK(t->fused->last_logits(l) == t->ref->last_logits(l));
                }
            }
    }
}

// Round r of a shape plan: window sizes (drafts + 1; lane 0 first, the rest the second), next
// drafts k, the drafts right up to which one (wrong at that draft, 0: all right; odd lanes one
// further) and whether the keeps are forced (lane l keeps 1 + (l + r) % size).
struct PlannedRound {
    int size0, size, k, wrong_at;
    bool forced;
};

// Runs the planned round on lanes 0..batch-1 (their truths from g on) against the separate calls.
void run_planned_round(Trio& t, const PlannedRound& round, size_t r, int batch, std::vector<int32_t>& pending,
                       std::vector<size_t>& g) {
    std::vector<std::vector<int32_t>> windows(static_cast<size_t>(batch));
    for (int l = 0; l < batch; ++l) {
        const auto& c = t.truths[size_t(l)];
        const int n = (l == 0 ? round.size0 : round.size) - 1;
        windows[size_t(l)] = {pending[size_t(l)]};
        for (int j = 1; j <= n; ++j) {
            const int32_t truth = g[size_t(l)] + size_t(j) < c.size() ? c[g[size_t(l)] + size_t(j)] : 1;
            const bool wrong = j == round.wrong_at + (l % 2); // lanes keep different counts
            const int32_t V = int32_t(t.weights.config.vocab_size);
            windows[size_t(l)].push_back(wrong ? (truth + 1) % V : truth);
        }
    }
    std::vector<uint32_t> forced;
    for (int l = 0; round.forced && l < batch; ++l)
        forced.push_back(1 + uint32_t(l + int(r)) % uint32_t(windows[size_t(l)].size()));
    round_against_split(t, windows, round.k, pending, g, nullptr, forced);
}

TEST_CASE("cuda_round: the round's graphs replayed with other tokens, shapes apart in k or one window's size, "
          "more shapes than the cache holds", "[cuda_round]") {
    require_gpu();
    // Shapes: A A B C D A D A with a cache of 3: B differs from A in k alone, C in lane 0's window
    // alone, D (new at every batch: lane 0's window and k) finds the cache full; A's replays change
    // tokens, acceptance and forced keeps.
    const std::vector<PlannedRound> rounds{{3, 3, 2, 0, false}, {3, 3, 2, 1, true},  {3, 3, 1, 2, false},
                                           {2, 3, 2, 0, false}, {2, 2, 1, 1, false}, {3, 3, 2, 2, true},
                                           {2, 2, 1, 0, true},  {3, 3, 2, 1, false}};
    const std::vector<size_t> graphs_after{1, 1, 2, 3, 3, 3, 3, 3};
    for (const std::string& fixture : kKernelFixtures) {
        auto t = make_trio(fixture, 33);
        for (int batch : {1, 2, 4, 8}) {
            INFO(fixture << " batch " << batch);
            t->fused = graph_backend(*t, 3); // an empty cache of 3
            std::vector<int32_t> pending = start_lanes(*t, batch);
            std::vector<size_t> g(static_cast<size_t>(batch), 0);
            size_t free_before = 0, free_after = 0, total = 0;
            CUDA_OK(cudaMemGetInfo(&free_before, &total));
            for (size_t r = 0; r < rounds.size(); ++r) {
                INFO("round " << r);
                run_planned_round(*t, rounds[r], r, batch, pending, g);
                CHECK(set_cuda_round_graphs(*t->fused, true) == graphs_after[r]);
                if (r == 3) { // three graphs captured: what each costs the device (a cap's price; the
                              // free memory's change, meaningful only with the GPU to itself)
                    CUDA_OK(cudaMemGetInfo(&free_after, &total));
                    std::printf("RESULT %s batch %d round_graph_device_bytes %lld each (3 graphs)\n", fixture.c_str(),
                                batch, (static_cast<long long>(free_before) - static_cast<long long>(free_after)) / 3);
                }
            }
            CHECK(t->fused->graph_capture_failures() == 0);
            check_lanes_and_step(*t, pending);
        }
    }
}

TEST_CASE("cuda_round: a round graph that fails to capture runs eagerly, the same bits; no later shape is "
          "captured, the captured ones still replay", "[cuda_round]") {
    require_gpu();
    // A B A C B A: A captured; B's capture fails (as an instantiation out of memory would); A
    // replays; C and B run eagerly.
    const std::vector<PlannedRound> rounds{{3, 3, 2, 0, false}, {3, 3, 1, 1, false}, {3, 3, 2, 2, true},
                                           {2, 2, 2, 0, false}, {3, 3, 1, 0, true},  {3, 3, 2, 1, false}};
    for (const std::string& fixture : kKernelFixtures) {
        auto t = make_trio(fixture, 35);
        for (int batch : {1, 4}) {
            INFO(fixture << " batch " << batch);
            t->fused = graph_backend(*t, 8);
            std::vector<int32_t> pending = start_lanes(*t, batch);
            std::vector<size_t> g(static_cast<size_t>(batch), 0);
            for (size_t r = 0; r < rounds.size(); ++r) {
                INFO("round " << r);
                if (r == 1) cuda_fail_next_round_capture(*t->fused);
                run_planned_round(*t, rounds[r], r, batch, pending, g);
                CHECK(set_cuda_round_graphs(*t->fused, true) == 1);
                CHECK(t->fused->graph_capture_failures() == (r >= 1 ? 1u : 0u));
            }
            check_lanes_and_step(*t, pending);
        }
    }
}
