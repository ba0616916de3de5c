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
// (gdn_decode_v4.cu, its arithmetic through the same pieces) with the window's tokens inside. Only
// the state carries from token to token, so the rest is taken out of the token loop:
// - first every token's inputs (loaded together), its q / k norms, beta and decay (one
//   __syncthreads for all), qs / ks per token in shared memory;
// - then the loop, the column's 32 rows in registers from the one read of the live state: decay
//   and k.S, one __syncthreads, delta, the update stored to snapshot j (the last token: the live
//   slot) as it is produced, and the q.S partials kept per token (red_k alternates two buffers: a
//   warp writes token j + 2's only after token j + 1's barrier, which every warp passes after
//   reading token j's);
// - then every token's output: warp 0's o and sums of squares, one exchange of the norm's partials
//   across the cluster (Wide4's two barrier phases, once for the window), and y.
template <bool kSettled>
__global__ void __launch_bounds__(kGdnV4Threads) gdn_recurrent_window_kernel_t(GdnRecurrentArgs a, GdnWindows ws) {
    constexpr int D = kGdnHeadDim, R = kGdnV4Rows, T = kGdnWindowMaxTokens;
    __shared__ __align__(16) float qs[T][D];
    __shared__ __align__(16) float ks[T][D];
    __shared__ float red_k[2][4][kGdnV4Cols], red_q[T][4][kGdnV4Cols], vs[T][kGdnV4Cols], zs[T][kGdnV4Cols];
    __shared__ float nred[T][8], scal[T][2], parts[T][kGdnV4Split];
    ninfer_grid_launch_dependents();
    cluster_arrive_relaxed(); // phase 1: this block has started (waited for before the DSMEM stores)
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
    // Every token's inputs: raw q / k to qs / ks, v and the gate to vs / zs (warp 0), beta's and the
    // decay's inputs to scal (threads 0 and 32); each slot is read back by the thread that wrote it.
#pragma unroll
    for (int j = 0; j < T; ++j) {
        if (j >= n) break;
        const V4Token x = v4_load_token(a, w.rows[j], h, r, col, tid, kq);
        qs[j][tid] = x.uq;
        ks[j][tid] = x.uk;
        if (kq == 0) vs[j][v] = x.vv, zs[j][v] = x.z;
        if (tid == 0) scal[j][0] = x.b_in;
        else if (tid == 32) scal[j][1] = x.a_in;
    }
#pragma unroll
    for (int j = 0; j < T; ++j) {
        if (j >= n) break;
        const float uq = qs[j][tid], uk = ks[j][tid];
        const float ssq = warp_sum(uq * uq), ssk = warp_sum(uk * uk);
        if (lane == 0) nred[j][kq] = ssq, nred[j][4 + kq] = ssk;
        if (tid == 0) scal[j][0] = v4_beta(scal[j][0], a.exact);
        else if (tid == 32) scal[j][1] = v4_decay(scal[j][1], dt_bias, a_log);
    }
    __syncthreads();
    for (int j = 0; j < n; ++j) {
        qs[j][tid] = v4_q(qs[j][tid], nred[j]);
        ks[j][tid] = v4_k(ks[j][tid], nred[j] + 4);
    }
    __syncwarp(); // warp kq reads only rows [32 kq, 32 kq + 32): its own lanes' qs / ks
    const int64_t snap_stride = int64_t(a.n_v_heads) * D * D;
    float* snap = w.state_snap + int64_t(h) * D * D + col;
    for (int j = 0; j < n; ++j) {
        float(&rk)[4][kGdnV4Cols] = red_k[j & 1];
        rk[kq][v] = v4_decay_ks(s, ks[j], kq, scal[j][1]);
        __syncthreads();
        const float delta = v4_delta(scal[j][0], vs[j][v], rk, v);
        red_q[j][kq][v] = v4_update(s, j + 1 < n ? snap + j * snap_stride : S, ks[j], qs[j], kq, delta);
    }
    __syncthreads(); // every token's q.S partials
    cluster_wait_acquire(); // phase 1 complete: every peer block has started, its shared memory exists
    if (kq == 0)
        for (int j = 0; j < n; ++j) {
            const float o = v4_output(red_q[j], v, a.exact);
            const float osq = warp_sum(o * o);
            if (lane < kGdnV4Split) store_to_rank(&parts[j][sr], uint32_t(lane), osq);
        }
    __syncwarp(); // the .aligned barriers below want the whole warp
    cluster_arrive_release(); // phase 2: this block's partials are in every rank
    cluster_wait_acquire();
    if (kq == 0)
        for (int j = 0; j < n; ++j)
            v4_store_y(a, w.rows[j], h, col, v4_output(red_q[j], v, a.exact), parts[j], norm_w, zs[j][v]);
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
