// ninfer tests - Gated DeltaNet decode step (conv + recurrence + gated norm) against fp64, several
// steps in a row so the conv and recurrent states are exercised; the Wide4 recurrence against fp64 and
// against Split2 bit for bit.
#include "gpu_test_util.h"
#include "ninfer/kernels/gdn_decode.h"

#include <cstring>
#include <memory>

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr int D = kernels::kGdnHeadDim;

struct HostGdn {
    int hk, hv, conv_dim, n_slots;
    std::vector<bf16> conv_w, norm_w;
    std::vector<float> a_log, dt_bias;
    std::vector<double> conv_state; // [slot][3][conv_dim]
    std::vector<double> state;      // [slot][hv][D][D]

    // One token on slot s: returns y [hv*D] (bf16-rounded doubles) and the conv output.
    std::vector<double> step(int s, const std::vector<bf16>& qkv, const std::vector<bf16>& z, const std::vector<bf16>& a,
                             const std::vector<bf16>& b, std::vector<double>& conv_out) {
        conv_out.assign(conv_dim, 0);
        double* cs = &conv_state[size_t(s) * 3 * conv_dim];
        for (int ch = 0; ch < conv_dim; ++ch) {
            const double in[4] = {cs[ch], cs[conv_dim + ch], cs[2 * conv_dim + ch], to_f(qkv[ch])};
            double acc = 0;
            for (int j = 0; j < 4; ++j) acc += to_f(conv_w[size_t(ch) * 4 + j]) * in[j];
            const double c = round_bf16(acc);
            conv_out[ch] = round_bf16(c / (1 + std::exp(-c)));
            cs[ch] = in[1];
            cs[conv_dim + ch] = in[2];
            cs[2 * conv_dim + ch] = in[3];
        }
        std::vector<double> y(size_t(hv) * D);
        const int key_dim = hk * D;
        for (int h = 0; h < hv; ++h) {
            const int r = h / (hv / hk);
            double qn = 0, kn = 0;
            for (int i = 0; i < D; ++i) {
                qn += conv_out[r * D + i] * conv_out[r * D + i];
                kn += conv_out[key_dim + r * D + i] * conv_out[key_dim + r * D + i];
            }
            std::vector<double> q(D), k(D), o(D);
            for (int i = 0; i < D; ++i) {
                q[i] = conv_out[r * D + i] / std::sqrt(qn + 1e-6) / std::sqrt(double(D));
                k[i] = conv_out[key_dim + r * D + i] / std::sqrt(kn + 1e-6);
            }
            const double beta = round_bf16(1 / (1 + std::exp(-double(to_f(b[h])))));
            const double x = double(to_f(a[h])) + dt_bias[h];
            const double g = -std::exp(double(a_log[h])) * (x > 20 ? x : std::log1p(std::exp(x)));
            double* S = &state[(size_t(s) * hv + h) * D * D];
            for (int i = 0; i < D * D; ++i) S[i] *= std::exp(g);
            for (int v = 0; v < D; ++v) {
                double sk = 0;
                for (int i = 0; i < D; ++i) sk += S[i * D + v] * k[i];
                const double delta = beta * (conv_out[2 * key_dim + h * D + v] - sk);
                for (int i = 0; i < D; ++i) S[i * D + v] += k[i] * delta;
                double ov = 0;
                for (int i = 0; i < D; ++i) ov += S[i * D + v] * q[i];
                o[v] = round_bf16(ov);
            }
            double var = 0;
            for (int v = 0; v < D; ++v) var += o[v] * o[v];
            var /= D;
            for (int v = 0; v < D; ++v) {
                const double nrm = round_bf16(o[v] / std::sqrt(var + 1e-6));
                const double wn = round_bf16(to_f(norm_w[v]) * nrm);
                const double zz = to_f(z[size_t(h) * D + v]);
                y[size_t(h) * D + v] = round_bf16(wn * zz / (1 + std::exp(-zz)));
            }
        }
        return y;
    }
};

