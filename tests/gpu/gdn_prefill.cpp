// ninfer tests - Gated DeltaNet prefill (one call per chunk of one lane) against the decode kernels
// run token by token and against the CPU backend's ops (chunked WY form), over several chunks so
// the conv history and the recurrent state carry across calls; the column scan and the chunked
// tensor-core form alike.
#include "core/cpu/gdn.h"
#include "core/cpu/ops.h"
#include "gpu_test_util.h"
#include "ninfer/kernels/gdn_prefill.h"

#include <algorithm>

using namespace ninfer;
using namespace ninfer::test;
namespace cpu = ninfer::core::cpu;

namespace {

constexpr int D = kernels::kGdnHeadDim;
constexpr int kSlots = 3, kSlot = 1; // the lane's slot sits between two that must stay untouched

struct Inputs { // one chunk's projection outputs, strided like the runner's padded rows
    int T = 0;
    int64_t qkv_ld = 0, z_ld = 0, ab_ld = 0;
    std::vector<bf16> qkv, z, a, b;
    std::vector<float> a32, b32;
};

// The CPU reference in the kernels' exact mode: f32 conv (bf16 output as the kernels store it),
// cpu::l2_normalize, the chunked delta rule, cpu::gated_rms_norm.
struct CpuLane {
    int hk, hv, conv_dim;
    std::vector<float> w, norm_w, a_log, dt_bias, hist, state; // hist [3][conv_dim], state [hv][D][D]

    std::vector<float> run(const Inputs& in, bool f32_ab, int start) {
        const int T = in.T, kd = hk * D;
        std::vector<float> x(size_t(T) * conv_dim), g(size_t(T) * hv), beta(size_t(T) * hv);
        for (int t = 0; t < T; ++t)
            for (int ch = 0; ch < conv_dim; ++ch) {
                float acc = 0.f;
                for (int j = 0; j < 4; ++j) {
                    const int m = t - 3 + j;
                    const float v = m >= 0 ? to_f(in.qkv[size_t(m) * in.qkv_ld + ch]) : hist[size_t(3 + m) * conv_dim + ch];
                    acc = std::fma(w[size_t(ch) * 4 + j], v, acc);
                }
                x[size_t(t) * conv_dim + ch] = round_bf16(cpu::silu(acc));
            }
        // New history. When T < 3 it shifts left in place: entry 3 + pos = T + m > m is still old.
        for (int m = 0; m < 3; ++m)
            for (int ch = 0; ch < conv_dim; ++ch) {
                const int pos = T - 3 + m;
                hist[size_t(m) * conv_dim + ch] =
                    pos >= 0 ? to_f(in.qkv[size_t(pos) * in.qkv_ld + ch]) : hist[size_t(3 + pos) * conv_dim + ch];
            }
        for (int t = 0; t < T; ++t) {
            for (int h = 0; h < 2 * hk; ++h) {
                float* v = &x[size_t(t) * conv_dim + size_t(h) * D];
                cpu::l2_normalize(v, D);
                if (h < hk)
                    for (int i = 0; i < D; ++i) v[i] *= 1.f / std::sqrt(float(D));
            }
            for (int h = 0; h < hv; ++h) {
                const float av = f32_ab ? in.a32[size_t(t) * in.ab_ld + h] : to_f(in.a[size_t(t) * in.ab_ld + h]);
                const float bv = f32_ab ? in.b32[size_t(t) * in.ab_ld + h] : to_f(in.b[size_t(t) * in.ab_ld + h]);
                g[size_t(t) * hv + h] = -std::exp(a_log[h]) * cpu::softplus(av + dt_bias[h]);
                beta[size_t(t) * hv + h] = cpu::sigmoid(bv);
            }
        }
        std::vector<float> o(size_t(T) * hv * D), y(size_t(T) * hv * D);
        for (int h = 0; h < hv; ++h) {
            cpu::GdnHeadSequence s;
            s.n_tokens = size_t(T);
            s.dk = s.dv = D;
            s.q = x.data() + size_t(h / (hv / hk)) * D;
            s.k = s.q + kd;
            s.qk_stride = size_t(conv_dim);
            s.v = x.data() + 2 * kd + size_t(h) * D;
            s.v_stride = size_t(conv_dim);
            s.g = g.data() + h;
            s.beta = beta.data() + h;
            s.gb_stride = size_t(hv);
            s.o = o.data() + size_t(h) * D;
            s.o_stride = size_t(hv) * D;
            const size_t first = cpu::kGdnChunk - size_t(start) % cpu::kGdnChunk;
            cpu::gdn_chunked(s, state.data() + size_t(h) * D * D, cpu::kGdnChunk, first);
        }
        for (int t = 0; t < T; ++t)
            for (int h = 0; h < hv; ++h) {
                std::vector<float> z(D);
                for (int i = 0; i < D; ++i) z[i] = to_f(in.z[size_t(t) * in.z_ld + h * D + i]);
                float* out = &y[(size_t(t) * hv + h) * D];
                cpu::gated_rms_norm(&o[(size_t(t) * hv + h) * D], z.data(), norm_w.data(), D, 1e-6f, out);
                for (int i = 0; i < D; ++i) out[i] = round_bf16(out[i]);
            }
        return y;
    }
};

std::vector<double> as_doubles(const std::vector<bf16>& v, int T, int64_t ld, int n) {
    std::vector<double> out;
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < n; ++i) out.push_back(to_f(v[size_t(t) * ld + i]));
    return out;
}

