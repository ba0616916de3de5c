// ninfer tests - the q4 int8 route's x written by its producers (gemv.h Int8X): quantise_int8_x,
// add_rmsnorm's y8 and swiglu's out8 give the bytes of the host model of the quantiser, and a GEMV
// that reads them (GemvArgs::x8) gives the bits of the GEMV that quantises x itself.
#include "ninfer/kernels/runner_ops.h"
#include "q4a8_ref.h"

#include <cmath>
#include <cstring>

using namespace ninfer;
using namespace ninfer::test;
using kernels::WeightFormat;

namespace {

// An Int8X for k and 8 token slots, its contents downloaded as they are laid out. d starts as NaN
// (0xFF bytes) and runs kSlackUnits units past the Int8X's units: a producer that leaves a unit the
// GEMV reads unwritten (the zero padding up to int8_x_units included), or a GEMV that reads past
// them, gets NaN sums (0 codes x 0 multiplier x NaN), not the bits of the GEMV that quantises.
constexpr int64_t kSlackUnits = 8;
struct Int8Rows {
    int64_t k, units, row_bytes;
    DeviceBuffer<uint8_t> q;
    DeviceBuffer<float> d;
    explicit Int8Rows(int64_t k_)
        : k(k_), units(kernels::int8_x_units(k_)), row_bytes(units * 64 + 32),
          q(size_t(kernels::kGemvMaxTokens * row_bytes), 0xAB), d(size_t((units + kSlackUnits) * 8), 0xFF) {}
    kernels::Int8X view() { return {q.get(), d.get(), row_bytes}; }
};

// Lane quad c's 16 bytes of unit u hold the group's values k0 = 64u + 16c + (0, 2, 4, 6 | 1, 3, 5, 7 |
// 8, 10, 12, 14 | 9, 11, 13, 15) (q4a8_pack_b); the host model's q in memory order mapped the same way.
uint8_t model_byte(const QuantGroup& g, int c, int b) {
    const int word = b / 4, slot = b % 4, e = (word / 2) * 8 + (word % 2) + 2 * slot;
    return uint8_t(g.q[16 * c + e]);
}

// The device rows against quantise_row(x, lo) of every token: q bytes of the rows, d / 16 per (unit,
// token slot), zero for slots without a token; the units past ceil(k / 64) (int8_x_units' padding)
// q 0 and d 0; d past the Int8X's units untouched. Returns the number of mismatching bytes / values.
int check_rows(Int8Rows& r, const std::vector<bf16>& x, const std::vector<bf16>* lo, int64_t ldx, int tokens) {
    const auto q = r.q.download();
    const auto d = r.d.download();
    REQUIRE(r.units % 8 == 0);
    REQUIRE(r.units >= (r.k + 63) / 64);
    int bad = 0;
    for (int t = 0; t < kernels::kGemvMaxTokens; ++t) {
        std::vector<QuantGroup> groups;
        if (t < tokens)
            groups = quantise_row(x.data() + size_t(t) * size_t(ldx), lo ? lo->data() + size_t(t) * size_t(ldx) : nullptr, r.k);
        for (int64_t u = 0; u < r.units; ++u) {
            const bool real = t < tokens && u < int64_t(groups.size());
            const float want = real ? groups[size_t(u)].d * 0.0625f : 0.f, got = d[size_t(u * 8 + t)];
            if (std::isnan(want) ? !std::isnan(got) : std::memcmp(&got, &want, 4) != 0) ++bad; // NaN payloads may differ
            if (t >= tokens) continue;
            for (int c = 0; c < 4; ++c)
                for (int b = 0; b < 16; ++b)
                    bad += q[size_t(t * r.row_bytes + u * 64 + c * 16 + b)] != (real ? model_byte(groups[size_t(u)], c, b) : 0);
        }
    }
    for (size_t i = size_t(r.units * 8); i < d.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &d[i], 4);
        bad += bits != 0xFFFFFFFFu;
    }
    return bad;
}

