// ninfer::kernels - Gated DeltaNet decode, Wide4 path (the default): early state loads, 4 recurrence blocks per V head.
#include "common.cuh"
#include "gdn_decode_v4.cuh"

namespace ninfer::kernels::detail {

namespace {

// Cluster barrier halves and distributed shared memory stores (PTX ISA 8.0, sm_90).
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// v into the word at local shared address `local` of cluster rank `rank`.
__device__ __forceinline__ void store_to_rank(const void* local, uint32_t rank, float v) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(uint32_t(__cvta_generic_to_shared(local))), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

} // namespace

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
    a.out[int64_t(t) * a.out_stride + ch] = __float2bfloat16(silu(a.exact ? acc : bf16_round(acc)));
}

static_assert(kGdnV4Split == 4 && kGdnV4Cols == 32, "the output's sum of squares adds Split2's two pairs of warp sums");

template <bool kSettled>
__global__ void __launch_bounds__(kGdnV4Threads) gdn_recurrent_v4_kernel_t(GdnRecurrentArgs a) {
    constexpr int D = kGdnHeadDim, R = D / 4; // R rows per warp
    __shared__ __align__(16) float qs[D];
    __shared__ __align__(16) float ks[D];
    __shared__ float red_k[4][kGdnV4Cols], red_q[4][kGdnV4Cols], nred[8], scal[2], parts[kGdnV4Split];
    ninfer_grid_launch_dependents();
    cluster_arrive_relaxed(); // phase 1: this block has started (waited for before the DSMEM stores)
    const int h = blockIdx.x / kGdnV4Split, sr = blockIdx.x % kGdnV4Split, t = blockIdx.y, tid = threadIdx.x;
    const int v = tid % kGdnV4Cols, kq = tid / kGdnV4Cols, lane = tid & 31;
    const int col = sr * kGdnV4Cols + v;
    const int r = h / (a.n_v_heads / a.n_k_heads);
    const int key_dim = a.n_k_heads * D;
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
    // beta's and the decay's inputs with the row's loads, not after the norms' shuffles (one round trip).
    float b_in = 0.f, a_in = 0.f;
    if (tid == 0) b_in = a.b_f32 ? a.b_f32[int64_t(t) * a.b_stride + h] : __bfloat162float(a.b[int64_t(t) * a.b_stride + h]);
    else if (tid == 32) a_in = a.a_f32 ? a.a_f32[int64_t(t) * a.a_stride + h] : __bfloat162float(a.a[int64_t(t) * a.a_stride + h]);
    const float z = kq == 0 ? __bfloat162float(a.z[int64_t(t) * a.z_stride + h * D + col]) : 0.f; // output gate
    // q and k dim tid of QK head r (after conv and SiLU), and this column's v.
    const __nv_bfloat16* row = a.conv_out + int64_t(t) * a.conv_stride;
    const float uq = __bfloat162float(row[r * D + tid]);
    const float uk = __bfloat162float(row[key_dim + r * D + tid]);
    const float vv = __bfloat162float(row[2 * key_dim + h * D + col]);
    const float ssq = warp_sum(uq * uq), ssk = warp_sum(uk * uk);
    if (lane == 0) {
        nred[kq] = ssq; // Split2's warps 0-3 (q) ...
        nred[4 + kq] = ssk; // ... and 4-7 (k)
    }
    if (tid == 0) {
        const float sig = 1.f / (1.f + expf(-b_in));
        scal[0] = a.exact ? sig : bf16_round(sig);
    } else if (tid == 32) {
        const float x = a_in + dt_bias;
        const float softplus = x > 20.f ? x : log1pf(expf(x));
        scal[1] = expf(-expf(a_log) * softplus);
    }
    __syncthreads();
    qs[tid] = uq * rsqrtf(nred[0] + nred[1] + nred[2] + nred[3] + 1e-6f) * rsqrtf(float(D));
    ks[tid] = uk * rsqrtf(nred[4] + nred[5] + nred[6] + nred[7] + 1e-6f);
    __syncwarp(); // warp kq reads only rows [32 kq, 32 kq + 32): its own lanes' qs / ks
    const float beta = scal[0], decay = scal[1];

#pragma unroll
    for (int i = 0; i < R; ++i) s[i] *= decay;
    float part = 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) part = fmaf(s[i], ks[kq * R + i], part);
    red_k[kq][v] = part;
    __syncthreads();
    const float delta = beta * (vv - (red_k[0][v] + red_k[1][v] + red_k[2][v] + red_k[3][v]));
    part = 0.f;
#pragma unroll
    for (int i = 0; i < R; ++i) {
        s[i] = fmaf(ks[kq * R + i], delta, s[i]);
        S[(kq * R + i) * D] = s[i];
        part = fmaf(s[i], qs[kq * R + i], part);
    }
    red_q[kq][v] = part;
    __syncthreads();
    // Gated RMSNorm over the head's 128 outputs: warp 0 holds this block's 32.
    float o = 0.f;
    if (kq == 0) {
        o = red_q[0][v] + red_q[1][v] + red_q[2][v] + red_q[3][v];
        if (!a.exact) o = bf16_round(o);
    }
    const float osq = warp_sum(o * o);
    cluster_wait_acquire(); // phase 1 complete: every peer block has started, its shared memory exists
    if (kq == 0 && lane < kGdnV4Split) store_to_rank(&parts[sr], uint32_t(lane), osq);
    __syncwarp(); // the .aligned barriers below want the whole warp
    cluster_arrive_release(); // phase 2: this block's partial is in every rank
    cluster_wait_acquire();
    if (kq == 0) {
        float sum = 0.f;
        sum += parts[0] + parts[1];
        sum += parts[2] + parts[3];
        const float var = sum / float(D);
        const float nrm = a.exact ? o * rsqrtf(var + a.eps) : bf16_round(o * rsqrtf(var + a.eps));
        const float wn = a.exact ? norm_w * nrm : bf16_round(norm_w * nrm);
        a.y[int64_t(t) * a.y_stride + h * D + col] = __float2bfloat16(wn * silu(z));
    }
}

GdnConvKernel gdn_conv_v4_kernel(bool state_settled) {
    return state_settled ? gdn_conv_v4_kernel_t<true> : gdn_conv_v4_kernel_t<false>;
}

GdnRecurrentKernel gdn_recurrent_v4_kernel(bool state_settled) {
    return state_settled ? gdn_recurrent_v4_kernel_t<true> : gdn_recurrent_v4_kernel_t<false>;
}

} // namespace ninfer::kernels::detail
