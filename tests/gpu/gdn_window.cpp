// ninfer tests - GDN verify windows (kernels/gdn_window.h) against successive one-token decode
// launches, bit for bit: every token's conv output and y, each window's snapshots, and the final
// live conv history and recurrent state of every slot; bf16 (Wide4) and the f32 check mode.
#include "gpu_test_util.h"
#include "ninfer/kernels/gdn_window.h"

#include <cstring>
#include <memory>
#include <numeric>

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr int D = kernels::kGdnHeadDim;

// The windows of one launch: window w is `sizes[w]` tokens of slot slot[w] at rows row[w][j], rows
// spread over [0, total) (a shuffle when asked, else token-major as the runner lays them out).
struct Layout {
    std::vector<int> sizes, slot;
    std::vector<std::vector<int>> row;
    int total = 0, n_slots = 0;
    Layout(const std::vector<int>& window_sizes, bool shuffle, Rng& rng) : sizes(window_sizes) {
        total = std::accumulate(sizes.begin(), sizes.end(), 0);
        n_slots = int(sizes.size()) + 1; // one slot no window touches
        for (size_t w = 0; w < sizes.size(); ++w) slot.push_back(n_slots - 1 - int(w)); // slot != window index
        std::vector<int> order(static_cast<size_t>(total));
        std::iota(order.begin(), order.end(), 0);
        if (shuffle) std::shuffle(order.begin(), order.end(), rng.gen);
        row.resize(sizes.size());
        const int longest = *std::max_element(sizes.begin(), sizes.end());
        int r = 0;
        for (int j = 0; j < longest; ++j)
            for (size_t w = 0; w < sizes.size(); ++w)
                if (j < sizes[w]) row[w].push_back(order[size_t(r++)]);
    }
};

template <class T> bool same(const DeviceBuffer<T>& x, const DeviceBuffer<T>& y) {
    const auto hx = x.download(), hy = y.download();
    return hx.size() == hy.size() && std::memcmp(hx.data(), hy.data(), hx.size() * sizeof(T)) == 0;
}

// The snapshots of each window ([size - 1] conv histories and states), one set per run.
template <class C> struct Snapshots {
    std::vector<std::unique_ptr<DeviceBuffer<C>>> conv;
    std::vector<std::unique_ptr<DeviceBuffer<float>>> state;
    Snapshots(const Layout& l, int conv_dim, int hv) {
        for (int n : l.sizes) {
            const size_t k = size_t(std::max(n - 1, 1));
            conv.push_back(std::make_unique<DeviceBuffer<C>>(k * 3 * conv_dim, 0x5a));
            state.push_back(std::make_unique<DeviceBuffer<float>>(k * size_t(hv) * D * D, 0x5a));
        }
    }
    kernels::GdnWindows windows(const Layout& l) const {
        kernels::GdnWindows ws;
        for (size_t w = 0; w < l.sizes.size(); ++w) {
            kernels::GdnWindow& k = ws.w[ws.n++];
            k.slot = l.slot[w];
            k.n_tokens = l.sizes[w];
            std::copy(l.row[w].begin(), l.row[w].end(), k.rows);
            k.conv_snap = conv[w]->get();
            k.state_snap = state[w]->get();
        }
        return ws;
    }
};

// After one-token launch j of window w: its slot's states into snapshot j (the reference's copies).
template <class C>
void take_snapshot(const Snapshots<C>& s, size_t w, int j, const C* conv, const float* state, int slot, int conv_dim,
                   int hv) {
    const size_t cb = size_t(3) * conv_dim * sizeof(C), sb = size_t(hv) * D * D * sizeof(float);
    CUDA_OK(cudaMemcpy(reinterpret_cast<uint8_t*>(s.conv[w]->get()) + size_t(j) * cb,
                       reinterpret_cast<const uint8_t*>(conv) + size_t(slot) * cb, cb, cudaMemcpyDeviceToDevice));
    CUDA_OK(cudaMemcpy(reinterpret_cast<uint8_t*>(s.state[w]->get()) + size_t(j) * sb,
                       reinterpret_cast<const uint8_t*>(state) + size_t(slot) * sb, sb, cudaMemcpyDeviceToDevice));
}

// The reference's and the window run's copy of one buffer: the same bytes, nothing written outside.
template <class T> void check_pair(const DeviceBuffer<T>& want, const DeviceBuffer<T>& got) {
    CHECK(same(want, got));
    CHECK(got.guards_intact());
}

template <class C> void check_snapshots(const Snapshots<C>& want, const Snapshots<C>& got, const Layout& l) {
    for (size_t w = 0; w < l.sizes.size(); ++w) {
        INFO("window " << w << " of " << l.sizes[w] << " tokens"); // one token: both keep their fill
        check_pair(*want.conv[w], *got.conv[w]);
        check_pair(*want.state[w], *got.state[w]);
    }
}

