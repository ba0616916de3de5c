// ninfer GPU tests - the attention prep's RoPE positions (attention_decode.h, kernels/src/mrope.cuh):
// per-token M-RoPE positions (rope_thw) and per-lane text offsets (rope_offset) against the CPU
// reference's norm and tables (core/cpu/ops.h rms_norm_offset, mrope_tables, rope_neox), interleaved
// and contiguous sections; text positions through either route give the same bits; the KV rows
// land at the KV positions whatever the RoPE positions.
#include "core/cpu/ops.h"
#include "gpu_test_util.h"
#include "ninfer/kernels/attention_decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr int HD = 256, NH = 4, NKV = 2, ROT = 64, T = 6, LANES = 3, LANE = 1;

struct PrepRun {
    std::vector<bf16> q;  // [T][NH][HD]
    std::vector<bf16> kp; // the K pool
};

// One attn_decode_prep over T tokens of lane LANE at KV positions 3.. with the given RoPE inputs.
PrepRun run_prep(const kernels::AttnGeometry& geo, const std::vector<bf16>& qg, const std::vector<bf16>& k,
                 const std::vector<bf16>& v, const std::vector<bf16>& qw, const std::vector<bf16>& kw,
                 const int32_t* thw_host, const std::vector<int32_t>* offsets) {
    const int max_pages = 2;
    std::vector<int32_t> table(LANES * max_pages);
    std::iota(table.begin(), table.end(), 0);
    DeviceBuffer<int32_t> table_d(table);
    DeviceBuffer<bf16> kpool(size_t(LANES * max_pages) * NKV * 64 * HD, 0), vpool(size_t(LANES * max_pages) * NKV * 64 * HD, 0);
    DeviceBuffer<bf16> qg_d(qg), k_d(k), v_d(v), qw_d(qw), kw_d(kw), q_out(size_t(T) * NH * HD, 0xff);
    std::vector<int32_t> lanes(T, LANE), positions(T);
    std::iota(positions.begin(), positions.end(), 3);
    DeviceBuffer<int32_t> lanes_d(lanes), pos_d(positions);
    DeviceBuffer<int32_t> thw_d(size_t(T) * 3), off_d(LANES);
    if (thw_host) thw_d.upload(std::vector<int32_t>(thw_host, thw_host + 3 * T));
    if (offsets) off_d.upload(*offsets);
    kernels::AttnPrepArgs p;
    p.geo = geo;
    p.qg = qg_d.get(), p.qg_stride = NH * 2 * HD, p.k = k_d.get(), p.k_stride = NKV * HD, p.v = v_d.get();
    p.v_stride = NKV * HD, p.q_norm = qw_d.get(), p.k_norm = kw_d.get(), p.lanes = lanes_d.get();
    p.positions = pos_d.get();
    p.kv.k = kpool.get(), p.kv.v = vpool.get(), p.kv.page_table = table_d.get(), p.kv.max_pages = max_pages;
    p.q_out = q_out.get(), p.q_out_stride = NH * HD, p.n_tokens = T;
    p.rope_thw = thw_host ? thw_d.get() : nullptr;
    p.rope_offset = offsets ? off_d.get() : nullptr;
    CUDA_OK(kernels::attn_decode_prep(p, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(q_out.guards_intact());
    return {q_out.download(), kpool.download()};
}

// The CPU reference of one head row: offset RMSNorm, then M-RoPE at p (f32 throughout).
std::vector<float> cpu_row(const bf16* x, const std::vector<bf16>& w, const core::MropePosition& p,
                           const kernels::AttnGeometry& geo) {
    std::vector<float> xf(HD), wf(HD), out(HD), cs(ROT / 2), sn(ROT / 2);
    for (int i = 0; i < HD; ++i) xf[i] = to_f(x[i]), wf[i] = to_f(w[i]);
    core::cpu::rms_norm_offset(xf.data(), wf.data(), HD, geo.eps, out.data());
    const std::vector<uint32_t> sections(geo.mrope_section, geo.mrope_section + 3);
    core::cpu::mrope_tables(p, ROT, geo.rope_theta, sections, geo.mrope_interleaved, cs.data(), sn.data());
    core::cpu::rope_neox(out.data(), ROT, cs.data(), sn.data());
    return out;
}

// Worst |gpu - cpu| over q rows and the K rows in the pool, relative to the row's largest value.
double worst_rel(const PrepRun& r, const std::vector<bf16>& qg, const std::vector<bf16>& k,
                 const std::vector<bf16>& qw, const std::vector<bf16>& kw, const std::vector<core::MropePosition>& pos,
                 const kernels::AttnGeometry& geo) {
    double worst = 0;
    auto compare = [&](const std::vector<float>& ref, const bf16* got) {
        double m = 0, d = 0;
        for (int i = 0; i < HD; ++i) m = std::max(m, double(std::fabs(ref[i])));
        for (int i = 0; i < HD; ++i) d = std::max(d, double(std::fabs(ref[i] - to_f(got[i]))));
        worst = std::max(worst, d / m);
    };
    for (int t = 0; t < T; ++t) {
        for (int h = 0; h < NH; ++h)
            compare(cpu_row(&qg[(size_t(t) * NH + h) * 2 * HD], qw, pos[t], geo), &r.q[(size_t(t) * NH + h) * HD]);
        const int kv_pos = 3 + t, page = LANE * 2 + kv_pos / 64; // the identity page table
        for (int h = 0; h < NKV; ++h)
            compare(cpu_row(&k[(size_t(t) * NKV + h) * HD], kw, pos[t], geo),
                    &r.kp[((size_t(page) * NKV + h) * 64 + kv_pos % 64) * HD]);
    }
    return worst;
}

} // namespace

TEST_CASE("attention prep: M-RoPE positions and lane offsets match the CPU reference", "[mrope_prep]") {
    require_gpu();
    Rng rng(77);
    const auto qg = rng.bf16s(size_t(T) * NH * 2 * HD, -3.f, 3.f), k = rng.bf16s(size_t(T) * NKV * HD, -3.f, 3.f);
    const auto v = rng.bf16s(size_t(T) * NKV * HD, -2.f, 2.f);
    const auto qw = rng.bf16s(HD, -0.3f, 0.3f), kw = rng.bf16s(HD, -0.3f, 0.3f);
    for (bool interleaved : {true, false}) {
        INFO("interleaved " << interleaved);
        kernels::AttnGeometry geo{NH, NKV, HD, ROT, 1e7f, 1e-6f, true};
        geo.mrope_section[0] = 11, geo.mrope_section[1] = 11, geo.mrope_section[2] = 10;
        geo.mrope_interleaved = interleaved;
        // Image-like positions: t, h, w apart (and far from the KV positions 3..8).
        std::vector<core::MropePosition> pos;
        std::vector<int32_t> thw;
        for (int t = 0; t < T; ++t) {
            pos.push_back({uint32_t(40 + t / 3), uint32_t(40 + t % 3), uint32_t(900 + 7 * t)});
            thw.insert(thw.end(), {int32_t(pos.back().t), int32_t(pos.back().h), int32_t(pos.back().w)});
        }
        const PrepRun mm = run_prep(geo, qg, k, v, qw, kw, thw.data(), nullptr);
        // bf16 storage: half an ulp of the row's largest value, and powf/cosf against std::.
        CHECK(worst_rel(mm, qg, k, qw, kw, pos, geo) < 8e-3);
        // Text after a span: KV position + the lane's offset on all three axes, and the same bits as
        // rope_thw holding those text positions.
        const std::vector<int32_t> offsets = {0, 1234, -1};
        std::vector<core::MropePosition> text;
        std::vector<int32_t> text_thw;
        for (int t = 0; t < T; ++t) {
            text.push_back(core::MropePosition::text(uint32_t(3 + t + 1234)));
            text_thw.insert(text_thw.end(), 3, int32_t(3 + t + 1234));
        }
        const PrepRun off = run_prep(geo, qg, k, v, qw, kw, nullptr, &offsets);
        CHECK(worst_rel(off, qg, k, qw, kw, text, geo) < 8e-3);
        const PrepRun same = run_prep(geo, qg, k, v, qw, kw, text_thw.data(), nullptr);
        CHECK(std::memcmp(off.q.data(), same.q.data(), off.q.size() * sizeof(bf16)) == 0);
        CHECK(std::memcmp(off.kp.data(), same.kp.data(), off.kp.size() * sizeof(bf16)) == 0);
        // And the image positions really moved the rows (the test can fail).
        CHECK(std::memcmp(mm.q.data(), off.q.data(), mm.q.size() * sizeof(bf16)) != 0);
    }
}
