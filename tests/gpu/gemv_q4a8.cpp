// ninfer tests - the tiled q4 GEMV's int8-activation route (W4A8, gemv.h GemvArgs::x_int8): against a
// host model of its exact numerics (x, and x + x_lo) and against the bf16-x product; batch, graph,
// split and ring determinism; the flag ignored where it does not apply; the installed kernel tuning.
#include "gemv_q4a8_harness.h"
#include "ninfer/kernels/tuning.h"

using namespace ninfer;
using namespace ninfer::test;
using kernels::WeightFormat;

TEST_CASE("gemv_q4a8: the host quantiser rounds ties to even, stays in -127..127, zeroes empty groups", "[gemv_q4a8]") {
    const auto group = [](std::vector<float> v, int count) {
        v.resize(kQ4A8Group, 1e4f); // past count: must not count
        return quantise_group(v.data(), count);
    };
    // amax 127: inv 1, every half a tie.
    const auto a = group({127.f, 2.5f, 3.5f, -0.5f, -1.5f, 0.5f, -127.f, 1.f}, 8);
    const int8_t want_a[8] = {127, 2, 4, 0, -2, 0, -127, 1};
    CHECK(std::equal(want_a, want_a + 8, a.q));
    CHECK(a.d == 1.f);
    CHECK(std::all_of(a.q + 8, a.q + kQ4A8Group, [](int8_t q) { return q == 0; }));
    // amax 254: inv 0.5.
    const auto b = group({-254.f, 5.f, 7.f, -3.f, 1.f}, 5);
    const int8_t want_b[5] = {-127, 2, 4, -2, 0};
    CHECK(std::equal(want_b, want_b + 5, b.q));
    CHECK(b.d == 2.f);
    // amax 3: inv = fl(127 / 3) = 42.33333206, so 1 -> 42, -2 -> -84.6666641 -> -85.
    const auto c = group({3.f, 1.f, -2.f}, 3);
    CHECK((c.q[0] == 127 && c.q[1] == 42 && c.q[2] == -85));
    CHECK(c.d == 3.f / 127.f);
    // All zero (the 1e4 past count ignored): d 0, every q 0.
    const auto z = group({0.f, -0.f, 0.f}, 3);
    CHECK(z.d == 0.f);
    CHECK(std::all_of(z.q, z.q + kQ4A8Group, [](int8_t q) { return q == 0; }));
    // +-amax give exactly +-127 and nothing leaves the range, for many amax (x * inv may round above 127);
    // fp32 values, as x + x_lo are.
    Rng rng(3);
    for (int i = 0; i < 2000; ++i) {
        std::vector<float> v(kQ4A8Group);
        for (float& e : v) e = std::ldexp(rng.uniform(-1.f, 1.f), rng.integer(-30, 30));
        float amax = 0;
        for (float e : v) amax = std::max(amax, std::fabs(e));
        const auto g = group(v, kQ4A8Group);
        for (int e = 0; e < kQ4A8Group; ++e)
            if (std::fabs(v[size_t(e)]) == amax) CHECK(std::abs(int(g.q[e])) == 127);
        CHECK(std::all_of(g.q, g.q + kQ4A8Group, [](int8_t q) { return q >= -127 && q <= 127; }));
    }
    // w4a8_dot: codes 1, multiplier 0.5, x quantised as `a` (d = 1): dot = sum of a.q = 5, y = 5 * 0.5 * 1.
    Q4Row row{std::vector<int8_t>(kQ4A8Group, 1), {0.5f}};
    const auto v = w4a8_dot(row, {a}, kQ4A8Group);
    CHECK(v.y == (127 + 2 + 4 - 2 - 127 + 1) * 0.5);
    CHECK(v.mag == std::fabs(v.y));
}

