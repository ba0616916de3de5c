// ninfer tests - time per layer of the decode sequence mixers (attention over the paged KV pool,
// GDN conv and recurrence, and the GDN of verify windows) at the 27B and 35B-A3B shapes. Prints RESULT lines; speed is not asserted
// (correctness is tests/gpu/attention_decode.cpp's and gdn_decode.cpp's job). Each timed graph runs
// the kernel over enough distinct layers' buffers (>= 128 MB) that they do not stay in the 50 MB L2,
// as in a model step where ~14 GB of weights stream between two attention layers.
#include "gpu_test_util.h"
#include "ninfer/kernels/attention_decode.h"
#include "ninfer/kernels/gdn_decode.h"
#include "ninfer/kernels/gdn_window.h"
#include "ninfer/kernels/spec_round.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Microseconds per layer of a graph that calls layer(l, stream) for l = 0 .. layers - 1: the median of
// 5 batches of 10 replays (graph_us, gpu_test_util.h), over layers.
double per_layer_us(int layers, const std::function<void(int, cudaStream_t)>& layer) {
    return graph_us([&](cudaStream_t s) { for (int l = 0; l < layers; ++l) layer(l, s); }, 5, 10) / layers;
}

int layers_for(double bytes_per_layer) { return std::clamp(int(128e6 / bytes_per_layer) + 1, 4, 64); }

void time_attention(const char* model, int nh, int nkv, int depth, int batch, kernels::KvDtype dtype,
                    kernels::AttnDecodePath path = kernels::AttnDecodePath::Split) {
    const int max_context = depth + 64, max_pages = (max_context + 63) / 64, hd = 256;
    const size_t page_bytes = kernels::kv_page_bytes(dtype, nkv, hd);
    const double kv_bytes = 2.0 * batch * (double(depth) / 64) * double(page_bytes); // K and V read per layer
    const int layers = layers_for(kv_bytes);
    std::vector<int32_t> table(size_t(batch) * max_pages), lanes(batch), positions(batch, depth - 1);
    for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
    for (int t = 0; t < batch; ++t) lanes[t] = t;
    DeviceBuffer<int32_t> table_d(table), lanes_d(lanes), pos_d(positions);
    Rng rng(7);
    DeviceBuffer<bf16> qg(rng.bf16s(size_t(batch) * nh * 2 * hd, -2.f, 2.f)), q(rng.bf16s(size_t(batch) * nh * hd, -2.f, 2.f));
    DeviceBuffer<bf16> out(size_t(batch) * nh * hd);
    const size_t scratch_floats = kernels::attn_decode_scratch_floats(batch, nh, max_context);
    DeviceBuffer<float> scratch(scratch_floats);
    std::vector<std::unique_ptr<DeviceBuffer<uint8_t>>> pools; // K then V per layer; 0x3c: small finite values
    for (int l = 0; l < 2 * layers; ++l)
        pools.push_back(std::make_unique<DeviceBuffer<uint8_t>>(size_t(batch) * max_pages * page_bytes, 0x3c));
    const double us = per_layer_us(layers, [&](int l, cudaStream_t s) {
        kernels::KvPages kv;
        kv.page_table = table_d.get();
        kv.max_pages = max_pages;
        kv.dtype = dtype;
        if (dtype == kernels::KvDtype::Bf16) {
            kv.k = reinterpret_cast<bf16*>(pools[2 * l]->get());
            kv.v = reinterpret_cast<bf16*>(pools[2 * l + 1]->get());
        } else {
            kv.k_q = pools[2 * l]->get();
            kv.v_q = pools[2 * l + 1]->get();
        }
        const kernels::AttnDecodeArgs da{{nh, nkv, hd, 64, 1e7f, 1e-6f, true}, q.get(), nh * hd, qg.get(), nh * 2 * hd,
                                         lanes_d.get(), pos_d.get(), kv, out.get(), nh * hd, batch, max_context,
                                         scratch.get(), scratch_floats};
        CUDA_OK(kernels::attn_decode_with(da, path, s));
    });
    std::printf("RESULT mixer_decode attention %s kv %s depth %d batch %d path %s: %.2f us/layer (partial + combine, "
                "graph of %d layers), %.1f MB KV, %.0f GB/s\n",
                model, dtype == kernels::KvDtype::Bf16 ? "bf16" : dtype == kernels::KvDtype::Fp8 ? "fp8" : "int8", depth,
                batch, path == kernels::AttnDecodePath::Staged ? "staged" : "split", us, layers, kv_bytes / 1e6,
                kv_bytes / us / 1e3);
}