std::vector<float> floats(Rng& rng, size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& e : v) e = rng.uniform(lo, hi);
    return v;
}

std::vector<bf16> rows_of(int tokens, int64_t k, int64_t ldx, uint64_t seed, float scale) {
    Rng rng(seed);
    std::vector<bf16> x(size_t(tokens) * size_t(ldx), to_bf16(0.f));
    for (int t = 0; t < tokens; ++t)
        for (int64_t i = 0; i < k; ++i) x[size_t(t) * size_t(ldx) + size_t(i)] = to_bf16(scale * rng.uniform(-1.f, 1.f));
    return x;
}

// The int8-route GEMV of q4 weight w (tiled) over tokens rows of x (+ lo), fp32 y of stride n; y and
// x8 are the caller's.
kernels::GemvArgs int8_gemv_args(const TiledWeight& w, DeviceGemvScratch& scratch, const bf16* x, const bf16* lo,
                                 int tokens, int64_t ldx) {
    kernels::GemvArgs a;
    a.w = w.view;
    a.x = x;
    a.x_lo = lo;
    a.n_tokens = tokens;
    a.x_stride = ldx;
    a.y_fp32 = true;
    a.y_stride = w.view.n;
    a.scratch = scratch.view();
    a.x_int8 = true;
    REQUIRE(kernels::gemv_runs_int8_x(a));
    return a;
}

} // namespace