TEST_CASE("gemv_q4a8: the int8 route matches the host model of its quantisation and integer dots", "[gemv_q4a8]") {
    require_gpu();
    HookReset reset;
    const Call variants[] = {{},
                             {.residual = true},
                             {.fp32_out = true, .split = false},
                             {.fp32_out = true, .residual = true},
                             {.tail = true},
                             {.fp32_out = true, .lo = true},
                             {.residual = true, .lo = true}};
    uint64_t seed = 1;
    int ring_calls = 0, int8_calls = 0;
    std::set<std::string> fallbacks; // ring calls that kept bf16 x (the int8 copy did not fit)
    for (auto [n, k] : kShapes) {
        const TiledWeight w(WeightFormat::Q4G64Fp16, n, k, seed++);
        for (int tokens : {1, 3, 5, 8}) {
            Inputs in(n, k, tokens, seed++);
            const Model models[2] = {model_of(w, in, seed, false), model_of(w, in, seed, true)};
            ++seed;
            for (int path : {kDefaultPath, 2, 3, 4}) {
                set_path(path);
                for (size_t vi = 0; vi < std::size(variants); ++vi) {
                    const Call& c = variants[vi];
                    INFO("n=" << n << " k=" << k << " tokens=" << tokens << " path " << path << " variant " << vi);
                    const Output o = run(w.view, in, c);
                    REQUIRE(o.int8 == (ring_runs(path, n, k) && int8_expected(n, k, o.split)));
                    ring_calls += ring_runs(path, n, k);
                    if (o.int8) {
                        ++int8_calls;
                        CHECK(check_model(o, in, c, models[c.lo]) == 0);
                        continue;
                    }
                    if (ring_runs(path, n, k))
                        fallbacks.insert(shape_name(n, k) + "/" + std::to_string(tokens) + "/" + std::to_string(o.split));
                    Call plain = c;
                    plain.int8 = false;
                    CHECK(run(w.view, in, plain).bits == o.bits); // the flag ignored: bf16 x, same bits
                }
            }
        }
    }
    std::string fell;
    for (const auto& f : fallbacks) fell += " " + f;
    std::printf("RESULT gemv_q4a8 int8 route in %d of %d ring calls; bf16 x kept (n x k / tokens / splits):%s\n", int8_calls,
                ring_calls, fell.empty() ? " none" : fell.c_str());
}