// path Wide4 with settled = false: the early loads off, to tell them from the layout's share.
void time_gdn(const char* model, int hk, int hv, int batch, kernels::GdnDecodePath path, bool settled = true) {
    constexpr int D = kernels::kGdnHeadDim;
    const int conv_dim = 2 * hk * D + hv * D;
    const double state_bytes = double(batch) * hv * D * D * 4;
    const int layers = layers_for(2 * state_bytes);
    std::vector<int32_t> slot_h(batch);
    for (int t = 0; t < batch; ++t) slot_h[t] = t;
    DeviceBuffer<int32_t> slots(slot_h);
    Rng rng(9);
    DeviceBuffer<bf16> qkv(rng.bf16s(size_t(batch) * conv_dim, -2.f, 2.f)), conv_w(rng.bf16s(size_t(conv_dim) * 4, -0.5f, 0.5f));
    DeviceBuffer<bf16> conv_out(size_t(batch) * conv_dim), z(rng.bf16s(size_t(batch) * hv * D, -2.f, 2.f));
    DeviceBuffer<bf16> ab(rng.bf16s(size_t(batch) * hv, -2.f, 2.f)), norm_w(rng.bf16s(D, 0.5f, 1.5f)), y(size_t(batch) * hv * D);
    DeviceBuffer<float> a_log(std::vector<float>(hv, 0.5f)), dt_bias(std::vector<float>(hv, 0.1f));
    std::vector<std::unique_ptr<DeviceBuffer<float>>> states;
    std::vector<std::unique_ptr<DeviceBuffer<bf16>>> conv_states;
    for (int l = 0; l < layers; ++l) {
        states.push_back(std::make_unique<DeviceBuffer<float>>(size_t(batch) * hv * D * D, 0));
        conv_states.push_back(std::make_unique<DeviceBuffer<bf16>>(size_t(batch) * 3 * conv_dim, 0));
    }
    auto conv = [&](int l, cudaStream_t s) {
        kernels::GdnConvArgs ca{qkv.get(), conv_dim, conv_w.get(), conv_states[size_t(l)]->get(), slots.get(),
                                conv_out.get(), conv_dim, conv_dim, batch, true};
        ca.state_settled = settled; // as the recurrence's below
        CUDA_OK(kernels::gdn_conv_decode_with(ca, path, s));
    };
    auto recur = [&](int l, cudaStream_t s) {
        kernels::GdnRecurrentArgs ra;
        ra.conv_out = conv_out.get(), ra.conv_stride = conv_dim, ra.z = z.get(), ra.z_stride = hv * D;
        ra.a = ab.get(), ra.a_stride = hv, ra.b = ab.get(), ra.b_stride = hv, ra.a_log = a_log.get();
        ra.dt_bias = dt_bias.get(), ra.norm_w = norm_w.get(), ra.state = states[size_t(l)]->get(), ra.slots = slots.get();
        ra.y = y.get(), ra.y_stride = hv * D, ra.n_k_heads = hk, ra.n_v_heads = hv, ra.n_tokens = batch, ra.exact = true;
        ra.state_settled = settled; // a layer's state is written only by its own launch, in an earlier replay
        CUDA_OK(kernels::gdn_recurrent_decode_with(ra, path, s));
    };
    auto pair = [&](int l, cudaStream_t s) { // as the runner runs a layer
        conv(l, s);
        recur(l, s);
    };
    const double conv_us = per_layer_us(layers, conv);
    const double rec_us = per_layer_us(layers, recur);
    const double pair_us = per_layer_us(layers, pair);
    std::printf("RESULT mixer_decode gdn %s batch %d path %s: conv %.2f us/layer, recurrence %.2f us/layer, conv + "
                "recurrence %.2f us/layer (graphs of %d layers), %.1f MB state read + written, %.0f GB/s in the pair\n",
                model, batch, path == kernels::GdnDecodePath::Split2 ? "split2" : settled ? "wide4" : "wide4-late", conv_us,
                rec_us, pair_us, layers,
                2 * state_bytes / 1e6, 2 * state_bytes / pair_us / 1e3);
}

