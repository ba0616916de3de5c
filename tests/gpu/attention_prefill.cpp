// ninfer tests - prefill attention over the paged pool (prep + causal flash attention) for chunks of
// one lane, against the decode kernels over the same tokens and against the CPU ops in fp64.
#include "core/cpu/ops.h"
#include "gpu_test_util.h"
#include "ninfer/kernels/attention_prefill.h"

#include <algorithm>
#include <numeric>

using namespace ninfer;
using namespace ninfer::test;
namespace cpu = ninfer::core::cpu;

namespace {

constexpr int HD = 256, kLanes = 3, kLane = 2;

struct Pool { // one layer's pool for kLanes lanes, pages shuffled
    int nkv, max_pages;
    std::vector<int32_t> table;
    size_t row(int kvh, int pos) const {
        const int page = table[size_t(kLane) * max_pages + pos / 64];
        return ((size_t(page) * nkv + kvh) * 64 + pos % 64) * HD;
    }
};

// The exact-mode CPU reference for one chunk: offset RMSNorm + RoPE in f32 (cpu ops), K/V into the
// host pool as bf16, attention in fp64 over the pool, gate in fp64 -> rounded bf16.
std::vector<double> cpu_chunk(const kernels::AttnGeometry& geo, const Pool& pool, std::vector<bf16>& kp,
                              std::vector<bf16>& vp, const std::vector<bf16>& qg, int64_t qg_ld,
                              const std::vector<bf16>& k, const std::vector<bf16>& v, int64_t kv_ld,
                              const std::vector<float>& qw, const std::vector<float>& kw, int start, int T) {
    const int nh = geo.n_heads, nkv = geo.n_kv_heads, group = nh / nkv, rot = geo.rotary_dim;
    auto norm_rope = [&](const bf16* x, const std::vector<float>& w, int pos) {
        std::vector<float> xf(HD), out(HD), c(rot / 2), s(rot / 2);
        for (int i = 0; i < HD; ++i) xf[i] = to_f(x[i]);
        cpu::rms_norm_offset(xf.data(), w.data(), HD, geo.eps, out.data());
        cpu::rope_tables(uint32_t(pos), uint32_t(rot), geo.rope_theta, c.data(), s.data());
        cpu::rope_neox(out.data(), uint32_t(rot), c.data(), s.data());
        std::vector<double> r(HD);
        for (int i = 0; i < HD; ++i) r[i] = round_bf16(out[i]);
        return r;
    };
    for (int t = 0; t < T; ++t)
        for (int kvh = 0; kvh < nkv; ++kvh) {
            const auto kn = norm_rope(&k[size_t(t) * kv_ld + kvh * HD], kw, start + t);
            for (int d = 0; d < HD; ++d) {
                kp[pool.row(kvh, start + t) + d] = to_bf16(float(kn[d]));
                vp[pool.row(kvh, start + t) + d] = v[size_t(t) * kv_ld + kvh * HD + d];
            }
        }
    std::vector<double> out(size_t(T) * nh * HD);
    for (int t = 0; t < T; ++t)
        for (int h = 0; h < nh; ++h) {
            const int pos = start + t, kvh = h / group;
            const auto q = norm_rope(&qg[size_t(t) * qg_ld + h * 2 * HD], qw, pos);
            std::vector<double> s(pos + 1);
            double m = -1e300, l = 0;
            for (int j = 0; j <= pos; ++j) {
                double dot = 0;
                for (int d = 0; d < HD; ++d) dot += q[d] * to_f(kp[pool.row(kvh, j) + d]);
                m = std::max(m, s[j] = dot / 16.0);
            }
            for (auto& e : s) l += (e = std::exp(e - m));
            for (int d = 0; d < HD; ++d) {
                double o = 0;
                for (int j = 0; j <= pos; ++j) o += s[j] * to_f(vp[pool.row(kvh, j) + d]);
                const double gate = to_f(qg[size_t(t) * qg_ld + h * 2 * HD + HD + d]);
                out[(size_t(t) * nh + h) * HD + d] = round_bf16(o / l / (1 + std::exp(-gate)));
            }
        }
    return out;
}

std::vector<double> rows(const std::vector<bf16>& v, int T, int64_t ld, int n) {
    std::vector<double> out;
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < n; ++i) out.push_back(to_f(v[size_t(t) * ld + i]));
    return out;
}

