// ninfer tests - the f32 check-mode mixers (kernels/mixers_f32.h) against the CPU backend's own ops
// (core/cpu/ops.h, gdn.h, core/model/kv_codec.h) on random data: decode attention over a paged pool
// of every KV dtype (one lane's consecutive tokens and another lane in one call, pages crossed), and
// Gated DeltaNet steps carrying f32 conv history and recurrent state.
#include "core/cpu/gdn.h"
#include "core/cpu/ops.h"
#include "core/model/kv_codec.h"
#include "gpu_test_util.h"
#include "ninfer/kernels/mixers_f32.h"

#include <cstring>

using namespace ninfer;
using namespace ninfer::test;
namespace cpu = ninfer::core::cpu;

namespace {

constexpr int HD = 256, PAGE = 64;

std::vector<float> floats(Rng& rng, size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& e : v) e = rng.uniform(lo, hi);
    return v;
}
double rel(const std::vector<float>& got, const std::vector<float>& ref) {
    return rel_l2(std::vector<double>(got.begin(), got.end()), std::vector<double>(ref.begin(), ref.end()));
}

// The device pool of one layer's K or V in attention_decode.h's page layout, written from and read
// back into kv_codec rows (codes then scales) per (page slot, KV head).
struct HostPool {
    core::KvDtype dtype;
    int n_kv, n_pages;
    uint64_t row_bytes, code_bytes;
    std::vector<uint8_t> rows; // [page][kvh][64] rows of row_bytes
    uint8_t* row(int page, int kvh, int r) { return &rows[((size_t(page) * n_kv + kvh) * PAGE + r) * row_bytes]; }
    // Device page bytes.
    std::vector<uint8_t> pages() {
        const uint64_t page_bytes = uint64_t(n_kv) * PAGE * row_bytes;
        std::vector<uint8_t> out(size_t(n_pages) * page_bytes);
        for (int p = 0; p < n_pages; ++p)
            for (int h = 0; h < n_kv; ++h)
                for (int r = 0; r < PAGE; ++r) {
                    uint8_t* base = out.data() + p * page_bytes;
                    const uint64_t i = uint64_t(h) * PAGE + r;
                    std::memcpy(base + i * code_bytes, row(p, h, r), code_bytes);
                    std::memcpy(base + uint64_t(n_kv) * PAGE * code_bytes + i * (row_bytes - code_bytes),
                                row(p, h, r) + code_bytes, row_bytes - code_bytes);
                }
        return out;
    }
    // The row of (kvh, r) of page p in device page bytes, as a kv_codec row.
    std::vector<uint8_t> device_row(const std::vector<uint8_t>& dev, int p, int kvh, int r) const {
        const uint64_t page_bytes = uint64_t(n_kv) * PAGE * row_bytes, i = uint64_t(kvh) * PAGE + r;
        std::vector<uint8_t> out(row_bytes);
        const uint8_t* base = dev.data() + p * page_bytes;
        std::memcpy(out.data(), base + i * code_bytes, code_bytes);
        std::memcpy(out.data() + code_bytes, base + uint64_t(n_kv) * PAGE * code_bytes + i * (row_bytes - code_bytes),
                    row_bytes - code_bytes);
        return out;
    }
};

kernels::KvDtype kernel_dtype(core::KvDtype d) {
    return d == core::KvDtype::Fp8 ? kernels::KvDtype::Fp8 : d == core::KvDtype::Int8 ? kernels::KvDtype::Int8
                                                                                      : kernels::KvDtype::Bf16;
}