// algorithm: kGdnPrefillScan / kGdnPrefillChunked (0 = the default); variant: its launch layout
// (scan_variant or chunk_variant).
// cpu_ref = false skips the (slow) CPU reference for long chunks; the decode kernels still check.
void run_prefill(int hk, int hv, const std::vector<int>& chunks, bool exact, bool f32_ab, int variant, uint64_t seed,
                 int algorithm = kernels::kGdnPrefillScan, bool cpu_ref = true) {
    INFO("hk " << hk << " hv " << hv << " exact " << exact << " f32 a/b " << f32_ab << " variant " << variant
               << " algorithm " << algorithm);
    Rng rng(seed);
    const int conv_dim = (2 * hk + hv) * D, vd = hv * D;
    const auto conv_w = rng.bf16s(size_t(conv_dim) * 4, -0.6f, 0.6f), norm_w = rng.bf16s(D, 0.5f, 1.5f);
    std::vector<float> a_log, dt_bias;
    for (int h = 0; h < hv; ++h) {
        a_log.push_back(std::log(rng.uniform(0.5f, 16.f)));
        dt_bias.push_back(rng.uniform(-1.f, 1.f));
    }
    // Non-zero entry state: history and recurrent state of an earlier chunk.
    const auto hist0 = rng.bf16s(size_t(kSlots) * 3 * conv_dim, -2.f, 2.f);
    std::vector<float> state0(size_t(kSlots) * hv * D * D);
    for (auto& s : state0) s = rng.uniform(-0.5f, 0.5f);
    DeviceBuffer<bf16> w_d(conv_w), nw_d(norm_w), hist_pre(hist0), hist_dec(hist0);
    DeviceBuffer<float> alog_d(a_log), dtb_d(dt_bias), st_pre(state0), st_dec(state0);
    DeviceBuffer<int32_t> slot_d(std::vector<int32_t>{kSlot});
    CpuLane host{hk, hv, conv_dim, {}, {}, {}, {}, {}, {}};
    for (auto v : conv_w) host.w.push_back(to_f(v));
    for (auto v : norm_w) host.norm_w.push_back(to_f(v));
    host.a_log = a_log;
    host.dt_bias = dt_bias;
    for (int i = 0; i < 3 * conv_dim; ++i) host.hist.push_back(to_f(hist0[size_t(kSlot) * 3 * conv_dim + i]));
    host.state.assign(state0.begin() + size_t(kSlot) * hv * D * D, state0.begin() + size_t(kSlot + 1) * hv * D * D);

    int start = 0;
    for (const int T : chunks) {
        INFO("chunk of " << T << " tokens at " << start);
        Inputs in;
        in.T = T;
        in.qkv_ld = conv_dim + 8, in.z_ld = vd + 16, in.ab_ld = hv + 3;
        in.qkv = rng.bf16s(size_t(T) * in.qkv_ld, -2.f, 2.f);
        in.z = rng.bf16s(size_t(T) * in.z_ld, -3.f, 3.f);
        in.a = rng.bf16s(size_t(T) * in.ab_ld, -4.f, 4.f);
        in.b = rng.bf16s(size_t(T) * in.ab_ld, -4.f, 4.f);
        for (int i = 0; i < T * in.ab_ld; ++i) {
            in.a32.push_back(rng.uniform(-4.f, 4.f));
            in.b32.push_back(rng.uniform(-4.f, 4.f));
        }
        DeviceBuffer<bf16> qkv_d(in.qkv), z_d(in.z), a_d(in.a), b_d(in.b);
        DeviceBuffer<float> a32_d(in.a32), b32_d(in.b32);
        DeviceBuffer<bf16> y_pre(size_t(T) * in.z_ld, 0xff), y_dec(size_t(T) * in.z_ld, 0xff); // NaN poison
        const size_t scratch_bytes = kernels::gdn_prefill_scratch_bytes(T, hk, hv);
        DeviceBuffer<uint8_t> scratch(scratch_bytes, 0xff); // cudaMalloc + 256 guard bytes: 256-aligned

        kernels::GdnPrefillArgs p;
        p.qkv = qkv_d.get(), p.qkv_stride = in.qkv_ld, p.z = z_d.get(), p.z_stride = in.z_ld;
        if (f32_ab) p.a_f32 = a32_d.get(), p.b_f32 = b32_d.get();
        else p.a = a_d.get(), p.b = b_d.get();
        p.a_stride = p.b_stride = in.ab_ld;
        p.conv_w = w_d.get(), p.conv_state = hist_pre.get(), p.state = st_pre.get(), p.slot = kSlot;
        p.a_log = alog_d.get(), p.dt_bias = dtb_d.get(), p.norm_w = nw_d.get();
        p.y = y_pre.get(), p.y_stride = in.z_ld;
        p.n_k_heads = hk, p.n_v_heads = hv, p.conv_dim = conv_dim, p.n_tokens = T, p.exact = exact;
        const bool chunked = algorithm == kernels::kGdnPrefillChunked;
        p.scan_variant = chunked ? 0 : variant, p.chunk_variant = chunked ? variant : 0;
        p.algorithm = algorithm, p.start_pos = start; // chunks where the CPU op cuts them
        p.scratch = scratch.get(), p.scratch_bytes = scratch_bytes;
        CUDA_OK(kernels::gdn_prefill(p, nullptr));

        DeviceBuffer<bf16> conv_out(size_t(conv_dim), 0xff);
        for (int t = 0; t < T; ++t) { // the decode kernels, one token at a time
            kernels::GdnConvArgs c{qkv_d.get() + int64_t(t) * in.qkv_ld, conv_dim, w_d.get(), hist_dec.get(),
                                   slot_d.get(), conv_out.get(), conv_dim, conv_dim, 1, exact};
            CUDA_OK(kernels::gdn_conv_decode(c, nullptr));
            kernels::GdnRecurrentArgs r;
            r.conv_out = conv_out.get(), r.conv_stride = conv_dim;
            r.z = z_d.get() + int64_t(t) * in.z_ld, r.z_stride = in.z_ld;
            if (f32_ab) r.a_f32 = a32_d.get() + int64_t(t) * in.ab_ld, r.b_f32 = b32_d.get() + int64_t(t) * in.ab_ld;
            else r.a = a_d.get() + int64_t(t) * in.ab_ld, r.b = b_d.get() + int64_t(t) * in.ab_ld;
            r.a_stride = r.b_stride = in.ab_ld;
            r.a_log = alog_d.get(), r.dt_bias = dtb_d.get(), r.norm_w = nw_d.get();
            r.state = st_dec.get(), r.slots = slot_d.get(), r.y = y_dec.get() + int64_t(t) * in.z_ld;
            r.y_stride = in.z_ld, r.n_k_heads = hk, r.n_v_heads = hv, r.n_tokens = 1, r.exact = exact;
            CUDA_OK(kernels::gdn_recurrent_decode(r, nullptr));
        }
        CUDA_OK(cudaDeviceSynchronize());
        const auto yp = as_doubles(y_pre.download(), T, in.z_ld, vd);
        const auto yd = as_doubles(y_dec.download(), T, in.z_ld, vd);
        CHECK(std::all_of(yp.begin(), yp.end(), [](double v) { return std::isfinite(v); }));
        CHECK(rel_l2(yp, yd) < (exact ? 1e-3 : 3e-3)); // f32 order only (and bf16 flips it causes)
        CHECK(y_pre.guards_intact());
        CHECK(scratch.guards_intact());
        if (exact && cpu_ref) {
            const auto yc = host.run(in, f32_ab, start);
            CHECK(rel_l2(yp, std::vector<double>(yc.begin(), yc.end())) < 5e-3);
        }
        start += T;
    }
    const auto sp = st_pre.download(), sd = st_dec.download();
    CHECK(rel_l2(std::vector<double>(sp.begin(), sp.end()), std::vector<double>(sd.begin(), sd.end())) < 1e-5);
    // Other slots untouched, exactly.
    for (int s : {0, 2})
        CHECK(std::equal(sp.begin() + size_t(s) * hv * D * D, sp.begin() + size_t(s + 1) * hv * D * D,
                         state0.begin() + size_t(s) * hv * D * D));
    const auto hp = hist_pre.download(), hd = hist_dec.download();
    CHECK(std::equal(hp.begin(), hp.end(), hd.begin(), [](bf16 x, bf16 y) { return to_f(x) == to_f(y); }));
    if (exact && cpu_ref) {
        std::vector<double> got(sp.begin() + size_t(kSlot) * hv * D * D, sp.begin() + size_t(kSlot + 1) * hv * D * D);
        CHECK(rel_l2(got, std::vector<double>(host.state.begin(), host.state.end())) < 1e-4);
        std::vector<float> hist_got;
        for (int i = 0; i < 3 * conv_dim; ++i) hist_got.push_back(to_f(hp[size_t(kSlot) * 3 * conv_dim + i]));
        CHECK(hist_got == host.hist);
    }
    CHECK(st_pre.guards_intact());
    CHECK(hist_pre.guards_intact());
}

} // namespace