// The GDN of a verify forward: `lanes` windows of `tokens` tokens (rows token-major), each keeping
// a snapshot after its first tokens - 1. Before (session 19): per token index one conv and one
// recurrence launch over the lanes, then one copy launch of the snapshots; now: the window launches.
void time_gdn_window(const char* model, int hk, int hv, int lanes, int tokens) {
    constexpr int D = kernels::kGdnHeadDim;
    const int conv_dim = 2 * hk * D + hv * D, rows = lanes * tokens;
    const size_t state_floats = size_t(hv) * D * D, conv_elems = size_t(3) * conv_dim;
    const int layers = layers_for(double(lanes) * tokens * state_floats * 4);
    std::vector<int32_t> slot_h(static_cast<size_t>(lanes));
    for (int t = 0; t < lanes; ++t) slot_h[size_t(t)] = t;
    DeviceBuffer<int32_t> slots(slot_h);
    Rng rng(11);
    DeviceBuffer<bf16> qkv(rng.bf16s(size_t(rows) * conv_dim, -2.f, 2.f)), conv_w(rng.bf16s(size_t(conv_dim) * 4, -0.5f, 0.5f));
    DeviceBuffer<bf16> conv_out(size_t(rows) * conv_dim), z(rng.bf16s(size_t(rows) * hv * D, -2.f, 2.f));
    DeviceBuffer<float> ab(std::vector<float>(size_t(rows) * hv, 0.3f)), a_log(std::vector<float>(hv, 0.5f));
    DeviceBuffer<float> dt_bias(std::vector<float>(hv, 0.1f));
    DeviceBuffer<bf16> norm_w(rng.bf16s(D, 0.5f, 1.5f)), y(size_t(rows) * hv * D);
    struct Layer {
        DeviceBuffer<float> state, state_snap;
        DeviceBuffer<bf16> conv, conv_snap;
    };
    std::vector<std::unique_ptr<Layer>> L;
    const size_t snaps = size_t(lanes) * std::max(tokens - 1, 1);
    for (int l = 0; l < layers; ++l)
        L.push_back(std::unique_ptr<Layer>(new Layer{DeviceBuffer<float>(size_t(lanes) * state_floats, 0),
                                                     DeviceBuffer<float>(snaps * state_floats, 0),
                                                     DeviceBuffer<bf16>(size_t(lanes) * conv_elems, 0),
                                                     DeviceBuffer<bf16>(snaps * conv_elems, 0)}));
    auto args = [&](const Layer& x, int r0, int n) {
        kernels::GdnConvArgs ca{qkv.get() + int64_t(r0) * conv_dim, conv_dim, conv_w.get(), x.conv.get(), slots.get(),
                                conv_out.get() + int64_t(r0) * conv_dim, conv_dim, conv_dim, n, true};
        kernels::GdnRecurrentArgs ra;
        ra.conv_out = ca.out, ra.conv_stride = conv_dim, ra.z = z.get() + int64_t(r0) * hv * D, ra.z_stride = hv * D;
        ra.a_f32 = ab.get() + int64_t(r0) * hv, ra.b_f32 = ra.a_f32, ra.a_stride = ra.b_stride = hv;
        ra.a_log = a_log.get(), ra.dt_bias = dt_bias.get(), ra.norm_w = norm_w.get(), ra.state = x.state.get();
        ra.slots = slots.get(), ra.y = y.get() + int64_t(r0) * hv * D, ra.y_stride = hv * D;
        ra.n_k_heads = hk, ra.n_v_heads = hv, ra.n_tokens = n, ra.exact = true;
        return std::make_pair(ca, ra);
    };
    auto before = [&](int l, cudaStream_t s) {
        const Layer& x = *L[size_t(l)];
        for (int j = 0; j < tokens; ++j) {
            auto [ca, ra] = args(x, j * lanes, lanes);
            ca.state_settled = ra.state_settled = j == 0;
            CUDA_OK(kernels::gdn_conv_decode(ca, s));
            CUDA_OK(kernels::gdn_recurrent_decode(ra, s));
            if (j + 1 == tokens) break;
            std::vector<kernels::CopySpan> spans;
            for (int t = 0; t < lanes; ++t) {
                const size_t k = size_t(t) * (tokens - 1) + size_t(j);
                spans.push_back({x.conv_snap.get() + k * conv_elems, x.conv.get() + size_t(t) * conv_elems, conv_elems * 2});
                spans.push_back({x.state_snap.get() + k * state_floats, x.state.get() + size_t(t) * state_floats,
                                 state_floats * 4});
            }
            CUDA_OK(kernels::copy_spans(spans.data(), int(spans.size()), s));
        }
    };
    auto now = [&](int l, cudaStream_t s) {
        const Layer& x = *L[size_t(l)];
        auto [ca, ra] = args(x, 0, 0);
        ca.state_settled = ra.state_settled = true;
        kernels::GdnWindows ws;
        for (int t = 0; t < lanes; ++t) {
            kernels::GdnWindow& w = ws.w[ws.n++];
            w.slot = t, w.n_tokens = tokens;
            for (int j = 0; j < tokens; ++j) w.rows[j] = j * lanes + t;
            w.conv_snap = x.conv_snap.get() + size_t(t) * (tokens - 1) * conv_elems;
            w.state_snap = x.state_snap.get() + size_t(t) * (tokens - 1) * state_floats;
        }
        CUDA_OK(kernels::gdn_conv_window(ca, ws, s));
        CUDA_OK(kernels::gdn_recurrent_window(ra, ws, s));
    };
    const double before_us = per_layer_us(layers, before), now_us = per_layer_us(layers, now);
    std::printf("RESULT mixer_decode gdn_window %s lanes %d tokens %d: one-token launches + snapshot copies %.2f "
                "us/layer, window launches %.2f us/layer (graphs of %d layers)\n",
                model, lanes, tokens, before_us, now_us, layers);
}

} // namespace

