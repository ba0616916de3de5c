// ninfer tests - MoE decode (router, top-k, grouped experts, shared expert, combine) against an fp64
// reference of core/cpu's MoE op on random weights of each format; batches with shared experts,
// batch = singles bit for bit, graph replay = eager, guards, refused arguments.
#include "ninfer/kernels/moe_decode.h"
#include "weights_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <set>

using namespace ninfer;
using namespace ninfer::test;
using kernels::WeightFormat;

namespace {

struct Shape {
    int64_t H;
    int E, K;
    int64_t I, Is;
};

struct Formats {
    WeightFormat router, experts, shared;
    int down = -1; // the experts' down rows when not experts' format (a WeightFormat)
};

// One random matrix on the host (stored bytes) and the device.
struct Mat {
    WeightFormat f;
    int64_t n, k;
    std::vector<uint8_t> bytes;
    DeviceBuffer<uint8_t> dev;
    Mat(WeightFormat f_, int64_t n_, int64_t k_, uint64_t seed)
        : f(f_), n(n_), k(k_), bytes(random_weight(f_, n_, k_, seed)), dev(bytes) {}
    kernels::WeightView view() const { return {f, dev.get(), n, k}; }
    double dot(int64_t r, const double* x) const {
        const std::vector<double> w = decode_row(f, bytes, n, k, r);
        double s = 0;
        for (int64_t i = 0; i < k; ++i) s += w[size_t(i)] * x[i];
        return s;
    }
};

struct Moe {
    Shape s;
    Mat router, score, gate_up, down, shared_gate_up, shared_down;
    DeviceBuffer<float> logits, weights, act;
    DeviceBuffer<int32_t> ids, work;
    DeviceBuffer<uint32_t> counter;
    Moe(const Shape& sh, const Formats& f, uint64_t seed)
        : s(sh), router(f.router, sh.E, sh.H, seed), score(f.router, 1, sh.H, seed + 1),
          gate_up(f.experts, sh.E * 2 * sh.I, sh.H, seed + 2),
          down(f.down < 0 ? f.experts : WeightFormat(f.down), sh.E * sh.H, sh.I, seed + 3),
          shared_gate_up(f.shared, 2 * sh.Is, sh.H, seed + 4), shared_down(f.shared, sh.H, sh.Is, seed + 5),
          logits(kernels::moe_decode_logits_floats(sh.E)), weights(8 * size_t(sh.K + 1)),
          act(kernels::moe_decode_act_floats(sh.K, sh.I, sh.Is, sh.H)), ids(8 * size_t(sh.K)),
          work(kernels::moe_decode_work_ints(sh.E, sh.K)), counter(1, 0) {}
    kernels::MoeDecodeArgs args(const float* x, int64_t x_stride, int n, float* out, int64_t out_stride) const {
        kernels::MoeDecodeArgs a;
        a.w = {router.view(), score.view(), gate_up.view(), down.view(), shared_gate_up.view(), shared_down.view(),
               s.E, s.K, s.I, s.Is};
        a.scratch = {logits.get(), ids.get(), weights.get(), work.get(), act.get(), counter.get()};
        a.x = x;
        a.x_stride = x_stride;
        a.n_tokens = n;
        a.out = out;
        a.out_stride = out_stride;
        return a;
    }
};

double silu(double v) { return v / (1 + std::exp(-v)); }

// fp64 MoE of one token as core/cpu/forward.cpp computes it (softmax, top-k ties to the lower id,
// renormalised weights, experts then the sigmoid-gated shared expert). Returns the reference top-k
// and whether it is clear: the K-th and next logits apart by more than f32 sums can move them, and
// the next probability far from f32 underflow (where f32 would tie them to the lower id).
struct RefToken {
    std::vector<int> ids;
    bool clear = true;
    std::vector<double> out;
};
RefToken reference(const Moe& m, const double* x) {
    const Shape& s = m.s;
    std::vector<double> p(size_t(s.E));
    for (int e = 0; e < s.E; ++e) p[size_t(e)] = m.router.dot(e, x);
    const std::vector<double> logit = p;
    const double mx = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - mx));
    for (double& v : p) v /= sum;
    std::vector<int> order(size_t(s.E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    RefToken r;
    r.ids.assign(order.begin(), order.begin() + s.K);
    std::sort(r.ids.begin(), r.ids.end()); // the kernel lists its choices in ascending id
    if (s.K < s.E) {
        const int a = order[size_t(s.K - 1)], b = order[size_t(s.K)];
        r.clear = logit[size_t(a)] - logit[size_t(b)] > 1e-4 * (1 + std::abs(mx)) && p[size_t(b)] > 1e-30;
    }
    double chosen = 0;
    for (int e : r.ids) chosen += p[size_t(e)];
    r.out.assign(size_t(s.H), 0);
    auto expert = [&](const Mat& gu, const Mat& dn, int64_t I, int64_t base_gu, int64_t base_dn, double w) {
        std::vector<double> a(static_cast<size_t>(I));
        for (int64_t i = 0; i < I; ++i) a[size_t(i)] = silu(gu.dot(base_gu + i, x)) * gu.dot(base_gu + I + i, x);
        for (int64_t h = 0; h < s.H; ++h) r.out[size_t(h)] += w * dn.dot(base_dn + h, a.data());
    };
    for (int e : r.ids) expert(m.gate_up, m.down, s.I, int64_t(e) * 2 * s.I, int64_t(e) * s.H, p[size_t(e)] / chosen);
    const double sg = 1 / (1 + std::exp(-m.score.dot(0, x)));
    expert(m.shared_gate_up, m.shared_down, s.Is, 0, 0, sg);
    return r;
}

// n tokens of random f32 x (stride H + 4); token 3 repeats token 0 when n > 3 (same experts).
std::vector<float> random_x(const Shape& s, int n, uint64_t seed) {
    Rng rng(seed);
    const int64_t ld = s.H + 4;
    std::vector<float> x(size_t(n * ld), 0.f);
    for (int t = 0; t < n; ++t)
        for (int64_t i = 0; i < s.H; ++i) x[size_t(t * ld + i)] = rng.uniform(-1.5f, 1.5f);
    if (n > 3) std::copy_n(x.begin(), ld, x.begin() + 3 * ld);
    return x;
}

std::vector<float> run(const Moe& m, const std::vector<float>& xh, int n, cudaStream_t stream = nullptr) {
    const int64_t ld = m.s.H + 4, ldo = m.s.H + 8;
    DeviceBuffer<float> x(xh), out(size_t(n * ldo), 0xff); // NaN poison
    CUDA_OK(kernels::moe_decode(m.args(x.get(), ld, n, out.get(), ldo), stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK(out.guards_intact());
    std::vector<float> o = out.download();
    for (int t = 0; t < n; ++t)
        for (int64_t h = m.s.H; h < ldo; ++h) {
            uint32_t bits;
            std::memcpy(&bits, &o[size_t(t * ldo + h)], 4);
            REQUIRE(bits == 0xffffffffu); // the padding past H is not written
        }
    return o;
}

// Returns the number of tokens whose routing was clear and so compared.
int check_case(const Shape& s, const Formats& f, int n, uint64_t seed) {
    INFO("H=" << s.H << " E=" << s.E << " K=" << s.K << " I=" << s.I << " Is=" << s.Is << " n=" << n << " formats "
              << int(f.router) << "/" << int(f.experts) << "/" << int(f.shared) << " down " << f.down);
    Moe m(s, f, seed);
    const std::vector<float> xh = random_x(s, n, seed + 7);
    const std::vector<float> out = run(m, xh, n);
    const std::vector<int32_t> ids = m.ids.download();
    const int64_t ld = s.H + 4, ldo = s.H + 8;
    int n_checked = 0;
    for (int t = 0; t < n; ++t) {
        INFO("token " << t);
        std::vector<double> x(size_t(s.H));
        for (int64_t i = 0; i < s.H; ++i) x[size_t(i)] = xh[size_t(t * ld + i)];
        const RefToken r = reference(m, x.data());
        // f32 routing may differ from fp64 only where the K-th and next probabilities nearly tie.
        if (!r.clear) continue;
        for (int j = 0; j < s.K; ++j) CHECK(ids[size_t(t * s.K + j)] == r.ids[size_t(j)]);
        ++n_checked;
        std::vector<double> got(size_t(s.H));
        for (int64_t h = 0; h < s.H; ++h) {
            got[size_t(h)] = out[size_t(t * ldo + h)];
            REQUIRE(std::isfinite(got[size_t(h)]));
        }
        CHECK(rel_l2(got, r.out) < 2e-5); // f32 sums; bf16-rounded x would be ~1e-3
    }
    // A batch equals its tokens run alone, bit for bit (experts shared or not).
    for (int t = 0; t < n; ++t) {
        const std::vector<float> one(xh.begin() + t * ld, xh.begin() + (t + 1) * ld);
        const std::vector<float> single = run(m, one, 1);
        CHECK(std::memcmp(single.data(), out.data() + t * ldo, size_t(s.H) * 4) == 0);
    }
    if (n > 3) CHECK(std::memcmp(out.data(), out.data() + 3 * ldo, size_t(s.H) * 4) == 0);
    return n_checked;
}

constexpr Formats kAll[] = {
    {WeightFormat::Bf16, WeightFormat::Bf16, WeightFormat::Bf16},
    {WeightFormat::Fp8E4m3RowBf16, WeightFormat::Fp8E4m3RowBf16, WeightFormat::Fp8E4m3RowBf16},
    {WeightFormat::Q4G64Fp16, WeightFormat::Q4G64Fp16, WeightFormat::Q4G64Fp16},
    {WeightFormat::Bf16, WeightFormat::Q4G64Fp16, WeightFormat::Fp8E4m3RowBf16},
    {WeightFormat::Fp8E4m3RowBf16, WeightFormat::Bf16, WeightFormat::Q4G64Fp16},
};

} // namespace

TEST_CASE("moe decode: every format against the fp64 MoE, batches with shared experts", "[moe_decode]") {
    require_gpu();
    uint64_t seed = 100;
    // The kernel fixture's shape (8 of 16 experts: tokens share most of them), then a wider one
    // with I != Is and k not a multiple of 128 in the down rows.
    const Shape shapes[] = {{128, 16, 8, 32, 64}, {384, 40, 4, 80, 48}};
    int tokens = 0, compared = 0;
    for (const Shape& s : shapes)
        for (const Formats& f : kAll)
            for (int n : {1, 3, 8}) {
                compared += check_case(s, f, n, seed++);
                tokens += n;
            }
    CHECK(compared * 10 >= tokens * 8); // near-ties are rare: most tokens are compared
}

TEST_CASE("moe decode: the 35B-A3B widths in q4 (hidden 2048, top-8, experts 512 wide)", "[moe_decode]") {
    require_gpu();
    const Formats q4{WeightFormat::Bf16, WeightFormat::Q4G64Fp16, WeightFormat::Q4G64Fp16};
    CHECK(check_case({2048, 64, 8, 512, 512}, q4, 8, 7) + check_case({2048, 64, 8, 512, 512}, q4, 1, 8) >= 7);
}

TEST_CASE("moe decode: the q4 shared expert on tensor cores over two rounds of groups a warp, and past its bound", "[moe_decode]") {
    require_gpu();
    // H 4096: 64 groups, 8 a warp (two rounds, the first loaded before the PDL wait) and the largest
    // x-part copy in shared memory at one token; H 4160: 66 groups, the FMA path. Both against fp64,
    // batch = singles bit for bit.
    const Formats q4{WeightFormat::Bf16, WeightFormat::Q4G64Fp16, WeightFormat::Q4G64Fp16};
    int compared = 0;
    for (int64_t H : {4096, 4160})
        for (int n : {1, 5, 8}) compared += check_case({H, 32, 4, 64, 128}, q4, n, uint64_t(40 + H + n));
    CHECK(compared >= 12);
}

// The upstream groupwise-int mix (q4 expert gate/up, q5 expert down, q8 shared expert) and q5/q6/q8
// everywhere else a view can take them.
constexpr Formats kGrouped[] = {
    {WeightFormat::Bf16, WeightFormat::Q4G64Fp16, WeightFormat::Q8G32Fp16, int(WeightFormat::Q5G64Fp16)},
    {WeightFormat::Q8G32Fp16, WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16},
    {WeightFormat::Q6G64Fp16, WeightFormat::Q6G64Fp16, WeightFormat::Q5G64Fp16, int(WeightFormat::Q8G32Fp16)},
    {WeightFormat::Q5G64Fp16, WeightFormat::Q8G32Fp16, WeightFormat::Q4G64Fp16, int(WeightFormat::Q6G64Fp16)},
};

TEST_CASE("moe decode: q5/q6/q8 views and the upstream mix against the fp64 MoE", "[moe_decode]") {
    require_gpu();
    uint64_t seed = 900;
    const Shape shapes[] = {{128, 16, 8, 32, 64}, {384, 40, 4, 80, 48}};
    int tokens = 0, compared = 0;
    for (const Shape& s : shapes)
        for (const Formats& f : kGrouped)
            for (int n : {1, 3, 8}) {
                compared += check_case(s, f, n, seed++);
                tokens += n;
            }
    CHECK(compared * 10 >= tokens * 8);
    // The 35B-A3B widths in the mix.
    CHECK(check_case({2048, 64, 8, 512, 512}, kGrouped[0], 8, 17) + check_case({2048, 64, 8, 512, 512}, kGrouped[0], 1, 18) >= 7);
}

TEST_CASE("moe decode: more than 256 experts; equal probabilities go to the lower id", "[moe_decode]") {
    require_gpu();
    const Formats mixed{WeightFormat::Bf16, WeightFormat::Q4G64Fp16, WeightFormat::Fp8E4m3RowBf16};
    // 300 experts: the routing keeps 32 probabilities per lane instead of 8.
    CHECK(check_case({128, 300, 8, 32, 32}, mixed, 8, 301) + check_case({128, 300, 8, 32, 32}, mixed, 1, 302) >= 7);
    for (const Shape& s : {Shape{128, 64, 8, 32, 32}, Shape{128, 300, 6, 32, 32}}) {
        INFO("E=" << s.E << " K=" << s.K);
        Moe m(s, mixed, 303);
        m.router.dev.upload(std::vector<uint8_t>(m.router.bytes.size(), 0)); // every logit 0: all tie
        for (const int n : {8, 1}) { // the last router block routes / every gate/up block routes
            INFO("tokens " << n);
            run(m, random_x(s, n, 304), n);
            const std::vector<int32_t> ids = m.ids.download();
            const std::vector<float> w = m.weights.download();
            for (int t = 0; t < n; ++t)
                for (int j = 0; j < s.K; ++j) {
                    CHECK(ids[size_t(t * s.K + j)] == j);
                    CHECK(std::abs(w[size_t(t * (s.K + 1) + j)] - 1.f / float(s.K)) < 1e-6f);
                }
        }
    }
}

TEST_CASE("moe decode: one token routes as a batch does; a tie at the K-th choice goes to the lower id", "[moe_decode]") {
    require_gpu();
    const Formats f{WeightFormat::Bf16, WeightFormat::Q4G64Fp16, WeightFormat::Q4G64Fp16};
    // Router rows in equal pairs (row 2i + 1 a copy of 2i, so the two logits are the same bits): with
    // odd K the K-th choice splits a pair. One token is routed in every gate/up block, a batch by the
    // first launch's last router block; both must choose the same experts with the same weights.
    for (const Shape& s : {Shape{128, 256, 7, 32, 32}, Shape{128, 256, 8, 32, 32}, Shape{128, 200, 5, 32, 32},
                           Shape{128, 256, 11, 32, 32}, Shape{128, 96, 7, 32, 32}}) {
        INFO("E=" << s.E << " K=" << s.K);
        Moe m(s, f, uint64_t(311 + s.E + s.K));
        const size_t row = size_t(s.H) * 2;
        for (int e = 0; e + 1 < s.E; e += 2)
            std::memcpy(m.router.bytes.data() + size_t(e + 1) * row, m.router.bytes.data() + size_t(e) * row, row);
        m.router.dev.upload(m.router.bytes);
        const int n = 8, K = s.K;
        const int64_t ld = s.H + 4;
        const std::vector<float> xh = random_x(s, n, 312);
        run(m, xh, n);
        const std::vector<int32_t> ids8 = m.ids.download();
        const std::vector<float> w8 = m.weights.download();
        int split = 0;
        for (int t = 0; t < n; ++t) {
            INFO("token " << t);
            run(m, std::vector<float>(xh.begin() + t * ld, xh.begin() + (t + 1) * ld), 1);
            const std::vector<int32_t> ids1 = m.ids.download();
            const std::vector<float> w1 = m.weights.download();
            for (int j = 0; j < K; ++j) CHECK(ids1[size_t(j)] == ids8[size_t(t * K + j)]);
            CHECK(std::memcmp(w1.data(), w8.data() + t * (K + 1), size_t(K + 1) * 4) == 0);
            const std::set<int32_t> chosen(ids1.begin(), ids1.begin() + K);
            CHECK(int(chosen.size()) == K);
            for (const int32_t id : chosen) {
                if (id % 2 == 1) CHECK(chosen.count(id - 1) == 1); // a partner alone is the lower one
                if (id % 2 == 0 && chosen.count(id + 1) == 0) ++split;
            }
        }
        CHECK(split == (K % 2 == 1 ? n : 0));
    }
}

TEST_CASE("moe decode: graph replay equals eager, repeated calls reset the routing counter", "[moe_decode]") {
    require_gpu();
    const Shape s{256, 32, 8, 64, 64};
    const Formats f{WeightFormat::Bf16, WeightFormat::Q4G64Fp16, WeightFormat::Fp8E4m3RowBf16};
    Moe m(s, f, 55);
    const int n = 5;
    const int64_t ld = s.H + 4, ldo = s.H + 8;
    const std::vector<float> xa = random_x(s, n, 1), xb = random_x(s, n, 2);
    const std::vector<float> ea = run(m, xa, n), eb = run(m, xb, n);
    DeviceBuffer<float> x(xa), out(size_t(n * ldo));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    CUDA_OK(kernels::moe_decode(m.args(x.get(), ld, n, out.get(), ldo), stream));
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 3; ++rep) {
        const std::vector<float>& xh = rep % 2 ? xb : xa;
        const std::vector<float>& want = rep % 2 ? eb : ea;
        x.upload(xh);
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        const std::vector<float> got = out.download();
        for (int t = 0; t < n; ++t)
            CHECK(std::memcmp(got.data() + t * ldo, want.data() + t * ldo, size_t(s.H) * 4) == 0);
    }
    CHECK(m.counter.download()[0] == 0u);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
}

TEST_CASE("moe decode: refuses what it does not cover", "[moe_decode]") {
    require_gpu();
    const Shape s{128, 16, 8, 32, 64};
    Moe m(s, {WeightFormat::Bf16, WeightFormat::Bf16, WeightFormat::Bf16}, 3);
    DeviceBuffer<float> x(size_t(9 * 132)), out(size_t(9 * 136));
    CHECK(kernels::moe_decode(m.args(x.get(), 132, 9, out.get(), 136), nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::moe_decode(m.args(x.get(), 132, 0, out.get(), 136), nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::moe_decode(m.args(x.get(), 130, 1, out.get(), 136), nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::moe_decode(m.args(x.get() + 1, 132, 1, out.get(), 136), nullptr) == cudaErrorInvalidValue);
    kernels::MoeDecodeArgs a = m.args(x.get(), 132, 1, out.get(), 136);
    a.w.experts_down.layout = kernels::WeightLayout::Tiled;
    CHECK(kernels::moe_decode(a, nullptr) == cudaErrorInvalidValue);
    a = m.args(x.get(), 132, 1, out.get(), 136);
    a.w.top_k = 17; // more than n_experts
    CHECK(kernels::moe_decode(a, nullptr) == cudaErrorInvalidValue);
    a = m.args(x.get(), 132, 1, out.get(), 136);
    a.scratch.counter = nullptr;
    CHECK(kernels::moe_decode(a, nullptr) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("moe decode: time per layer at the 35B-A3B shape (RESULT lines; speed is not asserted)", "[moe_decode]") {
    require_gpu();
    // q4 everywhere, as bench_decode --recipe q4; 256 experts of 512, top-8, hidden 2048.
    const Shape s{2048, 256, 8, 512, 512};
    const Formats q4{WeightFormat::Q4G64Fp16, WeightFormat::Q4G64Fp16, WeightFormat::Q4G64Fp16};
    Moe m(s, q4, 99);
    const double expert_bytes = double(kernels::weight_bytes(q4.experts, 2 * s.I, s.H) +
                                       kernels::weight_bytes(q4.experts, s.H, s.I));
    const double fixed_bytes = double(kernels::weight_bytes(q4.router, s.E + 1, s.H)) + expert_bytes; // + shared
    constexpr int kLayers = 32, kReps = 20;
    for (int n : {1, 8}) {
        const int64_t ld = s.H + 4, ldo = s.H + 8;
        std::vector<std::unique_ptr<DeviceBuffer<float>>> xs;
        DeviceBuffer<float> out(size_t(n * ldo));
        double unique = 0; // experts read per call, averaged over the inputs
        for (int l = 0; l < kLayers; ++l) {
            xs.push_back(std::make_unique<DeviceBuffer<float>>(random_x(s, n, 1000 + l)));
            CUDA_OK(kernels::moe_decode(m.args(xs.back()->get(), ld, n, out.get(), ldo), nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            unique += m.work.download()[0]; // routed entries (the shared expert has none)
        }
        unique /= kLayers;
        const auto all_layers = [&](cudaStream_t stream) {
            for (int l = 0; l < kLayers; ++l)
                CUDA_OK(kernels::moe_decode(m.args(xs[size_t(l)]->get(), ld, n, out.get(), ldo), stream));
        };
        // one timed batch of kReps replays: the mean per replay, per layer
        const double us = graph_us(all_layers, 1, kReps) / kLayers, bytes = fixed_bytes + unique * expert_bytes;
        std::printf("RESULT moe_decode 35B-A3B q4 batch %d: %.2f us/layer (3 launches, graph), %.1f experts read, "
                    "%.2f MB, %.0f GB/s\n", n, us, unique, bytes / 1e6, bytes / us / 1e3);
    }
}
