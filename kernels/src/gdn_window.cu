// ninfer::kernels - Gated DeltaNet verify windows: a lane's consecutive tokens in one conv and one recurrence launch (gdn_window.h).
#include "common.cuh"
#include "gdn_decode_v4.cuh"

namespace ninfer::kernels {

namespace detail {

// grid (ceil(conv_dim / 256), n_windows), 256 threads: one channel of one window per thread, the
// Wide4 conv's arithmetic per token. The window's inputs are loaded together after the PDL wait
// (with kSettled the taps and the 3 stored inputs before it); the history after each token goes
// to its snapshot, the last to the live slot.
template <bool kSettled>
__global__ void gdn_conv_window_kernel_t(GdnConvArgs a, GdnWindows ws) {
    ninfer_grid_launch_dependents();
    const GdnWindow& w = ws.w[blockIdx.y];
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = ch < a.conv_dim;
    const int n = w.n_tokens;
    float4 taps = make_float4(0.f, 0.f, 0.f, 0.f);
    __nv_bfloat16* st = a.conv_state + int64_t(w.slot) * 3 * a.conv_dim;
    __nv_bfloat16 x[4];
    auto read_state = [&] {
        taps = conv_taps(a, ch);
        x[0] = st[ch], x[1] = st[a.conv_dim + ch], x[2] = st[2 * a.conv_dim + ch];
    };
    if (kSettled && live) read_state();
    ninfer_grid_wait(); // PDL: the input rows come from the previous kernel
    if (!live) return;
    if (!kSettled) read_state();
    __nv_bfloat16 in[kGdnWindowMaxTokens];
#pragma unroll
    for (int j = 0; j < kGdnWindowMaxTokens; ++j)
        if (j < n) in[j] = a.qkv[int64_t(w.rows[j]) * a.qkv_stride + ch];
    __nv_bfloat16* snap = static_cast<__nv_bfloat16*>(w.conv_snap);
#pragma unroll
    for (int j = 0; j < kGdnWindowMaxTokens; ++j) {
        if (j >= n) break;
        x[3] = in[j];
        const float acc = conv_sum(taps, x);
        a.out[int64_t(w.rows[j]) * a.out_stride + ch] = __float2bfloat16(conv_activation(acc, a.exact));
        x[0] = x[1], x[1] = x[2], x[2] = x[3];
        __nv_bfloat16* dst = j + 1 < n ? snap + int64_t(j) * 3 * a.conv_dim : st;
        dst[ch] = x[0];
        dst[a.conv_dim + ch] = x[1];
        dst[2 * a.conv_dim + ch] = x[2];
    }
}

// grid (n_v_heads * 4, n_windows), 128 threads, clusters of a head's 4 blocks: Wide4's recurrence
// (gdn_decode_v4.cu) with the window's tokens looped inside. The column's 32 rows stay in
// registers from the one read of the live state to the last token; after token j they are stored
// to snapshot j (the last token: the live slot) as the delta rule produces them. Token j + 1's
// inputs are loaded before token j's arithmetic. The norm's partial sums cross the cluster once a
// token through two buffers of parts, alternating: a rank stores token j + 1's sums only after
// token j's barrier, which every peer reaches after reading its token j - 1 sums, so one barrier a
// token suffices (the first token's stores also wait for the start phase: every peer has started).
template <bool kSettled>
__global__ void __launch_bounds__(kGdnV4Threads) gdn_recurrent_window_kernel_t(GdnRecurrentArgs a, GdnWindows ws) {
    constexpr int D = kGdnHeadDim, R = kGdnV4Rows;
    __shared__ __align__(16) float qs[D];
    __shared__ __align__(16) float ks[D];
    __shared__ float red_k[4][kGdnV4Cols], red_q[4][kGdnV4Cols], nred[8], scal[2], parts[2][kGdnV4Split];
    ninfer_grid_launch_dependents();
    cluster_arrive_relaxed(); // the start phase: this block has started
    const GdnWindow& w = ws.w[blockIdx.y];
    const int h = blockIdx.x / kGdnV4Split, sr = blockIdx.x % kGdnV4Split, tid = threadIdx.x;
    const int v = tid % kGdnV4Cols, kq = tid / kGdnV4Cols, lane = tid & 31;
    const int col = sr * kGdnV4Cols + v;
    const int r = h / (a.n_v_heads / a.n_k_heads);
    const int n = w.n_tokens;
    const float a_log = a.a_log[h], dt_bias = a.dt_bias[h], norm_w = __bfloat162float(a.norm_w[col]);
    float* S = a.state + (int64_t(w.slot) * a.n_v_heads + h) * D * D + col;
    float s[R];
    if constexpr (kSettled) { // nothing running writes the state (GdnRecurrentArgs::state_settled)
#pragma unroll
        for (int i = 0; i < R; ++i) s[i] = S[(kq * R + i) * D];
    }
    ninfer_grid_wait(); // PDL: conv_out, z, a, b come from the previous kernels
    if constexpr (!kSettled) {
#pragma unroll
        for (int i = 0; i < R; ++i) s[i] = S[(kq * R + i) * D];
    }
    const int64_t snap_stride = int64_t(a.n_v_heads) * D * D;
    float* snap = w.state_snap + int64_t(h) * D * D + col;
    V4Token x = v4_load_token(a, w.rows[0], h, r, col, tid, kq);
    for (int j = 0; j < n; ++j) {
        const int t = w.rows[j];
        V4Token next = x;
        if (j + 1 < n) next = v4_load_token(a, w.rows[j + 1], h, r, col, tid, kq);
        const float2 beta_decay = v4_prepare(a, x, a_log, dt_bias, tid, kq, qs, ks, nred, scal);
        float* dst = j + 1 < n ? snap + j * snap_stride : S;
        const float o = v4_delta_rule(a, s, dst, qs, ks, beta_decay.x, beta_decay.y, x.vv, kq, v, red_k, red_q);
        const float osq = warp_sum(o * o);
        if (j == 0) cluster_wait_acquire(); // the start phase is complete: every peer's shared memory exists
        if (kq == 0 && lane < kGdnV4Split) store_to_rank(&parts[j & 1][sr], uint32_t(lane), osq);
        __syncwarp(); // the .aligned barriers below want the whole warp
        cluster_arrive_release(); // this block's token-j partial is in every rank
        cluster_wait_acquire();
        if (kq == 0) v4_store_y(a, t, h, col, o, parts[j & 1], norm_w, x.z);
        x = next;
    }
}

bool windows_ok(const GdnWindows& ws, bool conv_snap, bool state_snap) {
    if (ws.n < 1 || ws.n > kGdnWindowMax) return false;
    for (int i = 0; i < ws.n; ++i) {
        const GdnWindow& w = ws.w[i];
        if (w.slot < 0 || w.n_tokens < 1 || w.n_tokens > kGdnWindowMaxTokens) return false;
        if (w.n_tokens > 1 && ((conv_snap && !w.conv_snap) || (state_snap && !w.state_snap))) return false;
        for (int j = 0; j < w.n_tokens; ++j)
            if (w.rows[j] < 0) return false;
        for (int k = 0; k < i; ++k)
            if (ws.w[k].slot == w.slot) return false;
    }
    return true;
}

} // namespace detail

cudaError_t gdn_conv_window(const GdnConvArgs& a, const GdnWindows& windows, cudaStream_t stream) {
    if (!detail::conv_buffers_ok(a) || !detail::windows_ok(windows, true, false)) return cudaErrorInvalidValue;
    const dim3 grid(unsigned((a.conv_dim + 255) / 256), unsigned(windows.n));
    return launch_pdl(a.state_settled ? detail::gdn_conv_window_kernel_t<true> : detail::gdn_conv_window_kernel_t<false>,
                      grid, dim3(256), 0, stream, a, windows);
}

cudaError_t gdn_recurrent_window(const GdnRecurrentArgs& a, const GdnWindows& windows, cudaStream_t stream) {
    if (!detail::recurrent_buffers_ok(a) || !detail::windows_ok(windows, false, true)) return cudaErrorInvalidValue;
    return detail::launch_head_clusters(
        a.state_settled ? detail::gdn_recurrent_window_kernel_t<true> : detail::gdn_recurrent_window_kernel_t<false>,
        dim3(unsigned(a.n_v_heads * detail::kGdnV4Split), unsigned(windows.n)), detail::kGdnV4Split,
        detail::kGdnV4Threads, stream, a, windows);
}

} // namespace ninfer::kernels
