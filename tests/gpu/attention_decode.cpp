// ninfer tests - decode attention over the paged KV pool (q/k norm, RoPE, GQA, output gate) for
// lanes of different lengths, against fp64.
#include "gpu_test_util.h"
#include "ninfer/kernels/attention_decode.h"

#include <algorithm>
#include <numeric>

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr int HD = 256;

// offset RMSNorm then RoPE, with the kernel's rounding points.
std::vector<double> norm_rope(const bf16* x, const std::vector<bf16>& w, int pos, int rot, float theta) {
    double ss = 0;
    for (int i = 0; i < HD; ++i) ss += double(to_f(x[i])) * to_f(x[i]);
    const double inv = 1 / std::sqrt(ss / HD + 1e-6);
    std::vector<double> n(HD), out(HD);
    for (int i = 0; i < HD; ++i) n[i] = round_bf16(to_f(x[i]) * inv * (1 + to_f(w[i])));
    for (int d = 0; d < HD; ++d) {
        out[d] = n[d];
        if (d < rot) {
            const int half = rot / 2, i = d % half;
            const float inv_freq = 1.f / std::pow(theta, float(2 * i) / float(rot));
            const float freq = float(pos) * inv_freq;
            const double c = round_bf16(std::cos(double(freq))), s = round_bf16(std::sin(double(freq)));
            const double r = d < half ? -n[d + half] : n[d - half];
            out[d] = round_bf16(double(round_bf16(n[d] * c)) + round_bf16(r * s));
        }
    }
    return out;
}