void run_prefill(int nh, int nkv, int start0, const std::vector<int>& chunks, bool exact, bool with_cpu, int variant,
                 uint64_t seed) {
    INFO("heads " << nh << "/" << nkv << " start " << start0 << " exact " << exact << " variant " << variant);
    Rng rng(seed);
    const int total = start0 + std::accumulate(chunks.begin(), chunks.end(), 0);
    Pool pool{nkv, (total + 63) / 64 + 1, {}}; // one page past the end, never read
    pool.table.resize(size_t(kLanes) * pool.max_pages);
    std::iota(pool.table.begin(), pool.table.end(), 0);
    std::shuffle(pool.table.begin(), pool.table.end(), rng.gen);
    const size_t pool_elems = pool.table.size() * nkv * 64 * HD;
    // Earlier chunks' KV: random; everything from start0 on: NaN (0xffff), which must never leak.
    auto kp = rng.bf16s(pool_elems, -1.5f, 1.5f), vp = rng.bf16s(pool_elems, -2.f, 2.f);
    __nv_bfloat16_raw nan_raw;
    nan_raw.x = 0xffff;
    const bf16 nan_bf16(nan_raw);
    for (int kvh = 0; kvh < nkv; ++kvh)
        for (int pos = start0; pos < pool.max_pages * 64; ++pos)
            for (int d = 0; d < HD; ++d) kp[pool.row(kvh, pos) + d] = vp[pool.row(kvh, pos) + d] = nan_bf16;
    const auto kp0 = kp, vp0 = vp;
    DeviceBuffer<bf16> kd(kp), vd(vp), kd_dec(kp), vd_dec(vp);
    DeviceBuffer<int32_t> table_d(pool.table);
    const auto qw = rng.bf16s(HD, -0.3f, 0.3f), kw = rng.bf16s(HD, -0.3f, 0.3f);
    std::vector<float> qwf, kwf;
    for (int i = 0; i < HD; ++i) qwf.push_back(to_f(qw[i])), kwf.push_back(to_f(kw[i]));
    DeviceBuffer<bf16> qw_d(qw), kw_d(kw);
    kernels::AttnGeometry geo{nh, nkv, HD, 64, 1e7f, 1e-6f, exact};

    int start = start0;
    for (const int T : chunks) {
        INFO("chunk of " << T << " tokens at " << start);
        const int64_t qg_ld = int64_t(nh) * 2 * HD + 8, kv_ld = int64_t(nkv) * HD + 16, out_ld = int64_t(nh) * HD + 8;
        const auto qg = rng.bf16s(size_t(T) * qg_ld, -3.f, 3.f);
        const auto kn = rng.bf16s(size_t(T) * kv_ld, -3.f, 3.f), vn = rng.bf16s(size_t(T) * kv_ld, -2.f, 2.f);
        DeviceBuffer<bf16> qg_d(qg), k_d(kn), v_d(vn), out(size_t(T) * out_ld, 0xff), out_dec(size_t(T) * out_ld, 0xff);
        const size_t scratch_bytes = kernels::attn_prefill_scratch_bytes(T, nh);
        DeviceBuffer<uint8_t> scratch(scratch_bytes, 0xff);

        kernels::AttnPrefillArgs a;
        a.geo = geo;
        a.qg = qg_d.get(), a.qg_stride = qg_ld, a.k = k_d.get(), a.k_stride = kv_ld, a.v = v_d.get(), a.v_stride = kv_ld;
        a.q_norm = qw_d.get(), a.k_norm = kw_d.get();
        a.kv = kernels::KvPages{kd.get(), vd.get(), table_d.get(), pool.max_pages};
        a.lane = kLane, a.start_pos = start, a.n_tokens = T;
        a.scratch = scratch.get(), a.scratch_bytes = scratch_bytes;
        a.out = out.get(), a.out_stride = out_ld, a.kernel_variant = variant;
        CUDA_OK(kernels::attn_prefill_prep(a, nullptr));
        CUDA_OK(kernels::attn_prefill(a, nullptr));

        // The decode kernels over the same T tokens of the lane: causal by position.
        std::vector<int32_t> lanes(T, kLane), positions(T);
        std::iota(positions.begin(), positions.end(), start);
        DeviceBuffer<int32_t> lanes_d(lanes), pos_d(positions);
        DeviceBuffer<bf16> q_dec(size_t(T) * nh * HD, 0xff);
        const kernels::KvPages kv_dec{kd_dec.get(), vd_dec.get(), table_d.get(), pool.max_pages};
        kernels::AttnPrepArgs pa{geo, qg_d.get(), qg_ld, k_d.get(), kv_ld, v_d.get(), kv_ld, qw_d.get(), kw_d.get(),
                                 lanes_d.get(), pos_d.get(), kv_dec, q_dec.get(), int64_t(nh) * HD, T};
        CUDA_OK(kernels::attn_decode_prep(pa, nullptr));
        const int max_context = start + T;
        DeviceBuffer<float> dscratch(kernels::attn_decode_scratch_floats(T, nh, max_context));
        kernels::AttnDecodeArgs da{geo, q_dec.get(), int64_t(nh) * HD, qg_d.get(), qg_ld, lanes_d.get(), pos_d.get(),
                                   kv_dec, out_dec.get(), out_ld, T, max_context, dscratch.get(), dscratch.size()};
        CUDA_OK(kernels::attn_decode(da, nullptr));
        CUDA_OK(cudaDeviceSynchronize());

        const auto got = rows(out.download(), T, out_ld, nh * HD);
        const auto dec = rows(out_dec.download(), T, out_ld, nh * HD);
        CHECK(std::all_of(got.begin(), got.end(), [](double v) { return std::isfinite(v); }));
        CHECK(rel_l2(got, dec) < 4e-3); // P is bf16 in P V here, fp32 in the decode kernel
        CHECK(out.guards_intact());
        CHECK(scratch.guards_intact());
        CHECK(kd.guards_intact());
        CHECK(vd.guards_intact());
        const auto kg = kd.download(), vg = vd.download();
        CHECK(std::equal(kg.begin(), kg.end(), kd_dec.download().begin(),
                         [](bf16 x, bf16 y) { return std::memcmp(&x, &y, sizeof x) == 0; }));
        if (with_cpu) {
            const auto want = cpu_chunk(geo, pool, kp, vp, qg, qg_ld, kn, vn, kv_ld, qwf, kwf, start, T);
            CHECK(rel_l2(got, want) < 5e-3);
            int k_bad = 0;
            for (int kvh = 0; kvh < nkv; ++kvh)
                for (int t = 0; t < T; ++t)
                    for (int d = 0; d < HD; ++d) {
                        const size_t i = pool.row(kvh, start + t) + d;
                        const float want_k = to_f(kp[i]);
                        if (std::fabs(to_f(kg[i]) - want_k) > std::ldexp(std::fabs(want_k), -7) + 1e-6f) ++k_bad;
                        if (std::memcmp(&vg[i], &vp[i], sizeof(bf16)) != 0) ++k_bad;
                    }
            CHECK(k_bad == 0);
            for (size_t i = 0; i < kg.size(); ++i) kp[i] = kg[i]; // continue from the GPU's K
        }
        start += T;
    }
    // Other lanes' pages are untouched.
    const auto kg = kd.download();
    size_t other_changed = 0;
    for (int lane = 0; lane < kLanes; ++lane) {
        if (lane == kLane) continue;
        for (int p = 0; p < pool.max_pages; ++p) {
            const size_t base = size_t(pool.table[size_t(lane) * pool.max_pages + p]) * nkv * 64 * HD;
            other_changed += std::memcmp(&kg[base], &kp0[base], size_t(nkv) * 64 * HD * sizeof(bf16)) != 0;
        }
    }
    CHECK(other_changed == 0);
}

} // namespace

TEST_CASE("attention prefill matches the decode kernels and fp64 CPU ops", "[attention_prefill]") {
    require_gpu();
    run_prefill(24, 4, 0, {1, 63, 64, 65, 200}, true, true, 0, 41); // 27B, chunks crossing pages
    run_prefill(24, 4, 1000, {200, 129}, false, false, 2, 42);      // mid-page start, earlier KV in the pool
    run_prefill(16, 2, 300, {257}, true, true, 3, 43);              // 35B-A3B geometry
    run_prefill(8, 1, 5, {70, 130}, true, true, 1, 44);             // group 8
    run_prefill(2, 2, 63, {33, 1}, false, false, 2, 45);            // group 1, start on a page's last row
    run_prefill(4, 2, 10, {150}, true, true, 3, 46);
}

TEST_CASE("attention prefill refuses bad arguments without launching", "[attention_prefill]") {
    require_gpu();
    kernels::AttnPrefillArgs a; // all null
    CHECK(kernels::attn_prefill_prep(a, nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::attn_prefill(a, nullptr) == cudaErrorInvalidValue);
    a.kernel_variant = 4; // unknown block shapes are refused too
    CHECK(kernels::attn_prefill(a, nullptr) == cudaErrorInvalidValue);
}