void check_attention(core::KvDtype dtype, int n_heads, int n_kv, int rotary_dim) {
    INFO("kv " << core::kv_dtype_name(dtype) << " heads " << n_heads << "/" << n_kv << " rotary " << rotary_dim);
    Rng rng(uint64_t(n_heads) * 131 + n_kv * 7 + int(dtype));
    const int max_pages = 3, n_pages = 6, max_context = max_pages * PAGE;
    const float eps = 1e-6f, theta = 1e7f;
    // Tokens: lane 0 at 63, 64, 65 (one lane's consecutive tokens across a page), lane 1 at 130.
    const std::vector<int32_t> lanes = {0, 0, 0, 1}, positions = {63, 64, 65, 130};
    const std::vector<int32_t> table = {2, 0, 4, 1, 3, 5}; // [lane][max_pages]
    const int T = int(lanes.size()), qd = n_heads * HD, kvd = n_kv * HD;
    const std::vector<float> qg = floats(rng, size_t(T) * 2 * qd, -2, 2), k = floats(rng, size_t(T) * kvd, -2, 2),
                             v = floats(rng, size_t(T) * kvd, -2, 2);
    // Norm weights bf16 cannot hold: the kernel must take them as the CPU does, in f32.
    const std::vector<float> wq = floats(rng, HD, -0.5f, 0.5f), wk = floats(rng, HD, -0.5f, 0.5f);
    HostPool pk{dtype, n_kv, n_pages, core::kv_row_bytes(dtype, HD), 0, {}};
    pk.code_bytes = dtype == core::KvDtype::Bf16 ? 2 * HD : HD;
    HostPool pv = pk;
    for (HostPool* p : {&pk, &pv}) {
        p->rows.resize(size_t(n_pages) * n_kv * PAGE * p->row_bytes);
        for (int pg = 0; pg < n_pages; ++pg)
            for (int h = 0; h < n_kv; ++h)
                for (int r = 0; r < PAGE; ++r) {
                    const std::vector<float> x = floats(rng, HD, -2, 2);
                    core::kv_encode_row(dtype, x.data(), HD, p->row(pg, h, r));
                }
    }
    // The device starts from the pool before the new rows (random rows there too).
    DeviceBuffer<uint8_t> d_kp(pk.pages()), d_vp(pv.pages());
    // Host: every token's q and rows into the pool (forward.cpp's order: all rows before attention).
    std::vector<float> q_ref(size_t(T) * qd), out_ref(size_t(T) * qd, 0.0f);
    std::vector<float> cs(rotary_dim / 2 + 1), sn(rotary_dim / 2 + 1);
    for (int t = 0; t < T; ++t) {
        cpu::rope_tables(uint32_t(positions[t]), uint32_t(rotary_dim), theta, cs.data(), sn.data());
        for (int h = 0; h < n_heads; ++h) {
            float* q = &q_ref[size_t(t) * qd + h * HD];
            cpu::rms_norm_offset(&qg[size_t(t) * 2 * qd + h * 2 * HD], wq.data(), HD, eps, q);
            cpu::rope_neox(q, uint32_t(rotary_dim), cs.data(), sn.data());
        }
        const int page = table[lanes[t] * max_pages + positions[t] / PAGE], r = positions[t] % PAGE;
        for (int h = 0; h < n_kv; ++h) {
            std::vector<float> kk(HD);
            cpu::rms_norm_offset(&k[size_t(t) * kvd + h * HD], wk.data(), HD, eps, kk.data());
            cpu::rope_neox(kk.data(), uint32_t(rotary_dim), cs.data(), sn.data());
            core::kv_encode_row(dtype, kk.data(), HD, pk.row(page, h, r));
            core::kv_encode_row(dtype, &v[size_t(t) * kvd + h * HD], HD, pv.row(page, h, r));
        }
    }
    DeviceBuffer<float> d_qg(qg), d_k(k), d_v(v), d_q(size_t(T) * qd), d_out(size_t(T) * qd);
    DeviceBuffer<float> d_scores(kernels::attn_f32_scores_floats(T, n_heads, max_context));
    DeviceBuffer<float> d_qn(wq), d_kn(wk);
    DeviceBuffer<int32_t> d_lanes(lanes), d_pos(positions), d_table(table);
    kernels::AttnF32Args a;
    a.geo.n_heads = n_heads;
    a.geo.n_kv_heads = n_kv;
    a.geo.head_dim = HD;
    a.geo.rotary_dim = rotary_dim;
    a.geo.rope_theta = theta;
    a.geo.eps = eps;
    a.qg = d_qg.get();
    a.qg_stride = 2 * qd;
    a.k = d_k.get();
    a.k_stride = kvd;
    a.v = d_v.get();
    a.v_stride = kvd;
    a.q_norm = d_qn.get();
    a.k_norm = d_kn.get();
    a.lanes = d_lanes.get();
    a.positions = d_pos.get();
    a.kv.page_table = d_table.get();
    a.kv.max_pages = max_pages;
    a.kv.dtype = kernel_dtype(dtype);
    if (dtype == core::KvDtype::Bf16) {
        a.kv.k = reinterpret_cast<bf16*>(d_kp.get());
        a.kv.v = reinterpret_cast<bf16*>(d_vp.get());
    } else {
        a.kv.k_q = d_kp.get();
        a.kv.v_q = d_vp.get();
    }
    a.q = d_q.get();
    a.q_stride = qd;
    a.scores = d_scores.get();
    a.max_context = max_context;
    a.out = d_out.get();
    a.out_stride = qd;
    a.n_tokens = T;
    CUDA_OK(kernels::attn_decode_f32(a, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<uint8_t> k_dev = d_kp.download(), v_dev = d_vp.download();
    // The pools against the host's after its writes: the new rows are the kv_codec encoding of the
    // GPU's f32 rows, whose codes may differ from the host's only where the two f32 rows round apart
    // (ulps), so in a few bytes; every other row is untouched (the new rows started random, so a
    // missing or misplaced write differs in most of a row's bytes).
    const size_t new_bytes = size_t(T) * n_kv * 2 * pk.row_bytes;
    size_t differing = 0;
    for (const auto& [dev, host] : {std::pair(k_dev, pk.pages()), std::pair(v_dev, pv.pages())})
        for (size_t i = 0; i < host.size(); ++i) differing += dev[i] != host[i];
    CHECK(differing * 200 <= new_bytes);
    // Attention over the pool as the GPU left it (so a new row's code that rounded apart does not
    // count against the sums).
    for (int t = 0; t < T; ++t) {
        const int n_see = positions[t] + 1;
        std::vector<float> K(size_t(n_see) * HD), V(size_t(n_see) * HD), p(n_see);
        for (int h = 0; h < n_heads; ++h) {
            const int kvh = h / (n_heads / n_kv);
            for (int j = 0; j < n_see; ++j) {
                const int page = table[lanes[t] * max_pages + j / PAGE];
                core::kv_decode_row(dtype, pk.device_row(k_dev, page, kvh, j % PAGE).data(), HD, &K[size_t(j) * HD]);
                core::kv_decode_row(dtype, pv.device_row(v_dev, page, kvh, j % PAGE).data(), HD, &V[size_t(j) * HD]);
            }
            const float* q = &q_ref[size_t(t) * qd + h * HD];
            for (int j = 0; j < n_see; ++j) p[j] = cpu::dot(q, &K[size_t(j) * HD], HD) * (1.0f / std::sqrt(float(HD)));
            cpu::softmax(p.data(), n_see);
            float* out = &out_ref[size_t(t) * qd + h * HD];
            for (int j = 0; j < n_see; ++j) cpu::axpy(p[j], &V[size_t(j) * HD], out, HD);
            for (int d = 0; d < HD; ++d) out[d] *= cpu::sigmoid(qg[size_t(t) * 2 * qd + h * 2 * HD + HD + d]);
        }
    }
    const double q_err = rel(d_q.download(), q_ref), out_err = rel(d_out.download(), out_ref);
    CHECK(q_err < 1e-6);
    CHECK(out_err < 1e-5);
    CHECK(d_kp.guards_intact());
    CHECK(d_vp.guards_intact());
    CHECK(d_out.guards_intact());
    std::printf("RESULT mixers_f32 attention kv %s heads %d/%d: q rel %.2e out rel %.2e, %zu of %zu new-row bytes "
                "differ\n",
                std::string(core::kv_dtype_name(dtype)).c_str(), n_heads, n_kv, q_err, out_err, differing, new_bytes);
}


// Steps of GDN on two slots (of three) against forward.cpp's conv and gdn_recurrent, f32 throughout.
void check_gdn(int hk, int hv) {
    INFO("GDN heads " << hk << "/" << hv);
    constexpr int D = 128;
    Rng rng(uint64_t(hk) * 17 + hv);
    const int cd = (2 * hk + hv) * D, kd = hk * D, vd = hv * D, n_slots = 3, steps = 5;
    const float eps = 1e-6f;
    const std::vector<int32_t> slots = {2, 0};
    const int T = int(slots.size());
    // Taps and norm weights bf16 cannot hold: the kernels must take them as the CPU does, in f32.
    const std::vector<float> cw = floats(rng, size_t(cd) * 4, -0.6f, 0.6f), nw = floats(rng, D, 0.5f, 1.5f);
    const std::vector<float> a_log = floats(rng, hv, -1, 1), dt_bias = floats(rng, hv, -1, 1);
    std::vector<float> conv_state = floats(rng, size_t(n_slots) * 3 * cd, -1, 1);
    std::vector<float> state = floats(rng, size_t(n_slots) * hv * D * D, -0.1f, 0.1f);
    DeviceBuffer<float> d_cw(cw), d_nw(nw);
    DeviceBuffer<float> d_alog(a_log), d_dt(dt_bias), d_cs(conv_state), d_state(state);
    DeviceBuffer<float> d_qkv(size_t(T) * cd), d_z(size_t(T) * vd), d_a(size_t(T) * hv), d_b(size_t(T) * hv);
    DeviceBuffer<float> d_conv_out(size_t(T) * cd), d_y(size_t(T) * vd);
    DeviceBuffer<int32_t> d_slots(slots);
    double worst_y = 0;
    for (int step = 0; step < steps; ++step) {
        const std::vector<float> qkv = floats(rng, size_t(T) * cd, -2, 2), z = floats(rng, size_t(T) * vd, -3, 3),
                                 a = floats(rng, size_t(T) * hv, -4, 4), b = floats(rng, size_t(T) * hv, -4, 4);
        d_qkv.upload(qkv);
        d_z.upload(z);
        d_a.upload(a);
        d_b.upload(b);
        kernels::GdnF32Args g;
        g.qkv = d_qkv.get();
        g.qkv_stride = cd;
        g.z = d_z.get();
        g.z_stride = vd;
        g.a = d_a.get();
        g.b = d_b.get();
        g.ab_stride = hv;
        g.conv_w = d_cw.get();
        g.conv_state = d_cs.get();
        g.conv_out = d_conv_out.get();
        g.conv_out_stride = cd;
        g.a_log = d_alog.get();
        g.dt_bias = d_dt.get();
        g.norm_w = d_nw.get();
        g.state = d_state.get();
        g.slots = d_slots.get();
        g.y = d_y.get();
        g.y_stride = vd;
        g.n_k_heads = hk;
        g.n_v_heads = hv;
        g.conv_dim = cd;
        g.n_tokens = T;
        g.eps = eps;
        CUDA_OK(kernels::gdn_decode_f32(g, nullptr));
        // Host: forward.cpp's conv (history oldest first), decay / beta, l2 norms, recurrence, gated norm.
        std::vector<float> y_ref(size_t(T) * vd);
        for (int t = 0; t < T; ++t) {
            float* hist = &conv_state[size_t(slots[t]) * 3 * cd];
            std::vector<float> c(cd);
            for (int ch = 0; ch < cd; ++ch) {
                const float x[4] = {hist[ch], hist[cd + ch], hist[2 * cd + ch], qkv[size_t(t) * cd + ch]};
                float acc = 0;
                for (int j = 0; j < 4; ++j) acc += cw[size_t(ch) * 4 + j] * x[j];
                c[ch] = cpu::silu(acc);
                hist[ch] = x[1];
                hist[cd + ch] = x[2];
                hist[2 * cd + ch] = x[3];
            }
            for (int h = 0; h < hk; ++h) {
                cpu::l2_normalize(&c[h * D], D);
                for (int d = 0; d < D; ++d) c[h * D + d] *= 1.0f / std::sqrt(float(D));
                cpu::l2_normalize(&c[kd + h * D], D);
            }
            for (int h = 0; h < hv; ++h) {
                const int r = h / (hv / hk);
                const float gate = -std::exp(a_log[h]) * cpu::softplus(a[size_t(t) * hv + h] + dt_bias[h]);
                const float beta = cpu::sigmoid(b[size_t(t) * hv + h]);
                cpu::GdnHeadSequence seq;
                seq.n_tokens = 1;
                seq.dk = D;
                seq.dv = D;
                seq.q = &c[r * D];
                seq.k = &c[kd + r * D];
                seq.qk_stride = cd;
                seq.v = &c[2 * kd + h * D];
                seq.v_stride = cd;
                seq.g = &gate;
                seq.beta = &beta;
                seq.gb_stride = 1;
                float* o = &y_ref[size_t(t) * vd + h * D];
                seq.o = o;
                seq.o_stride = vd;
                cpu::gdn_recurrent(seq, &state[(size_t(slots[t]) * hv + h) * D * D]);
                cpu::gated_rms_norm(o, &z[size_t(t) * vd + h * D], nw.data(), D, eps, o);
            }
        }
        const double y_err = rel(d_y.download(), y_ref);
        CHECK(y_err < 1e-5);
        worst_y = std::max(worst_y, y_err);
    }
    // The conv history is a copy of f32 inputs: exact; the recurrent state f32 sums.
    CHECK(d_cs.download() == conv_state);
    const double s_err = rel(d_state.download(), state);
    CHECK(s_err < 1e-5);
    CHECK(d_y.guards_intact());
    CHECK(d_state.guards_intact());
    std::printf("RESULT mixers_f32 gdn heads %d/%d: %d steps worst y rel %.2e, state rel %.2e\n", hk, hv, steps, worst_y,
                s_err);
}

} // namespace

TEST_CASE("attn_decode_f32 follows the CPU backend's attention for every KV dtype", "[mixers_f32]") {
    require_gpu();
    for (core::KvDtype d : {core::KvDtype::Bf16, core::KvDtype::Fp8, core::KvDtype::Int8}) {
        check_attention(d, 4, 1, 64);
        check_attention(d, 16, 2, 256);
    }
    check_attention(core::KvDtype::Bf16, 3, 3, 0);
}

TEST_CASE("gdn_decode_f32 follows the CPU backend's conv and recurrence over several steps", "[mixers_f32]") {
    require_gpu();
    check_gdn(2, 4);
    check_gdn(1, 1);
    check_gdn(4, 16);
}