// Rounding moves each element by at most d/2 = amax/254 of its group, so a group's error is at most
// sqrt(64) * amax / 254 against at least amax of x: ||dx|| / ||x|| <= 4/127 = 0.0315 whatever x is.
// Uniform activations lose about 1/254 ~ 0.4% (rounding noise step^2/12 with step = amax/127,
// against a mean x^2 of amax^2/3; the host model measured 0.40-0.49%): asserted <= 2%, the route's
// stated cost. The stress x (50x outliers, groups of exact ties whose amax is 17x the rest) comes
// near the worst case in the groups that carry most of its energy (the host model: 2.6-3.3% on
// these seeds); random weight rows pass the x error on with a gain near 1: asserted <= 5%.
TEST_CASE("gemv_q4a8: the int8 route is within 2% relative L2 (per token) of the exact bf16-x product", "[gemv_q4a8]") {
    require_gpu();
    HookReset reset;
    uint64_t seed = 1000;
    for (auto [n, k] : kShapes) {
        const TiledWeight w(WeightFormat::Q4G64Fp16, n, k, seed++);
        for (bool special : {false, true}) {
            Inputs in(n, k, kernels::kGemvMaxTokens, seed++, special);
            std::vector<double> ref(size_t(in.tokens) * size_t(n)), model(ref.size()), xd(size_t(in.tokens) * size_t(k));
            for (int t = 0; t < in.tokens; ++t)
                for (int64_t i = 0; i < k; ++i) xd[size_t(t) * size_t(k) + size_t(i)] = to_f(in.x_row(t)[i]);
            std::vector<std::vector<QuantGroup>> qx;
            for (int t = 0; t < in.tokens; ++t) qx.push_back(quantise_row(in.x_row(t), nullptr, k));
            for (int64_t r = 0; r < n; ++r) {
                const auto wr = decode_row(WeightFormat::Q4G64Fp16, w.bytes, n, k, r); // exact values
                const Q4Row row = q4_row(w.bytes, n, k, r);
                for (int t = 0; t < in.tokens; ++t) {
                    double y = 0;
                    for (int64_t i = 0; i < k; ++i) y += wr[size_t(i)] * xd[size_t(t) * size_t(k) + size_t(i)];
                    ref[size_t(t) * size_t(n) + size_t(r)] = y;
                    model[size_t(t) * size_t(n) + size_t(r)] = w4a8_dot(row, qx[size_t(t)], k).y;
                }
            }
            for (int path : {kDefaultPath, 3}) {
                if (!ring_runs(path, n, k)) continue;
                set_path(path);
                double worst = 0, worst_model = 0;
                for (int t = 0; t < in.tokens; ++t) {
                    INFO("n=" << n << " k=" << k << " special x " << special << " path " << path << " token " << t);
                    const Output o = run(w.view, in, {.fp32_out = true, .first = t, .count = 1});
                    REQUIRE(o.int8 == int8_expected(n, k, o.split));
                    if (!o.int8) continue;
                    const auto at = ref.begin() + t * n;
                    const double e = rel_l2(o.y, std::vector<double>(at, at + n));
                    CHECK(e <= (special ? 0.05 : 0.02));
                    worst = std::max(worst, e);
                    const auto mt = model.begin() + t * n;
                    worst_model = std::max(worst_model, rel_l2(std::vector<double>(mt, mt + n), std::vector<double>(at, at + n)));
                }
                std::printf("RESULT gemv_q4a8 rel_l2_vs_bf16x %s x=%s path=%s worst_token %.5f (host model %.5f)\n",
                            shape_name(n, k).c_str(), special ? "outliers" : "uniform",
                            path == kDefaultPath ? "default" : "ring3", worst, worst_model);
            }
        }
    }
}

TEST_CASE("gemv_q4a8: batch of 8 equals 8 single-token calls bit for bit, graph replay equals eager", "[gemv_q4a8]") {
    require_gpu();
    HookReset reset;
    uint64_t seed = 2000;
    int int8_batches = 0; // token calls on the int8 route (the case must exercise it)
    for (auto [n, k, path] : std::vector<std::tuple<int64_t, int64_t, int>>{
             {5120, 6144, kDefaultPath}, {5120, 17408, kDefaultPath}, {129, 4112, kDefaultPath}, {2048, 4096, 3},
             {6144, 5120, 4}}) {
        const TiledWeight w(WeightFormat::Q4G64Fp16, n, k, seed++);
        Inputs in(n, k, kernels::kGemvMaxTokens, seed++);
        set_path(path);
        for (bool split : {true, false})
            for (int variant = 0; variant < 3; ++variant) { // bf16 + residual, fp32, bf16 + residual with x_lo
                INFO("n=" << n << " k=" << k << " path " << path << " split " << split << " variant " << variant);
                const Call c{.fp32_out = variant == 1, .residual = variant != 1, .split = split, .lo = variant == 2};
                const Output batch = run(w.view, in, c);
                Call g = c;
                g.graph = true;
                CHECK(run(w.view, in, g).bits == batch.bits);
                for (int t = 0; t < in.tokens; ++t) {
                    Call one = c;
                    one.first = t;
                    one.count = 1;
                    const Output single = run(w.view, in, one);
                    INFO("token " << t << ": the route (int8 or bf16 x) must not depend on n_tokens");
                    REQUIRE(single.int8 == (ring_runs(path, n, k) && int8_expected(n, k, single.split)));
                    CHECK(batch.int8 == single.int8);
                    int8_batches += single.int8;
                    const auto at = batch.bits.begin() + t * n;
                    CHECK(std::equal(at, at + n, single.bits.begin()));
                }
            }
    }
    CHECK(int8_batches > 0);
}