void run_attention(int nh, int nkv, std::vector<int> positions, uint64_t seed) {
    INFO("heads " << nh << "/" << nkv << " tokens " << positions.size());
    Rng rng(seed);
    const int T = int(positions.size()), n_lanes = T + 2;
    const int max_context = *std::max_element(positions.begin(), positions.end()) + 1 + rng.integer(0, 300);
    const int max_pages = (max_context + 63) / 64, n_pages = n_lanes * max_pages;
    std::vector<int32_t> table(size_t(n_lanes) * max_pages);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng.gen);
    std::vector<int32_t> lanes(n_lanes); // distinct lanes, not in token order
    std::iota(lanes.begin(), lanes.end(), 0);
    std::shuffle(lanes.begin(), lanes.end(), rng.gen);
    lanes.resize(T);
    const size_t pool_elems = size_t(n_pages) * nkv * 64 * HD;
    auto k_pool = rng.bf16s(pool_elems, -1.5f, 1.5f), v_pool = rng.bf16s(pool_elems, -2.f, 2.f);
    DeviceBuffer<bf16> kd(k_pool), vd(v_pool);
    DeviceBuffer<int32_t> table_d(table), lanes_d(lanes), pos_d(std::vector<int32_t>(positions.begin(), positions.end()));
    const auto qg = rng.bf16s(size_t(T) * nh * 2 * HD, -3.f, 3.f);
    const auto kn = rng.bf16s(size_t(T) * nkv * HD, -3.f, 3.f), vn = rng.bf16s(size_t(T) * nkv * HD, -2.f, 2.f);
    const auto qw = rng.bf16s(HD, -0.3f, 0.3f), kw = rng.bf16s(HD, -0.3f, 0.3f);
    DeviceBuffer<bf16> qg_d(qg), k_d(kn), v_d(vn), qw_d(qw), kw_d(kw);
    DeviceBuffer<bf16> q_out(size_t(T) * nh * HD, 0xff), out(size_t(T) * nh * HD, 0xff);
    DeviceBuffer<float> scratch(kernels::attn_decode_scratch_floats(T, nh, max_context));

    kernels::AttnGeometry geo{nh, nkv, HD, 64, 1e7f, 1e-6f};
    kernels::KvPages kv{kd.get(), vd.get(), table_d.get(), max_pages};
    kernels::AttnPrepArgs pa{geo, qg_d.get(), nh * 2 * HD, k_d.get(), nkv * HD, v_d.get(), nkv * HD, qw_d.get(),
                             kw_d.get(), lanes_d.get(), pos_d.get(), kv, q_out.get(), nh * HD, T};
    CUDA_OK(kernels::attn_decode_prep(pa, nullptr));
    kernels::AttnDecodeArgs da{geo, q_out.get(), nh * HD, qg_d.get(), nh * 2 * HD, lanes_d.get(), pos_d.get(), kv,
                               out.get(), nh * HD, T, max_context, scratch.get(), scratch.size()};
    CUDA_OK(kernels::attn_decode(da, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(out.guards_intact());
    CHECK(kd.guards_intact());
    CHECK(vd.guards_intact());
    const auto og = out.download();
    const auto kg = kd.download();

    auto row = [&](int lane, int kvh, int pos) {
        const int page = table[size_t(lane) * max_pages + pos / 64];
        return ((size_t(page) * nkv + kvh) * 64 + pos % 64) * HD;
    };
    std::vector<double> got, want;
    int k_bad = 0;
    for (int t = 0; t < T; ++t) {
        const int lane = lanes[t], pos = positions[t], group = nh / nkv;
        for (int kvh = 0; kvh < nkv; ++kvh) {
            const auto knew = norm_rope(&kn[size_t(t) * nkv * HD + kvh * HD], kw, pos, 64, 1e7f);
            for (int d = 0; d < HD; ++d) {
                k_pool[row(lane, kvh, pos) + d] = to_bf16(float(knew[d]));
                v_pool[row(lane, kvh, pos) + d] = vn[size_t(t) * nkv * HD + kvh * HD + d];
                if (std::fabs(to_f(kg[row(lane, kvh, pos) + d]) - knew[d]) > std::ldexp(std::fabs(knew[d]), -7) + 1e-6)
                    ++k_bad;
            }
        }
        for (int h = 0; h < nh; ++h) {
            const int kvh = h / group;
            const auto q = norm_rope(&qg[size_t(t) * nh * 2 * HD + h * 2 * HD], qw, pos, 64, 1e7f);
            std::vector<double> s(pos + 1);
            double m = -1e300;
            for (int j = 0; j <= pos; ++j) {
                double dot = 0;
                for (int d = 0; d < HD; ++d) dot += q[d] * to_f(k_pool[row(lane, kvh, j) + d]);
                s[j] = dot / 16.0;
                m = std::max(m, s[j]);
            }
            double l = 0;
            for (auto& e : s) l += (e = std::exp(e - m));
            for (int d = 0; d < HD; ++d) {
                double o = 0;
                for (int j = 0; j <= pos; ++j) o += s[j] * to_f(v_pool[row(lane, kvh, j) + d]);
                const double gate = to_f(qg[size_t(t) * nh * 2 * HD + h * 2 * HD + HD + d]);
                want.push_back(round_bf16(double(round_bf16(o / l)) * round_bf16(1 / (1 + std::exp(-gate)))));
                got.push_back(to_f(og[size_t(t) * nh * HD + h * HD + d]));
            }
        }
    }
    CHECK(k_bad == 0);
    CHECK(rel_l2(got, want) < 5e-3);
    CHECK(std::none_of(got.begin(), got.end(), [](double v) { return std::isnan(v); }));
}

} // namespace

TEST_CASE("attention decode matches fp64 for lanes of different lengths", "[attention_decode]") {
    require_gpu();
    run_attention(24, 4, {0}, 21);                          // 27B geometry, first token
    run_attention(24, 4, {63, 64, 65, 300, 1000}, 22);      // page and chunk boundaries
    run_attention(16, 2, {8191, 255, 256, 1, 4000}, 23);    // 35B-A3B geometry, 8K context
    run_attention(2, 2, {5, 17, 129, 511, 512, 513, 2, 70}, 24); // group 1, batch of 8
    run_attention(2, 1, {40000, 33000, 64}, 25); // past 32K: chunks of several pages
}