// n_steps decode steps (conv, then the recurrence on `path`, synchronised) against fp64.
void run_gdn(int hk, int hv, int n_tokens, int n_steps, uint64_t seed,
             kernels::GdnDecodePath path = kernels::GdnDecodePath::Split2, bool settled = false) {
    INFO("hk " << hk << " hv " << hv << " tokens " << n_tokens << " path " << int(path) << " settled " << settled);
    Rng rng(seed);
    const int conv_dim = 2 * hk * D + hv * D, n_slots = n_tokens + 1;
    HostGdn host{hk, hv, conv_dim, n_slots, rng.bf16s(size_t(conv_dim) * 4, -0.6f, 0.6f), rng.bf16s(D, 0.5f, 1.5f),
                 {}, {}, std::vector<double>(size_t(n_slots) * 3 * conv_dim, 0.0),
                 std::vector<double>(size_t(n_slots) * hv * D * D, 0.0)};
    for (int h = 0; h < hv; ++h) {
        host.a_log.push_back(std::log(rng.uniform(0.5f, 16.f)));
        host.dt_bias.push_back(rng.uniform(-1.f, 1.f));
    }
    DeviceBuffer<bf16> conv_w(host.conv_w), norm_w(host.norm_w);
    DeviceBuffer<float> a_log(host.a_log), dt_bias(host.dt_bias);
    DeviceBuffer<bf16> conv_state(size_t(n_slots) * 3 * conv_dim, 0);
    DeviceBuffer<float> state(size_t(n_slots) * hv * D * D, 0);
    std::vector<int32_t> slots_h;
    for (int t = 0; t < n_tokens; ++t) slots_h.push_back(n_slots - 1 - t); // reversed: slot != token index
    DeviceBuffer<int32_t> slots(slots_h);
    const int64_t z_ld = int64_t(hv) * D, ab_ld = hv + 8;
    DeviceBuffer<bf16> qkv(size_t(n_tokens) * conv_dim), conv_out(size_t(n_tokens) * conv_dim, 0xff);
    DeviceBuffer<bf16> z(size_t(n_tokens) * z_ld), a(size_t(n_tokens) * ab_ld), b(size_t(n_tokens) * ab_ld);
    DeviceBuffer<bf16> y(size_t(n_tokens) * z_ld, 0xff);
    for (int step = 0; step < n_steps; ++step) {
        const auto qkv_h = rng.bf16s(size_t(n_tokens) * conv_dim, -2.f, 2.f);
        const auto z_h = rng.bf16s(size_t(n_tokens) * z_ld, -3.f, 3.f);
        const auto a_h = rng.bf16s(size_t(n_tokens) * ab_ld, -4.f, 4.f);
        const auto b_h = rng.bf16s(size_t(n_tokens) * ab_ld, -4.f, 4.f);
        qkv.upload(qkv_h);
        z.upload(z_h);
        a.upload(a_h);
        b.upload(b_h);
        kernels::GdnConvArgs ca{qkv.get(), conv_dim, conv_w.get(), conv_state.get(), slots.get(), conv_out.get(),
                                conv_dim, conv_dim, n_tokens};
        ca.state_settled = settled;
        CUDA_OK(kernels::gdn_conv_decode_with(ca, path, nullptr));
        kernels::GdnRecurrentArgs ra;
        ra.conv_out = conv_out.get();
        ra.conv_stride = conv_dim;
        ra.z = z.get();
        ra.z_stride = z_ld;
        ra.a = a.get();
        ra.a_stride = ab_ld;
        ra.b = b.get();
        ra.b_stride = ab_ld;
        ra.a_log = a_log.get();
        ra.dt_bias = dt_bias.get();
        ra.norm_w = norm_w.get();
        ra.state = state.get();
        ra.slots = slots.get();
        ra.y = y.get();
        ra.y_stride = z_ld;
        ra.n_k_heads = hk;
        ra.n_v_heads = hv;
        ra.n_tokens = n_tokens;
        ra.state_settled = settled; // each step is synchronised before the next
        CUDA_OK(kernels::gdn_recurrent_decode_with(ra, path, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        const auto yg = y.download();
        std::vector<double> got, want;
        for (int t = 0; t < n_tokens; ++t) {
            auto sl = [&](const std::vector<bf16>& v, int64_t ld, int64_t n) {
                return std::vector<bf16>(v.begin() + t * ld, v.begin() + t * ld + n);
            };
            std::vector<double> co;
            const auto yr = host.step(slots_h[t], sl(qkv_h, conv_dim, conv_dim), sl(z_h, z_ld, z_ld), sl(a_h, ab_ld, hv),
                                      sl(b_h, ab_ld, hv), co);
            for (int i = 0; i < hv * D; ++i) {
                got.push_back(to_f(yg[size_t(t * z_ld + i)]));
                want.push_back(yr[i]);
            }
        }
        INFO("step " << step);
        CHECK(rel_l2(got, want) < 1e-2);
    }
    // fp32 state after n_steps against the fp64 recurrence.
    const auto sg = state.download();
    std::vector<double> got(sg.begin(), sg.end());
    CHECK(rel_l2(got, host.state) < 1e-3);
    CHECK(state.guards_intact());
    CHECK(y.guards_intact());
    CHECK(conv_state.guards_intact());
}

// Wide4 against Split2 on the same inputs and initial states, n_steps of conv + recurrence in a row:
// conv output, conv state, y and the recurrent state byte for byte after each step. Wide4's steps go
// back to back on one stream (no synchronisation), the runner's one-lane sequence: only step 0 may
// read its states early (settled), later steps read after the wait what the previous step wrote.
void compare_paths(int hk, int hv, int n_tokens, bool exact, bool settled, uint64_t seed) {
    INFO("hk " << hk << " hv " << hv << " tokens " << n_tokens << " exact " << exact << " settled " << settled);
    constexpr int n_steps = 3;
    Rng rng(seed);
    const int conv_dim = 2 * hk * D + hv * D, n_slots = n_tokens + 2;
    const int64_t z_ld = int64_t(hv) * D, ab_ld = hv + 4;
    std::vector<int32_t> slots_h;
    for (int t = 0; t < n_tokens; ++t) slots_h.push_back(n_tokens - t); // distinct (one state each), not the token index
    DeviceBuffer<int32_t> slots(slots_h);
    std::vector<float> a_log_h, dt_h, s0(size_t(n_slots) * hv * D * D);
    for (int h = 0; h < hv; ++h) {
        a_log_h.push_back(std::log(rng.uniform(0.5f, 16.f)));
        dt_h.push_back(rng.uniform(-1.f, 1.f));
    }
    for (float& e : s0) e = rng.uniform(-0.3f, 0.3f);
    const auto c0 = rng.bf16s(size_t(n_slots) * 3 * conv_dim, -2.f, 2.f);
    DeviceBuffer<float> a_log(a_log_h), dt_bias(dt_h), state_split(s0), state_wide(s0);
    DeviceBuffer<bf16> norm_w(rng.bf16s(D, 0.5f, 1.5f)), conv_w(rng.bf16s(size_t(conv_dim) * 4, -0.6f, 0.6f));
    DeviceBuffer<bf16> conv_split(c0), conv_wide(c0);
    struct Step {
        DeviceBuffer<bf16> qkv, z, a, b;
        DeviceBuffer<float> a32, b32;
        DeviceBuffer<bf16> out[2], y[2]; // [0] Split2, [1] Wide4
    };
    std::vector<std::unique_ptr<Step>> in;
    for (int step = 0; step < n_steps; ++step) {
        std::vector<float> a32(size_t(n_tokens) * ab_ld), b32(a32.size());
        for (size_t i = 0; i < a32.size(); ++i) a32[i] = rng.uniform(-4.f, 4.f), b32[i] = rng.uniform(-4.f, 4.f);
        const size_t rows = size_t(n_tokens) * conv_dim, ys = size_t(n_tokens) * z_ld;
        in.push_back(std::unique_ptr<Step>(new Step{ // aggregate of prvalues: DeviceBuffer cannot move
            DeviceBuffer<bf16>(rng.bf16s(rows, -2.f, 2.f)), DeviceBuffer<bf16>(rng.bf16s(ys, -3.f, 3.f)),
            DeviceBuffer<bf16>(rng.bf16s(size_t(n_tokens) * ab_ld, -4.f, 4.f)),
            DeviceBuffer<bf16>(rng.bf16s(size_t(n_tokens) * ab_ld, -4.f, 4.f)), DeviceBuffer<float>(a32),
            DeviceBuffer<float>(b32), {DeviceBuffer<bf16>(rows), DeviceBuffer<bf16>(rows)},
            {DeviceBuffer<bf16>(ys), DeviceBuffer<bf16>(ys)}}));
    }
    auto run = [&](kernels::GdnDecodePath path, float* state, bf16* conv_state) {
        const int p = path == kernels::GdnDecodePath::Wide4;
        for (int step = 0; step < n_steps; ++step) {
            Step& x = *in[size_t(step)];
            kernels::GdnConvArgs ca{x.qkv.get(), conv_dim, conv_w.get(), conv_state, slots.get(), x.out[p].get(),
                                    conv_dim, conv_dim, n_tokens, exact};
            ca.state_settled = settled && step == 0;
            CUDA_OK(kernels::gdn_conv_decode_with(ca, path, nullptr));
            kernels::GdnRecurrentArgs ra;
            ra.conv_out = x.out[p].get(), ra.conv_stride = conv_dim, ra.z = x.z.get(), ra.z_stride = z_ld;
            ra.a = x.a.get(), ra.b = x.b.get(), ra.a_stride = ra.b_stride = ab_ld;
            if (exact) ra.a_f32 = x.a32.get(), ra.b_f32 = x.b32.get(), ra.a = ra.b = nullptr;
            ra.exact = exact, ra.a_log = a_log.get(), ra.dt_bias = dt_bias.get(), ra.norm_w = norm_w.get();
            ra.state = state, ra.slots = slots.get(), ra.y = x.y[p].get(), ra.y_stride = z_ld;
            ra.n_k_heads = hk, ra.n_v_heads = hv, ra.n_tokens = n_tokens;
            ra.state_settled = settled && step == 0;
            CUDA_OK(kernels::gdn_recurrent_decode_with(ra, path, nullptr));
        }
        CUDA_OK(cudaDeviceSynchronize());
    };
    run(kernels::GdnDecodePath::Split2, state_split.get(), conv_split.get());
    run(kernels::GdnDecodePath::Wide4, state_wide.get(), conv_wide.get());
    auto same = [](const auto& x, const auto& y) {
        const auto hx = x.download(), hy = y.download();
        return hx.size() == hy.size() && std::memcmp(hx.data(), hy.data(), hx.size() * sizeof(hx[0])) == 0;
    };
    for (int step = 0; step < n_steps; ++step) {
        INFO("step " << step);
        const Step& x = *in[size_t(step)];
        CHECK(same(x.out[0], x.out[1]));
        CHECK(same(x.y[0], x.y[1]));
        CHECK((x.out[1].guards_intact() && x.y[1].guards_intact()));
    }
    CHECK(same(conv_split, conv_wide));
    CHECK(same(state_split, state_wide));
    CHECK((state_wide.guards_intact() && conv_wide.guards_intact()));
}

} // namespace

TEST_CASE("gdn decode Wide4 (the default path) matches fp64 (27B and 35B-A3B head counts, batches 1..8)",
          "[gdn_decode]") {
    require_gpu();
    for (int n = 1; n <= 8; ++n) {
        run_gdn(16, 48, n, 3, 100 + n, kernels::GdnDecodePath::Wide4, n % 2 == 1); // 27B
        run_gdn(16, 32, n, 3, 200 + n, kernels::GdnDecodePath::Wide4, n % 2 == 0); // 35B-A3B
    }
    run_gdn(2, 8, 2, 3, 15, kernels::GdnDecodePath::Wide4, true); // 4 V heads per QK head
    run_gdn(1, 1, 2, 3, 14, kernels::GdnDecodePath::Wide4, false); // one head
}

TEST_CASE("gdn decode Wide4 equals Split2 bit for bit (conv output and state, y, recurrent state; bf16 / f32 a, b)",
          "[gdn_decode]") {
    require_gpu();
    for (int n = 1; n <= 8; ++n)
        for (bool exact : {false, true}) {
            compare_paths(16, 48, n, exact, true, 300 + n); // 27B
            compare_paths(16, 32, n, exact, n % 2 == 0, 400 + n); // 35B-A3B
        }
    compare_paths(16, 48, 1, true, false, 501);
    compare_paths(2, 8, 3, true, true, 502);
    compare_paths(1, 1, 2, false, false, 503);
}

TEST_CASE("gdn decode step matches fp64 (27B and 35B-A3B head counts, batches)", "[gdn_decode]") {
    require_gpu();
    run_gdn(16, 48, 1, 5, 11); // 27B
    run_gdn(16, 32, 3, 4, 12); // 35B-A3B
    run_gdn(2, 4, 8, 6, 13);   // small, full batch
    run_gdn(1, 1, 2, 3, 14);   // one head
    run_gdn(2, 8, 2, 3, 15);   // 4 V heads per QK head
}

TEST_CASE("gdn decode step refuses what it cannot run", "[gdn_decode]") {
    require_gpu();
    kernels::GdnConvArgs c;
    kernels::GdnRecurrentArgs r;
    DeviceBuffer<bf16> dummy(4096);
    DeviceBuffer<float> f(4096);
    DeviceBuffer<int32_t> slots(std::vector<int32_t>{0});
    c.qkv = c.conv_w = dummy.get(), c.conv_state = dummy.get(), c.slots = slots.get(), c.n_tokens = 1;
    c.conv_dim = (2 + 4) * D;
    r.z = r.a = r.b = r.norm_w = dummy.get(), r.a_log = r.dt_bias = r.state = f.get(), r.slots = slots.get();
    r.y = dummy.get(), r.n_k_heads = 2, r.n_v_heads = 5, r.n_tokens = 1;
    CHECK(kernels::gdn_conv_decode(c, nullptr) == cudaErrorInvalidValue); // no conv output buffer
    r.conv_out = dummy.get();
    CHECK(kernels::gdn_recurrent_decode(r, nullptr) == cudaErrorInvalidValue); // 5 V heads over 2 QK heads
    CHECK(kernels::gdn_recurrent_decode_with(r, kernels::GdnDecodePath::Wide4, nullptr) == cudaErrorInvalidValue);
    r.n_v_heads = 4, r.n_tokens = 0;
    CHECK(kernels::gdn_recurrent_decode(r, nullptr) == cudaErrorInvalidValue); // no tokens
    r.n_tokens = 1, r.conv_out = nullptr;
    CHECK(kernels::gdn_recurrent_decode(r, nullptr) == cudaErrorInvalidValue); // no conv output to read
    CHECK(cudaGetLastError() == cudaSuccess);
}
