// ninfer::kernels - Gated DeltaNet decode, Wide4 path (the default): early state loads, 4 recurrence blocks per V head.
#include "common.cuh"
#include "gdn_decode_v4.cuh"

namespace ninfer::kernels::detail {

// grid (n_v_heads * 4, n_tokens), 128 threads, clusters of a head's 4 blocks. Block sr (= its cluster
// rank) owns state columns [32 sr, 32 sr + 32); thread (v = lane, kq = warp) keeps rows [32 kq, 32 kq +
// 32) of column 32 sr + v in registers, so every product and sum is the Split2 kernel's, in its
// order: the k.S and q.S chains run over the same 32 rows, the 4 row-quarter partials are added in
// kq order, the q / k norms are the same 8 warp sums, and the output's sum of squares is
// (0 + (g0 + g1)) + (g2 + g3) over the 32-column groups (Split2: rank 0's warps 0 + 1, then rank 1's).
// What differs is only the schedule:
// - kSettled: the slot and the 16 KB of state are loaded before the PDL wait, so the state's HBM
//   round trip overlaps the previous kernels (in the model: the GDN in_proj GEMV and the conv).
// - Each warp normalises its own 32 q / k rows (the rows its chains read), so only the norms' warp
//   sums and beta / decay cross warps (one __syncthreads); beta and the decay come from two threads
//   in two warps, side by side; the k.S and q.S partials use two buffers (no barrier between).
// - The norm's 4 partial sums are stored into every rank's shared memory and cross one cluster
//   barrier (release / acquire); the barrier's first phase is arrived at the start and waited just
//   before the stores, so every peer has started and the exchange needs no second barrier: after it
//   no block touches a peer's shared memory, so blocks may leave in any order.
// Split2's conv (gdn_decode.cu gdn_conv_decode_kernel) with, when kSettled, the constant taps, the slot
// and the 3 conv-state inputs read before the PDL wait: only the new input row waits for the in_proj.
template <bool kSettled>
__global__ void gdn_conv_v4_kernel_t(GdnConvArgs a) {
    ninfer_grid_launch_dependents();
    const int t = blockIdx.y;
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = ch < a.conv_dim;
    float4 w = make_float4(0.f, 0.f, 0.f, 0.f);
    __nv_bfloat16* st = nullptr;
    __nv_bfloat16 x[4];
    auto read_state = [&] {
        st = a.conv_state + int64_t(a.slots[t]) * 3 * a.conv_dim;
        x[0] = st[ch], x[1] = st[a.conv_dim + ch], x[2] = st[2 * a.conv_dim + ch];
    };
    if (kSettled && live) {
        w = conv_taps(a, ch);
        read_state();
    }
    ninfer_grid_wait(); // PDL: the input row comes from the previous kernel
    if (!live) return;
    if (!kSettled) {
        w = conv_taps(a, ch);
        read_state();
    }
    x[3] = a.qkv[int64_t(t) * a.qkv_stride + ch];
    const float acc = conv_sum(w, x);
    st[ch] = x[1];
    st[a.conv_dim + ch] = x[2];
    st[2 * a.conv_dim + ch] = x[3];
    a.out[int64_t(t) * a.out_stride + ch] = __float2bfloat16(conv_activation(acc, a.exact));
}

static_assert(kGdnV4Split == 4 && kGdnV4Cols == 32, "the output's sum of squares adds Split2's two pairs of warp sums");

template <bool kSettled>
__global__ void __launch_bounds__(kGdnV4Threads) gdn_recurrent_v4_kernel_t(GdnRecurrentArgs a) {
    constexpr int D = kGdnHeadDim, R = kGdnV4Rows;
    __shared__ __align__(16) float qs[D];
    __shared__ __align__(16) float ks[D];
    __shared__ float red_k[4][kGdnV4Cols], red_q[4][kGdnV4Cols], nred[8], scal[2], parts[kGdnV4Split];
    ninfer_grid_launch_dependents();
    cluster_arrive_relaxed(); // phase 1: this block has started (waited for before the DSMEM stores)
    const int h = blockIdx.x / kGdnV4Split, sr = blockIdx.x % kGdnV4Split, t = blockIdx.y, tid = threadIdx.x;
    const int v = tid % kGdnV4Cols, kq = tid / kGdnV4Cols, lane = tid & 31;
    const int col = sr * kGdnV4Cols + v;
    const int r = h / (a.n_v_heads / a.n_k_heads);
    // Weights before the wait (constant).
    const float a_log = a.a_log[h], dt_bias = a.dt_bias[h], norm_w = __bfloat162float(a.norm_w[col]);
    float s[R];
    float* S = nullptr;
    if constexpr (kSettled) { // nothing running writes the slot or the state (GdnRecurrentArgs::state_settled)
        S = a.state + (int64_t(a.slots[t]) * a.n_v_heads + h) * D * D + col;
#pragma unroll
        for (int i = 0; i < R; ++i) s[i] = S[(kq * R + i) * D];
    }
    ninfer_grid_wait(); // PDL: conv_out, z, a, b come from the previous kernels
    if constexpr (!kSettled) {
        S = a.state + (int64_t(a.slots[t]) * a.n_v_heads + h) * D * D + col;
#pragma unroll
        for (int i = 0; i < R; ++i) s[i] = S[(kq * R + i) * D];
    }
    const V4Token x = v4_load_token(a, t, h, r, col, tid, kq);
    const float2 beta_decay = v4_prepare(a, x, a_log, dt_bias, tid, kq, qs, ks, nred, scal);
    const float o = v4_delta_rule(a, s, S, qs, ks, beta_decay.x, beta_decay.y, x.vv, kq, v, red_k, red_q);
    const float osq = warp_sum(o * o);
    cluster_wait_acquire(); // phase 1 complete: every peer block has started, its shared memory exists
    if (kq == 0 && lane < kGdnV4Split) store_to_rank(&parts[sr], uint32_t(lane), osq);
    __syncwarp(); // the .aligned barriers below want the whole warp
    cluster_arrive_release(); // phase 2: this block's partial is in every rank
    cluster_wait_acquire();
    if (kq == 0) v4_store_y(a, t, h, col, o, parts, norm_w, x.z);
}

GdnConvKernel gdn_conv_v4_kernel(bool state_settled) {
    return state_settled ? gdn_conv_v4_kernel_t<true> : gdn_conv_v4_kernel_t<false>;
}

GdnRecurrentKernel gdn_recurrent_v4_kernel(bool state_settled) {
    return state_settled ? gdn_recurrent_v4_kernel_t<true> : gdn_recurrent_v4_kernel_t<false>;
}

} // namespace ninfer::kernels::detail