TEST_CASE("gdn prefill equals the decode kernels token by token and the CPU chunked form", "[gdn_prefill]") {
    require_gpu();
    run_prefill(16, 48, {1, 63, 64, 65, 200}, true, true, 0, 31); // 27B, the runner's mode
    run_prefill(16, 32, {2, 1, 130}, true, false, 2, 32);         // 35B-A3B, history mixed when T < 3
    run_prefill(16, 48, {64, 17}, false, false, 0, 33);           // bf16 roundings of the decode path
    run_prefill(2, 4, {5, 1, 33, 100}, true, true, 4, 34);        // small, every scan layout
    run_prefill(2, 4, {9, 40}, true, false, 3, 36);
    run_prefill(4, 8, {20, 50}, false, true, 5, 37);
    run_prefill(4, 8, {31, 33}, true, true, 6, 38);
    run_prefill(1, 1, {3, 70}, false, false, 1, 35);              // one head
}

// The chunked (WY, tensor-core) form: same tolerances as the scan against the decode kernels and
// the CPU op; chunks of 1, 63, 64, 65, 77 tokens (partial and exact 64-token chunks, the state
// and conv history carried across calls), both model shapes, bf16 and exact modes.
TEST_CASE("gdn prefill chunked form equals the decode kernels and the CPU op", "[gdn_prefill]") {
    require_gpu();
    constexpr int kChunked = kernels::kGdnPrefillChunked;
    run_prefill(16, 48, {1, 63, 64, 65, 77}, true, true, 1, 41, kChunked);  // 27B, the runner's mode
    run_prefill(16, 32, {2, 1, 130}, true, false, 2, 42, kChunked);         // 35B-A3B, T < 3 history
    run_prefill(16, 48, {64, 17}, false, false, 3, 43, kChunked);           // bf16 roundings
    run_prefill(2, 4, {5, 1, 33, 200}, true, true, 4, 44, kChunked);        // small head counts
    run_prefill(1, 1, {3, 70}, false, false, 0, 45, kChunked);              // one head
    run_prefill(16, 48, {130, 77}, true, true, 3, 47, kChunked);            // every launch layout at 27B
    run_prefill(16, 48, {77, 130}, true, false, 4, 48, kChunked);
    run_prefill(16, 48, {100, 9}, true, true, 2, 49, kChunked);
    run_prefill(16, 32, {2048, 129}, true, false, 0, 46, kChunked, false);  // long: state over 34 chunks
}

TEST_CASE("gdn prefill refuses bad arguments without launching", "[gdn_prefill]") {
    require_gpu();
    kernels::GdnPrefillArgs p; // all null
    CHECK(kernels::gdn_prefill(p, nullptr) == cudaErrorInvalidValue);
    p.scan_variant = 7; // unknown layouts are refused too (checked before anything else matters)
    CHECK(kernels::gdn_prefill(p, nullptr) == cudaErrorInvalidValue);
    p.scan_variant = 0, p.algorithm = 3; // and unknown algorithms, chunked layouts, positions
    CHECK(kernels::gdn_prefill(p, nullptr) == cudaErrorInvalidValue);
    p.algorithm = 0, p.chunk_variant = 5;
    CHECK(kernels::gdn_prefill(p, nullptr) == cudaErrorInvalidValue);
    p.chunk_variant = 0, p.start_pos = -1;
    CHECK(kernels::gdn_prefill(p, nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::gdn_prefill_scratch_bytes(8192, 16, 48) > kernels::gdn_prefill_scratch_bytes(64, 16, 48));
}
