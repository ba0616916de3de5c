// ninfer tests - decode attention over the paged KV pool (q/k norm, RoPE, GQA, output gate) for
// lanes of different lengths and every GPU KV dtype (bf16, fp8, int8 rows of core/model/kv_codec.h),
// against fp64 over the codec's decoded rows.
#include "core/model/kv_codec.h"
#include "gpu_test_util.h"
#include "ninfer/kernels/attention_decode.h"
#include "ninfer/kernels/attention_prefill.h"

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

// Host model of one layer's K or V pool: decoded values by (page, kv head, row) and the device bytes.
struct Pool {
    kernels::KvDtype dtype;
    int nkv;
    size_t page_bytes;
    std::vector<float> values; // [page][kvh][64][HD], decoded
    std::vector<uint8_t> bytes;
    core::KvDtype core_dtype() const {
        return dtype == kernels::KvDtype::Fp8 ? core::KvDtype::Fp8 : dtype == kernels::KvDtype::Int8 ? core::KvDtype::Int8 : core::KvDtype::Bf16;
    }
    size_t code_bytes() const { return dtype == kernels::KvDtype::Bf16 ? 2 * HD : HD; }
    size_t scale_bytes() const { return 2 * size_t(kernels::kv_scales_per_row(dtype, HD)); }
    // Byte offsets of a row's codes and scales in the device pages.
    size_t code_at(int page, int kvh, int r) const { return page * page_bytes + (size_t(kvh) * 64 + r) * code_bytes(); }
    size_t scale_at(int page, int kvh, int r) const {
        return page * page_bytes + size_t(nkv) * 64 * code_bytes() + (size_t(kvh) * 64 + r) * scale_bytes();
    }
    // The kv_codec row (codes then scales) of a stored row, from device bytes b.
    std::vector<uint8_t> row_of(const std::vector<uint8_t>& b, int page, int kvh, int r) const {
        std::vector<uint8_t> row(code_bytes() + scale_bytes());
        std::memcpy(row.data(), &b[code_at(page, kvh, r)], code_bytes());
        std::memcpy(row.data() + code_bytes(), &b[scale_at(page, kvh, r)], scale_bytes());
        return row;
    }
    void put_row(int page, int kvh, int r, const std::vector<uint8_t>& row) {
        std::memcpy(&bytes[code_at(page, kvh, r)], row.data(), code_bytes());
        std::memcpy(&bytes[scale_at(page, kvh, r)], row.data() + code_bytes(), scale_bytes());
        core::kv_decode_row(core_dtype(), row.data(), HD, &values[((size_t(page) * nkv + kvh) * 64 + r) * HD]);
    }
    Pool(kernels::KvDtype d, int nkv_, int n_pages, float range, Rng& rng)
        : dtype(d), nkv(nkv_), page_bytes(kernels::kv_page_bytes(d, nkv_, HD)),
          values(size_t(n_pages) * nkv_ * 64 * HD), bytes(n_pages * page_bytes) {
        std::vector<float> x(HD);
        std::vector<uint8_t> row(code_bytes() + scale_bytes());
        for (int p = 0; p < n_pages; ++p)
            for (int h = 0; h < nkv; ++h)
                for (int r = 0; r < 64; ++r) {
                    for (auto& v : x) v = rng.uniform(-range, range);
                    core::kv_encode_row(core_dtype(), x.data(), HD, row.data());
                    put_row(p, h, r, row);
                }
    }
};