// The serving pair (Wide4 conv + recurrence): the window launches against one-token launches of
// each window's tokens in order (bf16 a / b, or the runner's f32 a / b with exact).
void compare_bf16(int hk, int hv, const std::vector<int>& sizes, bool exact, bool settled, bool shuffle, uint64_t seed) {
    Rng rng(seed);
    const Layout l(sizes, shuffle, rng);
    INFO("hk " << hk << " hv " << hv << " windows " << sizes.size() << " first " << sizes[0] << " exact " << exact
               << " settled " << settled << " shuffle " << shuffle);
    const int conv_dim = 2 * hk * D + hv * D, T = l.total;
    const int64_t z_ld = int64_t(hv) * D, ab_ld = hv + 4;
    std::vector<float> a_log_h, dt_h, s0(size_t(l.n_slots) * hv * D * D), a32(size_t(T) * ab_ld), b32(a32.size());
    for (int h = 0; h < hv; ++h) {
        a_log_h.push_back(std::log(rng.uniform(0.5f, 16.f)));
        dt_h.push_back(rng.uniform(-1.f, 1.f));
    }
    for (float& e : s0) e = rng.uniform(-0.3f, 0.3f);
    for (size_t i = 0; i < a32.size(); ++i) a32[i] = rng.uniform(-4.f, 4.f), b32[i] = rng.uniform(-4.f, 4.f);
    const auto c0 = rng.bf16s(size_t(l.n_slots) * 3 * conv_dim, -2.f, 2.f);
    DeviceBuffer<float> a_log(a_log_h), dt_bias(dt_h), a_f(a32), b_f(b32), state_ref(s0), state_win(s0);
    DeviceBuffer<bf16> norm_w(rng.bf16s(D, 0.5f, 1.5f)), conv_w(rng.bf16s(size_t(conv_dim) * 4, -0.6f, 0.6f));
    DeviceBuffer<bf16> conv_ref(c0), conv_win(c0);
    DeviceBuffer<bf16> qkv(rng.bf16s(size_t(T) * conv_dim, -2.f, 2.f)), z(rng.bf16s(size_t(T) * z_ld, -3.f, 3.f));
    DeviceBuffer<bf16> a(rng.bf16s(size_t(T) * ab_ld, -4.f, 4.f)), b(rng.bf16s(size_t(T) * ab_ld, -4.f, 4.f));
    DeviceBuffer<bf16> out_ref(size_t(T) * conv_dim, 0xff), out_win(size_t(T) * conv_dim, 0xff);
    DeviceBuffer<bf16> y_ref(size_t(T) * z_ld, 0xff), y_win(size_t(T) * z_ld, 0xff);
    DeviceBuffer<int32_t> slots(l.slot);
    Snapshots<bf16> snap_ref(l, conv_dim, hv), snap_win(l, conv_dim, hv);
    auto args = [&](bf16* conv_state, bf16* out, float* state, bf16* y) {
        kernels::GdnConvArgs ca{qkv.get(), conv_dim, conv_w.get(), conv_state, nullptr, out, conv_dim, conv_dim, 0, exact};
        kernels::GdnRecurrentArgs ra;
        ra.conv_out = out, ra.conv_stride = conv_dim, ra.z = z.get(), ra.z_stride = z_ld;
        ra.a = a.get(), ra.b = b.get(), ra.a_stride = ra.b_stride = ab_ld;
        if (exact) ra.a_f32 = a_f.get(), ra.b_f32 = b_f.get(), ra.a = ra.b = nullptr;
        ra.exact = exact, ra.a_log = a_log.get(), ra.dt_bias = dt_bias.get(), ra.norm_w = norm_w.get();
        ra.state = state, ra.y = y, ra.y_stride = z_ld, ra.n_k_heads = hk, ra.n_v_heads = hv;
        return std::make_pair(ca, ra);
    };
    // Reference: token j of window w as one one-token launch pair at its row (the row's inputs and
    // outputs offset, the slot from the slots array), snapshots copied after each.
    const int longest = *std::max_element(sizes.begin(), sizes.end());
    for (int j = 0; j < longest; ++j)
        for (size_t w = 0; w < sizes.size(); ++w) {
            if (j >= sizes[w]) continue;
            auto [ca, ra] = args(conv_ref.get(), out_ref.get(), state_ref.get(), y_ref.get());
            const int64_t t = l.row[w][size_t(j)];
            ca.qkv += t * conv_dim, ca.out += t * conv_dim, ca.slots = slots.get() + w, ca.n_tokens = 1;
            ra.conv_out += t * conv_dim, ra.z += t * z_ld, ra.y += t * z_ld, ra.slots = slots.get() + w, ra.n_tokens = 1;
            if (exact) ra.a_f32 += t * ab_ld, ra.b_f32 += t * ab_ld;
            else ra.a += t * ab_ld, ra.b += t * ab_ld;
            CUDA_OK(kernels::gdn_conv_decode(ca, nullptr));
            CUDA_OK(kernels::gdn_recurrent_decode(ra, nullptr));
            if (j + 1 < sizes[w]) take_snapshot(snap_ref, w, j, conv_ref.get(), state_ref.get(), l.slot[w], conv_dim, hv);
        }
    auto [ca, ra] = args(conv_win.get(), out_win.get(), state_win.get(), y_win.get());
    ca.state_settled = ra.state_settled = settled;
    const kernels::GdnWindows ws = snap_win.windows(l);
    CUDA_OK(kernels::gdn_conv_window(ca, ws, nullptr));
    CUDA_OK(kernels::gdn_recurrent_window(ra, ws, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    check_pair(out_ref, out_win), check_pair(y_ref, y_win);
    check_pair(conv_ref, conv_win), check_pair(state_ref, state_win);
    check_snapshots(snap_ref, snap_win, l);
}

// The f32 check mode's pair: gdn_decode_f32_window against gdn_decode_f32 token by token.
void compare_f32(int hk, int hv, const std::vector<int>& sizes, bool shuffle, uint64_t seed) {
    Rng rng(seed);
    const Layout l(sizes, shuffle, rng);
    INFO("f32 hk " << hk << " hv " << hv << " windows " << sizes.size() << " first " << sizes[0] << " shuffle " << shuffle);
    const int conv_dim = 2 * hk * D + hv * D, T = l.total;
    const int64_t z_ld = int64_t(hv) * D, ab_ld = hv + 4;
    auto floats = [&](size_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (float& e : v) e = rng.uniform(lo, hi);
        return v;
    };
    std::vector<float> a_log_h;
    for (int h = 0; h < hv; ++h) a_log_h.push_back(std::log(rng.uniform(0.5f, 16.f)));
    const auto s0 = floats(size_t(l.n_slots) * hv * D * D, -0.3f, 0.3f);
    const auto c0 = floats(size_t(l.n_slots) * 3 * conv_dim, -2.f, 2.f);
    DeviceBuffer<float> a_log(a_log_h), dt_bias(floats(size_t(hv), -1.f, 1.f)), norm_w(floats(D, 0.5f, 1.5f));
    DeviceBuffer<float> conv_w(floats(size_t(conv_dim) * 4, -0.6f, 0.6f)), state_ref(s0), state_win(s0), conv_ref(c0),
        conv_win(c0);
    DeviceBuffer<float> qkv(floats(size_t(T) * conv_dim, -2.f, 2.f)), z(floats(size_t(T) * z_ld, -3.f, 3.f));
    DeviceBuffer<float> a(floats(size_t(T) * ab_ld, -4.f, 4.f)), b(floats(size_t(T) * ab_ld, -4.f, 4.f));
    DeviceBuffer<float> out_ref(size_t(T) * conv_dim, 0xff), out_win(size_t(T) * conv_dim, 0xff);
    DeviceBuffer<float> y_ref(size_t(T) * z_ld, 0xff), y_win(size_t(T) * z_ld, 0xff);
    DeviceBuffer<int32_t> slots(l.slot);
    Snapshots<float> snap_ref(l, conv_dim, hv), snap_win(l, conv_dim, hv);
    auto args = [&](float* conv_state, float* out, float* state, float* y) {
        kernels::GdnF32Args g;
        g.qkv = qkv.get(), g.qkv_stride = conv_dim, g.z = z.get(), g.z_stride = z_ld, g.a = a.get(), g.b = b.get();
        g.ab_stride = ab_ld, g.conv_w = conv_w.get(), g.conv_state = conv_state, g.conv_out = out;
        g.conv_out_stride = conv_dim, g.a_log = a_log.get(), g.dt_bias = dt_bias.get(), g.norm_w = norm_w.get();
        g.state = state, g.y = y, g.y_stride = z_ld, g.n_k_heads = hk, g.n_v_heads = hv, g.conv_dim = conv_dim;
        return g;
    };
    const int longest = *std::max_element(sizes.begin(), sizes.end());
    for (int j = 0; j < longest; ++j)
        for (size_t w = 0; w < sizes.size(); ++w) {
            if (j >= sizes[w]) continue;
            kernels::GdnF32Args g = args(conv_ref.get(), out_ref.get(), state_ref.get(), y_ref.get());
            const int64_t t = l.row[w][size_t(j)];
            g.qkv += t * conv_dim, g.conv_out += t * conv_dim, g.z += t * z_ld, g.y += t * z_ld;
            g.a += t * ab_ld, g.b += t * ab_ld, g.slots = slots.get() + w, g.n_tokens = 1;
            CUDA_OK(kernels::gdn_decode_f32(g, nullptr));
            if (j + 1 < sizes[w]) take_snapshot(snap_ref, w, j, conv_ref.get(), state_ref.get(), l.slot[w], conv_dim, hv);
        }
    CUDA_OK(kernels::gdn_decode_f32_window(args(conv_win.get(), out_win.get(), state_win.get(), y_win.get()),
                                           snap_win.windows(l), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    check_pair(out_ref, out_win), check_pair(y_ref, y_win);
    check_pair(conv_ref, conv_win), check_pair(state_ref, state_win);
    check_snapshots(snap_ref, snap_win, l);
}

// The verify rounds' layouts: one lane's window of 1..6 tokens, several lanes of different sizes
// (a forward's 8 rows, and the kernel's limits: 8 windows, 8 tokens).
const std::vector<std::vector<int>> kLayouts = {{1}, {2}, {3}, {4}, {5}, {6}, {4, 1, 3}, {2, 2, 2, 2},
                                                {1, 6, 2, 5, 3, 4}, {1, 1, 1, 1, 1, 1, 1, 1}, {8, 3}};

} // namespace

TEST_CASE("gdn window equals one-token Wide4 launches bit for bit (27B and 35B-A3B shapes, 1..8 tokens, lanes)",
          "[gdn_window]") {
    require_gpu();
    uint64_t seed = 600;
    for (const auto& sizes : kLayouts)
        for (bool exact : {true, false}) { // exact with f32 a / b: the runner's mode
            compare_bf16(16, 48, sizes, exact, exact, sizes.size() > 2, ++seed); // 27B
            compare_bf16(16, 32, sizes, exact, !exact, sizes.size() == 2, ++seed); // 35B-A3B
        }
    compare_bf16(2, 8, {3, 5}, true, true, true, 651); // 4 V heads per QK head
    compare_bf16(1, 1, {2, 1, 4}, false, false, false, 652); // one head
}

TEST_CASE("gdn window equals one-token launches bit for bit in the f32 check mode", "[gdn_window]") {
    require_gpu();
    uint64_t seed = 700;
    for (const auto& sizes : kLayouts) {
        compare_f32(16, 48, sizes, sizes.size() > 2, ++seed); // 27B
        compare_f32(16, 32, sizes, false, ++seed);            // 35B-A3B
    }
    compare_f32(2, 8, {3, 5}, true, 751);
}

TEST_CASE("gdn window refuses what it cannot run", "[gdn_window]") {
    require_gpu();
    const int conv_dim = (2 + 4) * D;
    DeviceBuffer<bf16> dummy(size_t(4) * conv_dim);
    DeviceBuffer<float> f(size_t(4) * D * D);
    kernels::GdnConvArgs c{dummy.get(), conv_dim, dummy.get(), dummy.get(), nullptr, dummy.get(), conv_dim, conv_dim, 0};
    kernels::GdnRecurrentArgs r;
    r.conv_out = r.z = r.a = r.b = r.norm_w = r.y = dummy.get(), r.a_log = r.dt_bias = r.state = f.get();
    r.n_k_heads = 1, r.n_v_heads = 2;
    kernels::GdnF32Args g;
    g.conv_state = g.conv_out = g.state = g.y = f.get();
    g.qkv = g.z = g.a = g.b = g.conv_w = g.a_log = g.dt_bias = g.norm_w = f.get();
    g.n_k_heads = 1, g.n_v_heads = 2, g.conv_dim = (2 + 2) * D;
    auto refused = [&](const kernels::GdnWindows& ws) {
        return kernels::gdn_conv_window(c, ws, nullptr) == cudaErrorInvalidValue &&
               kernels::gdn_recurrent_window(r, ws, nullptr) == cudaErrorInvalidValue &&
               kernels::gdn_decode_f32_window(g, ws, nullptr) == cudaErrorInvalidValue;
    };
    kernels::GdnWindows ws;
    CHECK(refused(ws)); // no windows
    ws.n = 1, ws.w[0].n_tokens = 0;
    CHECK(refused(ws)); // an empty window
    ws.w[0].n_tokens = kernels::kGdnWindowMaxTokens + 1;
    CHECK(refused(ws)); // too long
    ws.w[0].n_tokens = 2;
    CHECK(refused(ws)); // two tokens and no snapshots
    ws.w[0].conv_snap = dummy.get(), ws.w[0].state_snap = f.get(), ws.w[0].rows[1] = -1;
    CHECK(refused(ws)); // a negative row
    ws.w[0].rows[1] = 1, ws.n = 2, ws.w[1] = ws.w[0];
    CHECK(refused(ws)); // two windows of one slot
    ws.n = kernels::kGdnWindowMax + 1;
    CHECK(refused(ws)); // too many windows
    CHECK(cudaGetLastError() == cudaSuccess);
}
