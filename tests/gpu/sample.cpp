// ninfer tests - GPU sampling against core::sample_token: every option, vocab up to 248,320, batch 1..8, ties.
#include "core/backend/sampling.h"
#include "sample_buffers.h"

#include <algorithm>
#include <chrono>
#include <numeric>

using namespace ninfer;
using namespace ninfer::test;

namespace {

// One row of a sampler call: parameters plus the host-side history and bias it stands for.
struct RowCase {
    core::SamplingParams sp;
    std::vector<int32_t> generated;
    int n_top = 0;
    bool count_last = false; // pass generated.back() as count_token instead of uploading it
};

struct GpuOut {
    std::vector<int32_t> ids, top_ids, counts;
    std::vector<float> logprobs, top_logprobs;
};

// Runs kernels::sample over rows of `logits` (row stride V, lane = row), building the per-lane
// counts and bias the way the CUDA backend does (zero, then counts_add / bias_scatter).
GpuOut run_gpu(const std::vector<float>& logits, int V, const std::vector<RowCase>& cases, bool graph = false,
               int replays = 1) {
    const int rows = int(cases.size());
    SampleBuffers buf(logits, rows, V);
    std::vector<kernels::SampleRowParams> prm(rows);
    for (int r = 0; r < rows; ++r) {
        const RowCase& c = cases[size_t(r)];
        kernels::SampleRowParams& p = prm[size_t(r)];
        p.temperature = c.sp.is_greedy() ? 0.f : c.sp.temperature;
        p.top_k = c.sp.top_k;
        p.top_p = c.sp.top_p;
        p.min_p = c.sp.min_p;
        p.presence_penalty = c.sp.presence_penalty;
        p.frequency_penalty = c.sp.frequency_penalty;
        p.repetition_penalty = c.sp.repetition_penalty;
        p.seed = c.sp.seed;
        p.step = c.sp.step;
        p.lane = r;
        p.n_top_logprobs = c.n_top;
        std::vector<int32_t> upload = c.generated;
        if (c.count_last && !upload.empty()) {
            p.count_token = upload.back();
            upload.pop_back();
        }
        if (!c.generated.empty()) {
            p.flags |= kernels::kSampleUseCounts;
            DeviceBuffer<int32_t> g(upload.size() + 1);
            g.upload(upload);
            CUDA_OK(kernels::sample_counts_add(buf.counts.get() + size_t(r) * V, g.get(), int(upload.size()), V, nullptr));
            CUDA_OK(cudaDeviceSynchronize());
        }
        if (!c.sp.logit_bias.empty()) {
            p.flags |= kernels::kSampleUseBias;
            std::vector<int32_t> bid;
            std::vector<float> bval;
            for (auto [id, b] : c.sp.logit_bias) {
                bid.push_back(id);
                bval.push_back(b);
            }
            DeviceBuffer<int32_t> bi(bid);
            DeviceBuffer<float> bv(bval);
            CUDA_OK(kernels::sample_bias_scatter(buf.bias.get() + size_t(r) * V, bi.get(), bv.get(), int(bid.size()), V,
                                                 nullptr));
            CUDA_OK(cudaDeviceSynchronize());
        }
    }
    DeviceBuffer<kernels::SampleRowParams> pd(prm);
    const kernels::SampleArgs a = buf.args(pd.get());
    if (graph) {
        SampleGraph g(a);
        g.replay(replays);
        CUDA_OK(cudaStreamSynchronize(g.stream));
    } else {
        for (int i = 0; i < replays; ++i) CUDA_OK(kernels::sample(a, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
    }
    CHECK(buf.ids.guards_intact());
    CHECK(buf.top_ids.guards_intact());
    CHECK(buf.top_logprobs.guards_intact());
    CHECK(buf.counts.guards_intact());
    return {buf.ids.download(), buf.top_ids.download(), buf.counts.download(), buf.logprobs.download(),
            buf.top_logprobs.download()};
}

struct Checked {
    int equal = 0;    // draws equal to the CPU's
    int boundary = 0; // different, with the CPU's comparison within 1e-9 of its boundary (exact ties)
};

// Compares one GPU result row with the CPU sampler and the host log-softmax.
void check_row(const std::vector<float>& raw, const RowCase& c, const GpuOut& g, int r, Checked& n) {
    const int V = int(raw.size());
    std::vector<float> z = raw;
    const int32_t want = core::sample_token(z, c.sp, c.generated);
    double mx = *std::max_element(raw.begin(), raw.end()), se = 0;
    for (float v : raw) se += std::exp(double(v) - mx);
    const double lse = mx + std::log(se);
    const int32_t got = g.ids[size_t(r)];
    REQUIRE(got >= 0);
    REQUIRE(got < V);
    if (got == want) {
        ++n.equal;
    } else if (!c.sp.is_greedy() && draw_margin(z, c.sp) <= 1e-9) {
        ++n.boundary;
    } else {
        CHECK(got == want);
    }
    CHECK(std::fabs(g.logprobs[size_t(r)] - (double(raw[size_t(got)]) - lse)) < 2e-4);
    std::vector<int> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    const int n_top = std::min(c.n_top, V);
    std::partial_sort(order.begin(), order.begin() + n_top, order.end(),
                      [&](int a, int b) { return raw[a] > raw[b] || (raw[a] == raw[b] && a < b); });
    for (int j = 0; j < n_top; ++j) {
        const size_t at = size_t(r) * kernels::kSampleMaxTopLogprobs + size_t(j);
        INFO("top logprob " << j);
        CHECK(g.top_ids[at] == order[size_t(j)]);
        CHECK(std::fabs(g.top_logprobs[at] - (double(raw[size_t(order[size_t(j)])]) - lse)) < 2e-4);
    }
}

enum class Shape { Uniform, Peaked, Ties };

std::vector<float> make_logits(Rng& rng, int rows, int V, Shape shape) {
    std::vector<float> l(size_t(rows) * V);
    std::normal_distribution<float> normal(0.f, 2.5f);
    for (float& v : l) {
        if (shape == Shape::Uniform) v = rng.uniform(-8.f, 8.f);
        else if (shape == Shape::Peaked) v = normal(rng.gen);
        else v = std::round(rng.uniform(-8.f, 8.f) * 2.f) / 2.f; // 33 values: ties everywhere
    }
    for (int r = 0; r < rows; ++r) {
        float* row = l.data() + size_t(r) * V;
        if (shape == Shape::Peaked) // an LLM-like head: a few clear favourites above a wide tail
            for (int j = 0; j < std::min(V, 6); ++j) row[rng.integer(0, V - 1)] = 12.f + rng.uniform(0.f, 6.f);
        if (V >= 7 && r % 3 == 1) row[3] = row[5] = 30.f; // a tied maximum: the lower id wins
    }
    return l;
}

RowCase random_case(Rng& rng, int V, bool greedy, int r) {
    RowCase c;
    c.sp.seed = rng.bits();
    c.sp.step = uint64_t(rng.integer(0, 4000));
    if (!greedy) {
        c.sp.temperature = std::vector<float>{0.3f, 0.7f, 1.f, 1.5f}[size_t(rng.integer(0, 3))];
        c.sp.top_k = std::vector<int>{0, 1, 5, 40, 1024, 5000, V, V + 7}[size_t(rng.integer(0, 7))];
        c.sp.top_p = std::vector<float>{1.f, 0.95f, 0.5f}[size_t(rng.integer(0, 2))];
        c.sp.min_p = rng.integer(0, 2) == 0 ? 0.05f : 0.f;
    }
    if (rng.integer(0, 1)) { // penalties over a history with repeats (and an id outside the vocab)
        c.sp.repetition_penalty = std::vector<float>{1.f, 1.3f, 0.8f}[size_t(rng.integer(0, 2))];
        c.sp.presence_penalty = rng.uniform(-0.5f, 1.5f);
        c.sp.frequency_penalty = rng.uniform(-0.5f, 1.f);
        const int n = rng.integer(1, 60);
        for (int i = 0; i < n; ++i) c.generated.push_back(rng.integer(0, std::min(V, 400) - 1));
        if (r % 4 == 0) c.generated.push_back(V + 3);
        c.count_last = rng.integer(0, 1) && c.generated.back() < V;
    }
    if (rng.integer(0, 1)) { // distinct ids: what the backend sends to the GPU
        std::vector<int> ids(size_t(std::min(V, 30)));
        for (int& id : ids) id = rng.integer(0, V - 1);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        for (int id : ids) c.sp.logit_bias.push_back({id, rng.uniform(-5.f, 5.f)});
        if (ids.size() > 2) c.sp.logit_bias[1].second = -100.f;
    }
    c.n_top = std::vector<int>{0, 1, 3, 20}[size_t(rng.integer(0, 3))];
    return c;
}

} // namespace

TEST_CASE("sampling: greedy with penalties, bias and top logprobs equals the CPU", "[sample]") {
    require_gpu();
    Rng rng(31);
    for (int V : {1, 7, 1000, 151936, 248320}) {
        for (Shape shape : {Shape::Uniform, Shape::Ties}) {
            const int rows = 8;
            const auto logits = make_logits(rng, rows, V, shape);
            std::vector<RowCase> cases;
            for (int r = 0; r < rows; ++r) cases.push_back(random_case(rng, V, true, r));
            const GpuOut g = run_gpu(logits, V, cases);
            Checked n;
            for (int r = 0; r < rows; ++r) {
                INFO("vocab " << V << " shape " << int(shape) << " row " << r);
                check_row({logits.begin() + size_t(r) * V, logits.begin() + size_t(r + 1) * V}, cases[size_t(r)], g, r, n);
            }
            CHECK(n.boundary == 0);
        }
    }
}

TEST_CASE("sampling: draws equal the CPU sampler for every option combination", "[sample]") {
    require_gpu();
    Rng rng(77);
    Checked n;
    for (int V : {1, 7, 1000, 151936, 248320}) {
        for (Shape shape : {Shape::Uniform, Shape::Peaked, Shape::Ties}) {
            for (int rows = 1; rows <= 8; rows += (V > 1000 ? 7 : 1)) {
                const auto logits = make_logits(rng, rows, V, shape);
                std::vector<RowCase> cases;
                for (int r = 0; r < rows; ++r) cases.push_back(random_case(rng, V, r == 2, r));
                const GpuOut g = run_gpu(logits, V, cases);
                for (int r = 0; r < rows; ++r) {
                    INFO("vocab " << V << " shape " << int(shape) << " rows " << rows << " row " << r << " T "
                                  << cases[size_t(r)].sp.temperature << " top_k " << cases[size_t(r)].sp.top_k
                                  << " top_p " << cases[size_t(r)].sp.top_p << " min_p " << cases[size_t(r)].sp.min_p
                                  << " penalties " << cases[size_t(r)].generated.size() << " bias "
                                  << cases[size_t(r)].sp.logit_bias.size());
                    check_row({logits.begin() + size_t(r) * V, logits.begin() + size_t(r + 1) * V}, cases[size_t(r)],
                              g, r, n);
                }
            }
        }
    }
    INFO("equal " << n.equal << " at a boundary " << n.boundary);
    CHECK(n.boundary * 50 <= n.equal);
}

TEST_CASE("sampling: a captured graph replays the draw and keeps the penalty counts", "[sample]") {
    require_gpu();
    Rng rng(5);
    const int V = 151936, rows = 3;
    const auto logits = make_logits(rng, rows, V, Shape::Peaked);
    std::vector<RowCase> cases;
    for (int r = 0; r < rows; ++r) {
        RowCase c;
        c.sp.temperature = 0.7f;
        c.sp.top_p = 0.95f;
        c.sp.repetition_penalty = 1.2f;
        c.sp.frequency_penalty = 0.3f;
        c.sp.seed = 11 + r;
        c.sp.step = 3;
        c.generated = {7, 9, 7, int32_t(100 + r)};
        c.count_last = true;
        c.n_top = 5;
        cases.push_back(c);
    }
    const GpuOut g = run_gpu(logits, V, cases, true, 3);
    Checked n;
    for (int r = 0; r < rows; ++r) {
        check_row({logits.begin() + size_t(r) * V, logits.begin() + size_t(r + 1) * V}, cases[size_t(r)], g, r, n);
        // Three replays counted count_token three times on top of the uploaded history.
        const int32_t* c = g.counts.data() + size_t(r) * V;
        CHECK(c[7] == 2);
        CHECK(c[9] == 1);
        CHECK(c[100 + r] == 3);
        CHECK(std::accumulate(c, c + V, int64_t(0)) == 6);
    }
}

TEST_CASE("sampling: draw frequencies follow the top-k distribution", "[sample]") {
    require_gpu();
    const int V = 50, rows = 4000;
    std::vector<float> base(V);
    Rng rng(5);
    for (auto& v : base) v = rng.uniform(-2.f, 2.f);
    std::vector<float> logits;
    std::vector<RowCase> cases(rows);
    for (int r = 0; r < rows; ++r) {
        logits.insert(logits.end(), base.begin(), base.end());
        cases[size_t(r)].sp.temperature = 1.f;
        cases[size_t(r)].sp.top_k = 4;
        cases[size_t(r)].sp.seed = 99;
        cases[size_t(r)].sp.step = uint64_t(r);
    }
    const auto ig = run_gpu(logits, V, cases).ids;
    std::vector<int> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return base[a] > base[b]; });
    double z = 0;
    for (int i = 0; i < 4; ++i) z += std::exp(double(base[idx[i]]));
    for (int i = 0; i < 4; ++i) {
        const double p = std::exp(double(base[idx[i]])) / z;
        const double f = double(std::count(ig.begin(), ig.end(), idx[i])) / rows;
        INFO("rank " << i << " p " << p << " freq " << f);
        CHECK(std::fabs(f - p) < 4 * std::sqrt(p * (1 - p) / rows) + 1e-3);
    }
    CHECK(std::count_if(ig.begin(), ig.end(), [&](int id) { return std::find(idx.begin(), idx.begin() + 4, id) == idx.begin() + 4; }) == 0);
}