// Prep, then the staged path (right behind the prep, so that its loads before the PDL wait race the
// new rows if they could), then the split path; both outputs against fp64, and against each other
// bit for bit. one_lane: every token in one lane (positions consecutive, as the runner's prefill
// blocks), so the rows of earlier tokens of the call are written by the same prep.
void run_attention(int nh, int nkv, std::vector<int> positions, uint64_t seed,
                   kernels::KvDtype dtype = kernels::KvDtype::Bf16, bool one_lane = false) {
    INFO("heads " << nh << "/" << nkv << " tokens " << positions.size() << " kv dtype " << int(dtype)
                  << " one lane " << one_lane << " first position " << positions[0]);
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
    if (one_lane) std::fill(lanes.begin(), lanes.end(), lanes[0]);
    Pool kp(dtype, nkv, n_pages, 1.5f, rng), vp(dtype, nkv, n_pages, 2.f, rng);
    DeviceBuffer<uint8_t> kd(kp.bytes), vd(vp.bytes);
    DeviceBuffer<int32_t> table_d(table), lanes_d(lanes), pos_d(std::vector<int32_t>(positions.begin(), positions.end()));
    const auto qg = rng.bf16s(size_t(T) * nh * 2 * HD, -3.f, 3.f);
    const auto kn = rng.bf16s(size_t(T) * nkv * HD, -3.f, 3.f), vn = rng.bf16s(size_t(T) * nkv * HD, -2.f, 2.f);
    const auto qw = rng.bf16s(HD, -0.3f, 0.3f), kw = rng.bf16s(HD, -0.3f, 0.3f);
    DeviceBuffer<bf16> qg_d(qg), k_d(kn), v_d(vn), qw_d(qw), kw_d(kw);
    DeviceBuffer<bf16> q_out(size_t(T) * nh * HD, 0xff), out(size_t(T) * nh * HD, 0xff), out_staged(size_t(T) * nh * HD, 0xff),
        out_auto(size_t(T) * nh * HD, 0xff);
    DeviceBuffer<float> scratch(kernels::attn_decode_scratch_floats(T, nh, max_context));

    kernels::AttnGeometry geo{nh, nkv, HD, 64, 1e7f, 1e-6f};
    kernels::KvPages kv;
    kv.page_table = table_d.get();
    kv.max_pages = max_pages;
    kv.dtype = dtype;
    if (dtype == kernels::KvDtype::Bf16) {
        kv.k = reinterpret_cast<bf16*>(kd.get());
        kv.v = reinterpret_cast<bf16*>(vd.get());
    } else {
        kv.k_q = kd.get();
        kv.v_q = vd.get();
    }
    kernels::AttnPrepArgs pa{geo, qg_d.get(), nh * 2 * HD, k_d.get(), nkv * HD, v_d.get(), nkv * HD, qw_d.get(),
                             kw_d.get(), lanes_d.get(), pos_d.get(), kv, q_out.get(), nh * HD, T};
    CUDA_OK(kernels::attn_decode_prep(pa, nullptr));
    kernels::AttnDecodeArgs da{geo, q_out.get(), nh * HD, qg_d.get(), nh * 2 * HD, lanes_d.get(), pos_d.get(), kv,
                               out.get(), nh * HD, T, max_context, scratch.get(), scratch.size()};
    kernels::AttnDecodeArgs ds = da;
    ds.out = out_staged.get();
    CUDA_OK(kernels::attn_decode_with(ds, kernels::AttnDecodePath::Staged, nullptr));
    kernels::AttnDecodeArgs dauto = da; // the default: staged for one token, split for more
    dauto.out = out_auto.get();
    CUDA_OK(kernels::attn_decode_with(dauto, kernels::AttnDecodePath::Auto, nullptr));
    CUDA_OK(kernels::attn_decode_with(da, kernels::AttnDecodePath::Split, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(out.guards_intact());
    CHECK(out_staged.guards_intact());
    CHECK(out_auto.guards_intact());
    CHECK(kd.guards_intact());
    CHECK(vd.guards_intact());
    const auto og = out.download(), og_staged = out_staged.download(), og_auto = out_auto.download();
    CHECK(std::memcmp(og.data(), og_staged.data(), og.size() * sizeof(bf16)) == 0);
    CHECK(std::memcmp(og.data(), og_auto.data(), og.size() * sizeof(bf16)) == 0);
    const auto kg = kd.download(), vg = vd.download();

    auto vrow = [&](int lane, int kvh, int pos) { // offset of a row in Pool::values
        const int page = table[size_t(lane) * max_pages + pos / 64];
        return ((size_t(page) * nkv + kvh) * 64 + pos % 64) * HD;
    };
    std::vector<double> got, got_staged, want;
    int k_bad = 0, v_bad = 0;
    for (int t = 0; t < T; ++t) {
        const int lane = lanes[t], pos = positions[t], group = nh / nkv;
        const int page = table[size_t(lane) * max_pages + pos / 64];
        for (int kvh = 0; kvh < nkv; ++kvh) {
            const auto knew = norm_rope(&kn[size_t(t) * nkv * HD + kvh * HD], kw, pos, 64, 1e7f);
            // V: the codec's encoding of the bf16 input, byte for byte. K: within the dtype's step.
            std::vector<float> vf(HD);
            for (int d = 0; d < HD; ++d) vf[d] = to_f(vn[size_t(t) * nkv * HD + kvh * HD + d]);
            std::vector<uint8_t> vwant(kp.code_bytes() + kp.scale_bytes());
            core::kv_encode_row(vp.core_dtype(), vf.data(), HD, vwant.data());
            v_bad += vp.row_of(vg, page, kvh, pos % 64) != vwant;
            const auto krow = kp.row_of(kg, page, kvh, pos % 64);
            kp.put_row(page, kvh, pos % 64, krow);
            vp.put_row(page, kvh, pos % 64, vwant);
            double kmax = 0;
            for (double v : knew) kmax = std::max(kmax, std::fabs(v));
            for (int d = 0; d < HD; ++d) {
                const double err = std::fabs(kp.values[vrow(lane, kvh, pos) + d] - knew[d]);
                // knew is rounded to bf16 last; the quantised paths take the unrounded f32 (2^-8 more).
                const double step = dtype == kernels::KvDtype::Bf16 ? 0.0
                                    : dtype == kernels::KvDtype::Fp8 ? std::ldexp(std::fabs(knew[d]), -4) + kmax * 1e-5
                                                                     : kmax / 127 * 0.5001; // half a group step
                const double tol = std::ldexp(std::fabs(knew[d]), dtype == kernels::KvDtype::Bf16 ? -7 : -8) + step + 1e-6;
                if (err > tol) ++k_bad;
            }
        }
        for (int h = 0; h < nh; ++h) {
            const int kvh = h / group;
            const auto q = norm_rope(&qg[size_t(t) * nh * 2 * HD + h * 2 * HD], qw, pos, 64, 1e7f);
            std::vector<double> s(pos + 1);
            double m = -1e300;
            for (int j = 0; j <= pos; ++j) {
                double dot = 0;
                for (int d = 0; d < HD; ++d) dot += q[d] * kp.values[vrow(lane, kvh, j) + d];
                s[j] = dot / 16.0;
                m = std::max(m, s[j]);
            }
            double l = 0;
            for (auto& e : s) l += (e = std::exp(e - m));
            for (int d = 0; d < HD; ++d) {
                double o = 0;
                for (int j = 0; j <= pos; ++j) o += s[j] * vp.values[vrow(lane, kvh, j) + d];
                const double gate = to_f(qg[size_t(t) * nh * 2 * HD + h * 2 * HD + HD + d]);
                want.push_back(round_bf16(double(round_bf16(o / l)) * round_bf16(1 / (1 + std::exp(-gate)))));
                got.push_back(to_f(og[size_t(t) * nh * HD + h * HD + d]));
                got_staged.push_back(to_f(og_staged[size_t(t) * nh * HD + h * HD + d]));
            }
        }
    }
    CHECK(k_bad == 0);
    CHECK(v_bad == 0);
    CHECK(rel_l2(got, want) < 5e-3);
    CHECK(rel_l2(got_staged, want) < 5e-3);
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
    run_attention(24, 4, {9000, 70}, 26);         // 27B past 66 pages: 3 pages per chunk, loads one slice ahead
}

TEST_CASE("staged and auto attention decode equal the split path at the model shapes", "[attention_decode]") {
    CHECK(kernels::attn_decode_schedule(kernels::AttnDecodePath::Auto, 1) == kernels::AttnDecodePath::Staged);
    CHECK(kernels::attn_decode_schedule(kernels::AttnDecodePath::Auto, 2) == kernels::AttnDecodePath::Split);
    CHECK(kernels::attn_decode_schedule(kernels::AttnDecodePath::Split, 1) == kernels::AttnDecodePath::Split);
    CHECK(kernels::attn_decode_schedule(kernels::AttnDecodePath::Staged, 8) == kernels::AttnDecodePath::Staged);
    require_gpu();
    // 27B (24/4) and 35B-A3B (16/2): one token, the bench depths, pages split over chunks.
    for (int pos : {0, 1, 63, 64, 8191, 8192})
        run_attention(24, 4, {pos}, 51 + uint64_t(pos));
    run_attention(16, 2, {8191}, 52);
    run_attention(24, 4, {32767}, 53); // 8 pages per chunk: the stage carries slices 2..7 of a warp
    run_attention(16, 2, {32768}, 54);
    // Batches 1..8, lanes of different lengths around page boundaries.
    const std::vector<int> mixed{8191, 63, 64, 65, 127, 128, 1, 4095};
    for (size_t b = 1; b <= mixed.size(); ++b)
        run_attention(24, 4, std::vector<int>(mixed.begin(), mixed.begin() + b), 60 + b);
    run_attention(16, 2, mixed, 70);
    // One lane's consecutive tokens (the runner's prefill blocks): the rows of earlier tokens come from
    // the same prep, so the staged path must load them after the wait (across a page and a slice).
    std::vector<int> block(8);
    for (int start : {0, 57, 8185}) {
        std::iota(block.begin(), block.end(), start);
        run_attention(24, 4, block, 80 + uint64_t(start), kernels::KvDtype::Bf16, true);
    }
    std::iota(block.begin(), block.end(), 4093);
    run_attention(16, 2, block, 90, kernels::KvDtype::Bf16, true);
}

TEST_CASE("attention decode with fp8 and int8 KV writes the codec's rows and matches fp64", "[attention_decode]") {
    require_gpu();
    for (kernels::KvDtype d : {kernels::KvDtype::Fp8, kernels::KvDtype::Int8}) {
        run_attention(24, 4, {0}, 31, d);
        run_attention(24, 4, {63, 64, 65, 300, 1000}, 32, d);
        run_attention(16, 2, {4100, 255, 256, 1}, 33, d);
        run_attention(2, 2, {5, 17, 129, 511, 512, 513, 2, 70}, 34, d);
        run_attention(24, 4, {9000, 4500}, 35, d); // chunks of several pages
    }
}

namespace {

// attn_prefill over fp8/int8 pages: the chunk's rows are written as attn_decode_prep writes them
// (byte for byte) and its output follows the decode kernels over the same tokens.
void run_prefill_quant(kernels::KvDtype dtype, int nh, int nkv, int start, int T, uint64_t seed) {
    INFO("prefill kv dtype " << int(dtype) << " heads " << nh << "/" << nkv << " start " << start << " T " << T);
    Rng rng(seed);
    const int lane = 1, max_pages = (start + T + 63) / 64 + 1, n_pages = 2 * max_pages;
    std::vector<int32_t> table(static_cast<size_t>(n_pages));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng.gen);
    Pool kp(dtype, nkv, n_pages, 1.5f, rng), vp(dtype, nkv, n_pages, 2.f, rng);
    DeviceBuffer<uint8_t> kd(kp.bytes), vd(vp.bytes), kd_dec(kp.bytes), vd_dec(vp.bytes);
    DeviceBuffer<int32_t> table_d(table);
    const auto qg = rng.bf16s(size_t(T) * nh * 2 * HD, -3.f, 3.f);
    const auto kn = rng.bf16s(size_t(T) * nkv * HD, -3.f, 3.f), vn = rng.bf16s(size_t(T) * nkv * HD, -2.f, 2.f);
    const auto qw = rng.bf16s(HD, -0.3f, 0.3f), kw = rng.bf16s(HD, -0.3f, 0.3f);
    DeviceBuffer<bf16> qg_d(qg), k_d(kn), v_d(vn), qw_d(qw), kw_d(kw);
    DeviceBuffer<bf16> out(size_t(T) * nh * HD, 0xff), out_dec(size_t(T) * nh * HD, 0xff), q_dec(size_t(T) * nh * HD);
    const kernels::AttnGeometry geo{nh, nkv, HD, 64, 1e7f, 1e-6f, true};
    auto pages = [&](uint8_t* k, uint8_t* v) {
        kernels::KvPages kv;
        kv.page_table = table_d.get();
        kv.max_pages = max_pages;
        kv.dtype = dtype;
        kv.k_q = k;
        kv.v_q = v;
        return kv;
    };
    DeviceBuffer<uint8_t> scratch(kernels::attn_prefill_scratch_bytes(T, nh));
    kernels::AttnPrefillArgs a;
    a.geo = geo;
    a.qg = qg_d.get(), a.qg_stride = nh * 2 * HD, a.k = k_d.get(), a.k_stride = nkv * HD, a.v = v_d.get();
    a.v_stride = nkv * HD, a.q_norm = qw_d.get(), a.k_norm = kw_d.get(), a.kv = pages(kd.get(), vd.get());
    a.lane = lane, a.start_pos = start, a.n_tokens = T, a.scratch = scratch.get(), a.scratch_bytes = scratch.size();
    a.out = out.get(), a.out_stride = nh * HD;
    CUDA_OK(kernels::attn_prefill_prep(a, nullptr));
    CUDA_OK(kernels::attn_prefill(a, nullptr));
    std::vector<int32_t> lanes(T, lane), positions(T);
    std::iota(positions.begin(), positions.end(), start);
    DeviceBuffer<int32_t> lanes_d(lanes), pos_d(positions);
    const kernels::KvPages kv_dec = pages(kd_dec.get(), vd_dec.get());
    kernels::AttnPrepArgs pa{geo, qg_d.get(), nh * 2 * HD, k_d.get(), nkv * HD, v_d.get(), nkv * HD, qw_d.get(),
                             kw_d.get(), lanes_d.get(), pos_d.get(), kv_dec, q_dec.get(), nh * HD, T};
    CUDA_OK(kernels::attn_decode_prep(pa, nullptr));
    DeviceBuffer<float> dscratch(kernels::attn_decode_scratch_floats(T, nh, start + T));
    kernels::AttnDecodeArgs da{geo, q_dec.get(), nh * HD, qg_d.get(), nh * 2 * HD, lanes_d.get(), pos_d.get(), kv_dec,
                               out_dec.get(), nh * HD, T, start + T, dscratch.get(), dscratch.size()};
    CUDA_OK(kernels::attn_decode(da, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(kd.download() == kd_dec.download());
    CHECK(vd.download() == vd_dec.download());
    std::vector<double> got, dec;
    for (bf16 v : out.download()) got.push_back(to_f(v));
    for (bf16 v : out_dec.download()) dec.push_back(to_f(v));
    CHECK(std::all_of(got.begin(), got.end(), [](double v) { return std::isfinite(v); }));
    // K and V are rounded to bf16 for the tensor cores and P is bf16 in P V; the decode kernel keeps f32.
    CHECK(rel_l2(got, dec) < 6e-3);
    CHECK(out.guards_intact());
}

} // namespace

TEST_CASE("attention prefill reads fp8 and int8 KV pages like the decode kernels", "[attention_decode]") {
    require_gpu();
    for (kernels::KvDtype d : {kernels::KvDtype::Fp8, kernels::KvDtype::Int8}) {
        run_prefill_quant(d, 24, 4, 0, 100, 41);
        run_prefill_quant(d, 24, 4, 1000, 200, 42);
        run_prefill_quant(d, 16, 2, 63, 130, 43);
    }
}
