// ninfer tests - the harness of tests/gpu/gemv_q4a8.cpp: the shapes, the kernel-path switch, x with
// the quantiser's corner cases, one GEMV call on the int8 route or the bf16 one, and the host model's
// check of its outputs.
//
// Contract: for one test file (its definitions sit in an unnamed namespace). set_path() changes the
// process-wide GEMV kernel choice; a test case that calls it holds a HookReset, which restores it.
#pragma once

#include "q4a8_ref.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

namespace ninfer::test {
namespace {

using kernels::WeightFormat;

using Shape = std::pair<int64_t, int64_t>; // n, k

// Partial last groups (48, 1040, 4112), the smallest k on the ring by default (4112), the 27B's q4
// layers (attention output 5120 x 6144, down 5120 x 17408, 6144 x 5120).
const std::vector<Shape> kShapes = {{17, 48}, {100, 1040}, {129, 4112}, {5120, 6144}, {5120, 17408}, {6144, 5120}};

// Tiled kernel choice: the default per-matrix one, the register kernel forced, or a ring of 2..4 stages.
constexpr int kDefaultPath = -1, kRegisters = 0;
void set_path(int path, bool stage_x = true) {
    if (path == kDefaultPath)
        kernels::gemv_restore_tiled_pipeline();
    else
        kernels::gemv_set_tiled_pipeline(path, -1, stage_x);
}
bool ring_runs(int path, int64_t n, int64_t k) {
    return path == kDefaultPath ? k > kernels::kGemvRegisterMaxK || n >= kernels::kGemvRingMinRows : path > 0;
}
// On the ring the route is int8 when 8 tokens' int8 copy of a split's x fits the 48 KB stage, whatever
// n_tokens (kernels/src/gemv_q4a8.cuh x8_stage_bytes: per token 64 bytes a unit + 64, 32 bytes of
// scales a unit; a split is a whole number of 8-unit steps).
bool int8_expected(int64_t n, int64_t k, int split) {
    const int64_t steps = kernels::tiled_units(WeightFormat::Q4G64Fp16, n, k) / 8, units = (steps + split - 1) / split * 8;
    return kernels::kGemvMaxTokens * (units * 64 + 64) + units * 32 <= 48 * 1024;
}

// Puts the process-wide GEMV hooks back however a test case ends.
struct HookReset {
    ~HookReset() {
        kernels::gemv_restore_tiled_pipeline();
        kernels::gemv_set_tiled_target_blocks_per_sm(0);
    }
};

// tokens rows of k activations, stride ldx; the gap past k holds 1e4 (a partial group that read past
// k would get another amax). special: per token three elements 50x larger, an all-zero group, a
// group of exact rounding ties (amax 127 or 254, so x * inv lands on halves) and a group of ~1e-38
// (127 / amax overflows fp32: the quantiser caps inv at FLT_MAX).
std::vector<bf16> make_x(int tokens, int64_t k, int64_t ldx, uint64_t seed, bool special) {
    Rng rng(seed);
    std::vector<bf16> x(size_t(tokens) * size_t(ldx), to_bf16(1e4f));
    const int64_t groups = (k + kQ4A8Group - 1) / kQ4A8Group;
    for (int t = 0; t < tokens; ++t) {
        bf16* row = x.data() + size_t(t) * size_t(ldx);
        for (int64_t i = 0; i < k; ++i) row[i] = to_bf16(rng.uniform(-2.f, 2.f));
        if (!special) continue;
        const int64_t zero = groups > 1 ? t % groups : (t == 1 ? 0 : -1), ties = groups > 2 ? (t + 1) % groups : -1;
        const int64_t tiny = groups > 3 ? (t + 2) % groups : -1; // amax < 127 / FLT_MAX: inv capped
        for (int o = 0; o < 3; ++o) {
            const int64_t i = rng.integer(0, int(k - 1));
            if (i / kQ4A8Group != zero && i / kQ4A8Group != ties && i / kQ4A8Group != tiny)
                row[i] = to_bf16(50.f * to_f(row[i]));
        }
        for (int64_t i = tiny * kQ4A8Group; tiny >= 0 && i < std::min(k, (tiny + 1) * kQ4A8Group); ++i)
            row[i] = to_bf16(to_f(row[i]) * 1e-38f);
        for (int64_t i = zero * kQ4A8Group; zero >= 0 && i < std::min(k, (zero + 1) * kQ4A8Group); ++i) row[i] = to_bf16(0.f);
        for (int64_t i = ties * kQ4A8Group; ties >= 0 && i < std::min(k, (ties + 1) * kQ4A8Group); ++i) {
            const int e = int(i % 16); // odd t: odd integers times inv 0.5; even t: halves times 1
            row[i] = to_bf16(t % 2 ? float(2 * e - 15) : float(e - 8) + 0.5f);
        }
        if (ties >= 0) row[ties * kQ4A8Group] = to_bf16((t % 2 ? 254.f : 127.f) * (t % 4 < 2 ? 1.f : -1.f));
    }
    return x;
}

// Low halves for x (x_lo): |lo| < 2^-9 |x|, as bf16(x32 - bf16(x32)) would be (zero groups stay zero;
// ties no longer are); 1e4 in the gap past k like x.
std::vector<bf16> make_lo(const std::vector<bf16>& x, int64_t k, int64_t ldx, uint64_t seed) {
    Rng rng(seed);
    std::vector<bf16> lo(x.size());
    for (size_t i = 0; i < x.size(); ++i)
        lo[i] = to_bf16(int64_t(i % size_t(ldx)) < k ? to_f(x[i]) * std::ldexp(rng.uniform(-1.f, 1.f), -9) : 1e4f);
    return lo;
}

// One shape's inputs for `tokens` tokens: x, its low halves, a residual, split-K scratch.
struct Inputs {
    int64_t n, k, ldx, ldy;
    int tokens;
    std::vector<bf16> x, lo, res;
    DeviceBuffer<bf16> dx, dlo, dres;
    DeviceGemvScratch scratch;
    Inputs(int64_t n_, int64_t k_, int tokens_, uint64_t seed, bool special = true)
        : n(n_), k(k_), ldx(k_ + 8), ldy((n_ + 7) / 8 * 8 + 8), tokens(tokens_),
          x(make_x(tokens_, k_, ldx, seed, special)), lo(make_lo(x, k_, ldx, seed + 2)),
          res(Rng(seed + 1).bf16s(size_t(tokens_) * size_t(ldy), -4.f, 4.f)), dx(x), dlo(lo), dres(res), scratch(n_) {}
    const bf16* x_row(int t) const { return x.data() + size_t(t) * size_t(ldx); }
    const bf16* lo_row(int t) const { return lo.data() + size_t(t) * size_t(ldx); }
    double resid(int t, int64_t r) const { return to_f(res[size_t(t) * size_t(ldy) + size_t(r)]); }
};

struct Call {
    bool int8 = true, fp32_out = false, residual = false, tail = false, split = true;
    bool lo = false;          // x_lo given
    bool graph = false;       // captured once, replayed three times
    int first = 0, count = 0; // tokens first .. first + count - 1 of the inputs (count 0: all)
};

struct Output {
    bool int8 = false;          // gemv_runs_int8_x said so
    int split = 1;              // gemv_split_count
    std::vector<double> y;      // [t * n + r]; rows of the tail from y_tail
    std::vector<uint32_t> bits; // the same elements' bf16 or fp32 bit patterns
};

Output run(const kernels::WeightView& w, Inputs& in, const Call& c) {
    const int tokens = c.count ? c.count : in.tokens;
    const int64_t n = in.n, tail0 = c.tail ? n / 2 : n, ldt = n - tail0 + 3;
    DeviceBuffer<uint8_t> y(size_t(tokens) * size_t(in.ldy) * 4, 0xff); // NaN poison, room for fp32
    DeviceBuffer<float> yt(size_t(tokens) * size_t(ldt), 0xff);
    kernels::GemvArgs a;
    a.w = w;
    a.x = in.dx.get() + size_t(c.first) * size_t(in.ldx);
    a.x_lo = c.lo ? in.dlo.get() + size_t(c.first) * size_t(in.ldx) : nullptr;
    a.n_tokens = tokens;
    a.x_stride = in.ldx;
    a.residual = c.residual ? in.dres.get() + size_t(c.first) * size_t(in.ldy) : nullptr;
    a.residual_stride = in.ldy;
    a.y = y.get();
    a.y_fp32 = c.fp32_out;
    a.y_stride = in.ldy;
    if (c.tail) {
        a.y_tail = yt.get();
        a.tail_row0 = tail0;
        a.y_tail_stride = ldt;
    }
    if (c.split) a.scratch = in.scratch.view();
    a.x_int8 = c.int8;
    Output o;
    o.int8 = kernels::gemv_runs_int8_x(a);
    o.split = kernels::gemv_split_count(a);
    if (c.graph)
        replay_graph([&](cudaStream_t stream) { CUDA_OK(kernels::gemv(a, stream)); }, 3);
    else
        CUDA_OK(kernels::gemv(a, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(y.guards_intact());
    CHECK(yt.guards_intact());
    const auto cnt = in.scratch.counters.download();
    CHECK(std::all_of(cnt.begin(), cnt.end(), [](uint32_t v) { return v == 0; }));
    const auto yb = y.download();
    const auto tb = yt.download();
    o.y.resize(size_t(tokens) * size_t(n));
    o.bits.resize(o.y.size());
    // Every row below the tail written (no NaN poison left), the padding and the tail rows of y not.
    int bad = 0;
    for (int t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < in.ldy; ++r) {
            const size_t at = size_t(t) * size_t(in.ldy) + size_t(r), to = size_t(t) * size_t(n) + size_t(r);
            uint32_t bits = 0;
            double v;
            if (c.fp32_out) {
                float f;
                std::memcpy(&f, &yb[at * 4], 4);
                std::memcpy(&bits, &f, 4);
                v = f;
            } else {
                bf16 h;
                std::memcpy(&h, &yb[at * 2], 2);
                std::memcpy(&bits, &h, 2);
                v = to_f(h);
            }
            if ((r < tail0) == std::isnan(v) && bad++ < 5) FAIL_CHECK("y element " << t << "," << r << " = " << v);
            if (r < tail0) {
                o.y[to] = v;
                o.bits[to] = bits;
            }
        }
        for (int64_t r = 0; c.tail && r < ldt; ++r) {
            const float v = tb[size_t(t) * size_t(ldt) + size_t(r)];
            if ((r < n - tail0) == std::isnan(v) && bad++ < 5) FAIL_CHECK("tail element " << t << "," << r);
            if (r >= n - tail0) continue;
            o.y[size_t(t) * size_t(n) + size_t(tail0 + r)] = v;
            std::memcpy(&o.bits[size_t(t) * size_t(n) + size_t(tail0 + r)], &v, 4);
        }
    }
    CHECK(bad == 0);
    return o;
}

// The host model at sampled rows (all rows of small matrices; tile edges, the tail start and random
// ones of large ones) for every token of the inputs, of x or (lo) of x + x_lo.
struct Model {
    std::vector<int64_t> rows;
    std::vector<std::vector<W4A8Value>> value; // [token][i] for row rows[i]
    int64_t groups = 0;
};

Model model_of(const TiledWeight& w, const Inputs& in, uint64_t seed, bool lo) {
    Model m;
    const int64_t n = in.n;
    m.groups = (in.k + kQ4A8Group - 1) / kQ4A8Group;
    if (n <= 1024) {
        for (int64_t r = 0; r < n; ++r) m.rows.push_back(r);
    } else {
        Rng rng(seed);
        m.rows = {0, 1, 15, 16, 63, 64, n / 2 - 1, n / 2, n - 17, n - 1};
        for (int i = 0; i < 118; ++i) m.rows.push_back(rng.integer(0, int(n - 1)));
    }
    std::vector<std::vector<QuantGroup>> qx;
    for (int t = 0; t < in.tokens; ++t) qx.push_back(quantise_row(in.x_row(t), lo ? in.lo_row(t) : nullptr, in.k));
    m.value.assign(size_t(in.tokens), std::vector<W4A8Value>(m.rows.size()));
    for (size_t i = 0; i < m.rows.size(); ++i) {
        const Q4Row row = q4_row(w.bytes, n, in.k, m.rows[i]);
        for (int t = 0; t < in.tokens; ++t) m.value[size_t(t)][i] = w4a8_dot(row, qx[size_t(t)], in.k);
    }
    return m;
}

// Elements of o (the call's tokens) outside q4a8_ref.h's output_bound around the model.
int check_model(const Output& o, const Inputs& in, const Call& c, const Model& m) {
    const int tokens = c.count ? c.count : in.tokens;
    const int64_t tail0 = c.tail ? in.n / 2 : in.n;
    int bad = 0;
    for (int t = 0; t < tokens; ++t)
        for (size_t i = 0; i < m.rows.size(); ++i) {
            const int64_t r = m.rows[i];
            const W4A8Value& v = m.value[size_t(c.first + t)][i];
            const double res = c.residual ? in.resid(c.first + t, r) : 0.0, got = o.y[size_t(t) * size_t(in.n) + size_t(r)];
            const double tol = output_bound(v.y, res, fp32_sum_bound(m.groups, v.mag), !c.fp32_out && r < tail0, c.residual);
            if (!(std::fabs(got - (v.y + res)) <= tol) && bad++ < 5)
                FAIL_CHECK("row " << r << " token " << c.first + t << " got " << got << " want " << v.y + res << " tol " << tol);
        }
    return bad;
}

std::string shape_name(int64_t n, int64_t k) { return std::to_string(n) + "x" + std::to_string(k); }

} // namespace
} // namespace ninfer::test