TEST_CASE("decode mixers: time per layer at the 27B and 35B-A3B shapes (RESULT lines; speed is not asserted)",
          "[mixer_decode_timing]") {
    require_gpu();
    for (int batch : {1, 8}) {
        for (int depth : {512, 8192, 32768})
            for (kernels::AttnDecodePath path : {kernels::AttnDecodePath::Split, kernels::AttnDecodePath::Staged}) {
                time_attention("27B", 24, 4, depth, batch, kernels::KvDtype::Bf16, path);
                time_attention("35B-A3B", 16, 2, depth, batch, kernels::KvDtype::Bf16, path);
            }
        time_attention("27B", 24, 4, 8192, batch, kernels::KvDtype::Fp8);
        time_attention("27B", 24, 4, 8192, batch, kernels::KvDtype::Int8);
    }
    CUDA_OK(cudaGetLastError());
}

TEST_CASE("decode mixers: GDN time per layer of Split2 and Wide4 (RESULT lines; speed is not asserted)",
          "[mixer_decode_timing]") {
    require_gpu();
    for (int batch : {1, 8})
        for (kernels::GdnDecodePath path : {kernels::GdnDecodePath::Split2, kernels::GdnDecodePath::Wide4}) {
            time_gdn("27B", 16, 48, batch, path);
            time_gdn("35B-A3B", 16, 32, batch, path);
            if (path == kernels::GdnDecodePath::Wide4) time_gdn("27B", 16, 48, batch, path, false);
        }
    CUDA_OK(cudaGetLastError());
}

TEST_CASE("decode mixers: GDN of verify windows as per-token launches and copies or as window launches (RESULT "
          "lines; speed is not asserted)",
          "[mixer_decode_timing]") {
    require_gpu();
    for (int tokens : {2, 4, 6}) {
        time_gdn_window("27B", 16, 48, 1, tokens);
        time_gdn_window("35B-A3B", 16, 32, 1, tokens);
    }
    time_gdn_window("27B", 16, 48, 2, 4);
    time_gdn_window("27B", 16, 48, 4, 2);
    CUDA_OK(cudaGetLastError());
}
