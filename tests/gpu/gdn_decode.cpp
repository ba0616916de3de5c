// ninfer tests - Gated DeltaNet decode step (conv + recurrence + gated norm) against fp64, several
// steps in a row so the conv and recurrent states are exercised.
#include "gpu_test_util.h"
#include "ninfer/kernels/gdn_decode.h"

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

void run_gdn(int hk, int hv, int n_tokens, int n_steps, uint64_t seed) {
    INFO("hk " << hk << " hv " << hv << " tokens " << n_tokens);
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
        CUDA_OK(kernels::gdn_conv_decode(ca, nullptr));
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
        CUDA_OK(kernels::gdn_recurrent_decode(ra, nullptr));
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

} // namespace

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
    r.n_v_heads = 4, r.n_tokens = 0;
    CHECK(kernels::gdn_recurrent_decode(r, nullptr) == cudaErrorInvalidValue); // no tokens
    r.n_tokens = 1, r.conv_out = nullptr;
    CHECK(kernels::gdn_recurrent_decode(r, nullptr) == cudaErrorInvalidValue); // no conv output to read
    CHECK(cudaGetLastError() == cudaSuccess);
}