TEST_CASE("gemv_q4a8: every split count meets the model; the same split gives the same bits on every ring", "[gemv_q4a8]") {
    require_gpu();
    HookReset reset;
    uint64_t seed = 3000;
    for (auto [n, k] : std::vector<Shape>{{129, 4112}, {5120, 6144}, {5120, 17408}}) {
        const TiledWeight w(WeightFormat::Q4G64Fp16, n, k, seed++);
        for (int tokens : {1, 5}) {
            Inputs in(n, k, tokens, seed++);
            const bool lo = tokens > 1; // 5 tokens with x_lo
            const Model m = model_of(w, in, seed++, lo);
            std::map<int, std::vector<uint32_t>> by_split;
            for (int target = 0; target <= 8; ++target) { // 0: no scratch, one split
                kernels::gemv_set_tiled_target_blocks_per_sm(std::max(target, 1));
                for (int stages : {2, 3, 4})
                    for (bool stage_x : {true, false}) {
                        set_path(stages, stage_x);
                        const Call c{.fp32_out = true, .split = target > 0, .lo = lo};
                        const Output o = run(w.view, in, c);
                        INFO("n=" << n << " k=" << k << " tokens " << tokens << " target " << target << " stages " << stages
                                  << " stage_x " << stage_x << " split " << o.split);
                        REQUIRE(o.int8 == int8_expected(n, k, o.split));
                        if (o.int8) CHECK(check_model(o, in, c, m) == 0);
                        const auto [it, fresh] = by_split.try_emplace(o.split, o.bits);
                        if (!fresh) CHECK(it->second == o.bits);
                    }
            }
            INFO("n=" << n << " k=" << k << " tokens " << tokens);
            CHECK(by_split.size() >= (n > 1000 ? 3u : 2u)); // the sweep did change the split
        }
    }
}

TEST_CASE("gemv_q4a8: x_int8 is ignored for other formats, the register kernel, the stored layout", "[gemv_q4a8]") {
    require_gpu();
    HookReset reset;
    uint64_t seed = 4000;
    struct Ignored {
        const char* what;
        WeightFormat f;
        int64_t n, k;
        int path;
        bool tiled = true;
    };
    const Ignored cases[] = {
        {"fp8", WeightFormat::Fp8E4m3RowBf16, 1024, 5120, kDefaultPath},
        {"q5", WeightFormat::Q5G64Fp16, 512, 5120, kDefaultPath},
        {"bf16, forced ring", WeightFormat::Bf16, 256, 4160, 3},
        {"q4 register kernel by default", WeightFormat::Q4G64Fp16, 2048, 4096, kDefaultPath},
        {"q4 register kernel forced", WeightFormat::Q4G64Fp16, 5120, 6144, kRegisters},
        {"q4 stored layout", WeightFormat::Q4G64Fp16, 5120, 6144, kDefaultPath, false},
    };
    for (const Ignored& ic : cases) {
        const TiledWeight w(ic.f, ic.n, ic.k, seed++);
        Inputs in(ic.n, ic.k, kernels::kGemvMaxTokens, seed++);
        set_path(ic.path);
        for (int tokens : {1, 3, 8})
            for (int variant = 0; variant < 3; ++variant) { // bf16 + residual, fp32, fp32 with x_lo (tiled only)
                if (variant == 2 && !ic.tiled) continue;
                INFO(ic.what << " n=" << ic.n << " k=" << ic.k << " tokens " << tokens << " variant " << variant);
                Call c{.fp32_out = variant > 0, .residual = variant == 0, .lo = variant == 2, .count = tokens};
                const Output with = run(ic.tiled ? w.view : w.stored, in, c);
                CHECK(!with.int8);
                c.int8 = false;
                CHECK(run(ic.tiled ? w.view : w.stored, in, c).bits == with.bits);
            }
    }
}