TEST_CASE("int8_x: quantise_int8_x writes the host model's bytes", "[int8_x]") {
    require_gpu();
    for (int64_t k : {48, 1040, 5120, 17408})
        for (int tokens : {1, 5, 8})
            for (bool with_lo : {false, true}) {
                const int64_t ldx = k + 16;
                const auto x = rows_of(tokens, k, ldx, uint64_t(k + tokens), 3.f);
                const auto lo = rows_of(tokens, k, ldx, uint64_t(k + tokens + 1), 0.001f);
                DeviceBuffer<bf16> dx(x), dlo(lo);
                Int8Rows r(k);
                CUDA_OK(kernels::quantise_int8_x(dx.get(), with_lo ? dlo.get() : nullptr, ldx, tokens, k, r.view(), nullptr));
                CUDA_OK(cudaDeviceSynchronize());
                INFO("k " << k << " tokens " << tokens << " lo " << with_lo);
                CHECK(check_rows(r, x, with_lo ? &lo : nullptr, ldx, tokens) == 0);
                CHECK(r.q.guards_intact());
            }
    { // A NaN (token 0, group 1) and an infinity (token 2, group 3): those groups q 0, d NaN / inf.
        const int64_t k = 320, ldx = k;
        auto x = rows_of(3, k, ldx, 5, 3.f), lo = rows_of(3, k, ldx, 6, 0.001f);
        x[70] = to_bf16(std::nanf(""));
        x[size_t(2 * ldx + 200)] = to_bf16(-INFINITY);
        for (bool with_lo : {false, true}) {
            DeviceBuffer<bf16> dx(x), dlo(lo);
            Int8Rows r(k);
            CUDA_OK(kernels::quantise_int8_x(dx.get(), with_lo ? dlo.get() : nullptr, ldx, 3, k, r.view(), nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            INFO("non-finite x, lo " << with_lo);
            const auto d = r.d.download();
            CHECK(std::isnan(d[1 * 8 + 0]));
            CHECK(std::isinf(d[3 * 8 + 2]));
            CHECK((std::isfinite(d[0]) && std::isfinite(d[1 * 8 + 1]) && std::isfinite(d[3 * 8 + 0])));
            CHECK(check_rows(r, x, with_lo ? &lo : nullptr, ldx, 3) == 0);
        }
    }
    DeviceBuffer<bf16> x(64);
    Int8Rows r(64);
    CHECK(kernels::quantise_int8_x(x.get(), nullptr, 64, 9, 64, r.view(), nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::quantise_int8_x(x.get(), nullptr, 64, 1, 40, r.view(), nullptr) == cudaErrorInvalidValue);
    kernels::Int8X short_rows = r.view();
    short_rows.row_bytes = 48;
    CHECK(kernels::quantise_int8_x(x.get(), nullptr, 64, 1, 64, short_rows, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("int8_x: add_rmsnorm's and swiglu's int8 rows are the quantisation of what they wrote", "[int8_x]") {
    require_gpu();
    // The 27B's widths, and widths whose last 512 columns are partly past the end (int8_x_units' zero
    // padding; inter 4112: a last group of 16 columns); the widest norm row with int8 rows (its row
    // copy and static shared memory at the 48 KB a block gets without opting in).
    for (auto [dim, inter] : std::vector<std::pair<int, int>>{{5120, 17408}, {4160, 4112}, {kernels::kAddRmsnormInt8MaxDim, 4112}})
    for (int tokens : {1, 3, 8}) {
        const int64_t ys = dim + 8, gs = 2 * inter + 8, os = inter + 8;
        Rng rng{uint64_t(tokens)};
        DeviceBuffer<float> x(floats(rng, size_t(tokens) * ys, -2.f, 2.f)), add(floats(rng, size_t(tokens) * ys, -1.f, 1.f)),
            w(floats(rng, size_t(dim), -0.5f, 0.5f)), gu(floats(rng, size_t(tokens) * gs, -4.f, 4.f));
        DeviceBuffer<bf16> y(size_t(tokens) * ys), y_lo(size_t(tokens) * ys), out(size_t(tokens) * os), out_lo(size_t(tokens) * os);
        DeviceBuffer<float> y32(size_t(tokens) * ys), out32(size_t(tokens) * os);
        Int8Rows yr(dim), ar(inter);
        CUDA_OK(kernels::add_rmsnorm(x.get(), ys, add.get(), ys, w.get(), y.get(), ys, y32.get(), tokens, dim, 1e-6f, nullptr,
                                     y_lo.get(), yr.view()));
        CUDA_OK(kernels::swiglu(gu.get(), gs, inter, out.get(), out32.get(), os, tokens, nullptr, out_lo.get(), ar.view()));
        CUDA_OK(cudaDeviceSynchronize());
        const auto yh = y.download(), yl = y_lo.download(), oh = out.download(), ol = out_lo.download();
        INFO("dim " << dim << " inter " << inter << " tokens " << tokens);
        CHECK(check_rows(yr, yh, &yl, ys, tokens) == 0);
        CHECK(check_rows(ar, oh, &ol, os, tokens) == 0);
        // The bf16 / f32 outputs are those of the launches without int8 rows (one block per row for swiglu then).
        DeviceBuffer<bf16> out_b(size_t(tokens) * os), out_lo_b(size_t(tokens) * os);
        DeviceBuffer<float> out32_b(size_t(tokens) * os);
        CUDA_OK(kernels::swiglu(gu.get(), gs, inter, out_b.get(), out32_b.get(), os, tokens, nullptr, out_lo_b.get()));
        CUDA_OK(cudaDeviceSynchronize());
        CHECK(out_b.download() == oh);
        CHECK(out_lo_b.download() == ol);
        CHECK(out32_b.download() == out32.download());
    }
    // One column group wider than kAddRmsnormInt8MaxDim: refused, nothing launched.
    const int wide = kernels::kAddRmsnormInt8MaxDim + 16;
    DeviceBuffer<float> x{size_t(wide)}, w{size_t(wide)};
    DeviceBuffer<bf16> y{size_t(wide)}, y_lo{size_t(wide)};
    Int8Rows yr(wide);
    CHECK(kernels::add_rmsnorm(x.get(), wide, nullptr, wide, w.get(), y.get(), wide, nullptr, 1, wide, 1e-6f, nullptr, y_lo.get(),
                               yr.view()) == cudaErrorInvalidValue);
}

TEST_CASE("int8_x: a GEMV reading the producer's int8 rows gives the bits of the GEMV that quantises", "[int8_x]") {
    require_gpu();
    uint64_t seed = 77;
    // The 27B's q4 shapes, and k whose 64-column units do not fill the last 8-unit step (4112: 65 units,
    // the last partial; 5184: 81), so the GEMV's last step reads int8_x_units' padding.
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{
             {5120, 6144}, {6144, 5120}, {34816, 5120}, {5120, 17408}, {1000, 4112}, {5120, 5184}}) {
        const TiledWeight w(WeightFormat::Q4G64Fp16, n, k, seed++);
        DeviceGemvScratch scratch(n);
        for (int tokens : {1, 4, 8})
            for (bool with_lo : {false, true}) {
                const int64_t ldx = k + 8;
                DeviceBuffer<bf16> x(rows_of(tokens, k, ldx, seed++, 2.f)), lo(rows_of(tokens, k, ldx, seed++, 0.004f));
                Int8Rows r(k);
                CUDA_OK(kernels::quantise_int8_x(x.get(), with_lo ? lo.get() : nullptr, ldx, tokens, k, r.view(), nullptr));
                kernels::GemvArgs a = int8_gemv_args(w, scratch, x.get(), with_lo ? lo.get() : nullptr, tokens, ldx);
                DeviceBuffer<float> own(size_t(tokens) * size_t(n)), read(size_t(tokens) * size_t(n));
                a.y = own.get();
                CUDA_OK(kernels::gemv(a, nullptr));
                a.x8 = r.view();
                a.y = read.get();
                CUDA_OK(kernels::gemv(a, nullptr));
                CUDA_OK(cudaDeviceSynchronize());
                INFO("n " << n << " k " << k << " tokens " << tokens << " lo " << with_lo);
                const auto own_h = own.download();
                CHECK(std::memcmp(own_h.data(), read.download().data(), own_h.size() * 4) == 0);
                kernels::Int8X bad = r.view();
                bad.row_bytes = 16; // shorter than a row
                a.x8 = bad;
                CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
                bad.row_bytes = (k + 63) / 64 * 64; // without the padding to whole 8-unit steps
                if (bad.row_bytes < r.row_bytes - 32) {
                    a.x8 = bad;
                    CHECK(kernels::gemv(a, nullptr) == cudaErrorInvalidValue);
                }
            }
    }
}

TEST_CASE("int8_x: a NaN or an infinity in x makes its token's outputs NaN on the int8 route, as on the bf16 one",
          "[int8_x]") {
    require_gpu();
    const int64_t n = 5120, k = 6144, ldx = k;
    const TiledWeight w(WeightFormat::Q4G64Fp16, n, k, 91);
    DeviceGemvScratch scratch(n);
    for (int tokens : {1, 4}) {
        auto xh = rows_of(tokens, k, ldx, 92, 2.f);
        xh[1000] = to_bf16(std::nanf("")); // token 0
        if (tokens > 1) xh[size_t(2 * ldx + 4000)] = to_bf16(INFINITY); // token 2
        DeviceBuffer<bf16> x(xh);
        Int8Rows r(k);
        CUDA_OK(kernels::quantise_int8_x(x.get(), nullptr, ldx, tokens, k, r.view(), nullptr));
        kernels::GemvArgs a = int8_gemv_args(w, scratch, x.get(), nullptr, tokens, ldx);
        for (bool producer : {false, true}) {
            a.x8 = producer ? r.view() : kernels::Int8X{};
            DeviceBuffer<float> y(size_t(tokens) * size_t(n));
            a.y = y.get();
            CUDA_OK(kernels::gemv(a, nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            const auto yh = y.download();
            INFO("tokens " << tokens << " producer rows " << producer);
            int wrong = 0;
            for (int t = 0; t < tokens; ++t)
                for (int64_t i = 0; i < n; ++i) {
                    const float v = yh[size_t(t) * size_t(n) + size_t(i)];
                    wrong += (t == 0 || t == 2) ? !std::isnan(v) : !std::isfinite(v);
                }
            CHECK(wrong == 0);
        }
    }
}