TEST_CASE("gemv_q4a8: a matrix of kGemvRingMinRows rows or more takes the ring, so the int8 route, at any k", "[gemv_q4a8]") {
    require_gpu();
    HookReset reset;
    for (const int64_t n : {kernels::kGemvRingMinRows - 64, kernels::kGemvRingMinRows, int64_t(248320)}) {
        DeviceGemvScratch scratch(n);
        kernels::GemvArgs a;
        a.w = {WeightFormat::Q4G64Fp16, nullptr, n, 2048}; // the 35B-A3B's LM head is 248,320 x 2048
        a.w.layout = kernels::WeightLayout::Tiled;
        a.n_tokens = 1;
        a.x_int8 = true;
        a.scratch = scratch.view();
        INFO("n " << n);
        CHECK(kernels::gemv_runs_int8_x(a) == (n >= kernels::kGemvRingMinRows));
    }
}

TEST_CASE("gemv_q4a8: the installed kernel tuning (kernel_tuning_apply) picks the path and the int8 split; the hooks "
          "override it until gemv_restore_tiled_pipeline", "[gemv_q4a8]") {
    require_gpu();
    struct TuningReset {
        ~TuningReset() { kernels::kernel_tuning_apply(kernels::KernelTuning{}); }
    } tuning_reset;
    HookReset reset;
    const auto args = [](int64_t n, int64_t k, const kernels::GemvScratch& scratch) {
        kernels::GemvArgs a;
        a.w = {WeightFormat::Q4G64Fp16, nullptr, n, k};
        a.w.layout = kernels::WeightLayout::Tiled;
        a.n_tokens = 1;
        a.x_int8 = true;
        a.scratch = scratch;
        return a;
    };
    // 2048 x 2048 (k <= kGemvRegisterMaxK): the register kernel per matrix, so the bf16 route.
    DeviceGemvScratch small_scratch(2048);
    const kernels::GemvArgs small = args(2048, 2048, small_scratch.view());
    kernels::kernel_tuning_apply(kernels::KernelTuning{});
    CHECK_FALSE(kernels::gemv_runs_int8_x(small));
    kernels::KernelTuning ring;
    ring.gemv_stages = 2; // NINFER_GEMV_STAGES=2: every launch on the ring, so q4 on the int8 route
    kernels::kernel_tuning_apply(ring);
    CHECK(kernels::gemv_runs_int8_x(small));
    kernels::gemv_set_tiled_pipeline(0, -1, true); // a hook overrides the installed tuning...
    CHECK_FALSE(kernels::gemv_runs_int8_x(small));
    kernels::gemv_restore_tiled_pipeline(); // ...until the restore, which goes back to it
    CHECK(kernels::gemv_runs_int8_x(small));
    kernels::kernel_tuning_apply(kernels::KernelTuning{}); // the defaults: per matrix again
    CHECK_FALSE(kernels::gemv_runs_int8_x(small));

    // The 27B's gate/up (34816 x 5120, on the ring by its k): gemv_int8_target_blocks aims the int8
    // route's split as the bench hook does, and the default aims at 5.
    DeviceGemvScratch big_scratch(34816);
    const kernels::GemvArgs big = args(34816, 5120, big_scratch.view());
    REQUIRE(kernels::gemv_runs_int8_x(big));
    kernels::gemv_set_tiled_target_blocks_per_sm(5);
    const int split_at_5 = kernels::gemv_split_count(big);
    kernels::gemv_set_tiled_target_blocks_per_sm(0);
    CHECK(kernels::gemv_split_count(big) == split_at_5);
    for (int target = 1; target <= 8; ++target) {
        kernels::KernelTuning t;
        t.gemv_int8_target_blocks = target;
        kernels::kernel_tuning_apply(t);
        const int by_tuning = kernels::gemv_split_count(big);
        kernels::kernel_tuning_apply(kernels::KernelTuning{});
        kernels::gemv_set_tiled_target_blocks_per_sm(target);
        INFO("target " << target);
        CHECK(kernels::gemv_split_count(big) == by_tuning);
        kernels::gemv_set_tiled_target_blocks_per_sm(0);
    }
}
