// ninfer::kernels - Gated DeltaNet prefill: conv/norm prep, conv history, column-parallel scan, gated norm.
#include "common.cuh"
#include "ninfer/kernels/gdn_prefill.h"
#include "prefill_async.cuh"

namespace ninfer::kernels {

namespace detail {

constexpr int D = kGdnHeadDim;
constexpr int kScanTile = 16; // tokens staged in shared memory per step of the scan

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

// Scratch regions (bytes): fp32 q/k after l2norm [t][2][Hk][128]; bf16 v [t][Hv*128]; fp32 decay
// and beta [2][Hv][tp] (tp = T rounded up to the scan tile so tiles copy in 16-byte pieces);
// fp32 scan output o [t][Hv*128].
struct GdnScratch {
    size_t qk = 0, v = 0, gb = 0, o = 0, total = 0;
    int tp = 0;
    GdnScratch(int T, int hk, int hv) {
        tp = (T + kScanTile - 1) / kScanTile * kScanTile;
        v = align256(size_t(T) * 2 * hk * D * sizeof(float));
        gb = v + align256(size_t(T) * hv * D * sizeof(__nv_bfloat16));
        o = gb + align256(size_t(2) * hv * tp * sizeof(float));
        total = o + align256(size_t(T) * hv * D * sizeof(float));
    }
};

struct PrepPtrs {
    float* qk;
    __nv_bfloat16* v;
    float* gb;
    int tp;
};

// grid (2 Hk + Hv, T), 128 threads: one q, k or v head of one token, one channel per thread.
__global__ void __launch_bounds__(D) gdn_prefill_prep_kernel(GdnPrefillArgs a, PrepPtrs p) {
    __shared__ float red[32];
    const int t = blockIdx.y, g = blockIdx.x, tid = threadIdx.x, ch = g * D + tid;
    const __nv_bfloat16* hist = a.conv_state + int64_t(a.slot) * 3 * a.conv_dim;
    const __nv_bfloat16* w = a.conv_w + int64_t(ch) * 4;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int m = t - 3 + j; // input position; negative ones come from the history
        const __nv_bfloat16 in = m >= 0 ? a.qkv[int64_t(m) * a.qkv_stride + ch] : hist[int64_t(3 + m) * a.conv_dim + ch];
        acc = fmaf(__bfloat162float(w[j]), __bfloat162float(in), acc);
    }
    const float u = __bfloat162float(__float2bfloat16(silu(a.exact ? acc : bf16_round(acc))));
    const int hk = a.n_k_heads, hv = a.n_v_heads;
    if (g < 2 * hk) {
        // Same reduction order as gdn_recurrent_decode: warp sums, then the 4 warps in order.
        const float nrm = u * rsqrtf(block_sum(u * u, red) + 1e-6f);
        p.qk[int64_t(t) * 2 * hk * D + ch] = g < hk ? nrm * rsqrtf(float(D)) : nrm;
    } else {
        p.v[int64_t(t) * hv * D + ch - 2 * hk * D] = __float2bfloat16(u);
    }
    if (g != 0) return;
    for (int h = tid; h < hv; h += D) {
        const float bb = a.b_f32 ? a.b_f32[int64_t(t) * a.b_stride + h] : __bfloat162float(a.b[int64_t(t) * a.b_stride + h]);
        const float sig = 1.f / (1.f + expf(-bb));
        const float x = (a.a_f32 ? a.a_f32[int64_t(t) * a.a_stride + h] : __bfloat162float(a.a[int64_t(t) * a.a_stride + h])) +
                        a.dt_bias[h];
        const float softplus = x > 20.f ? x : log1pf(expf(x));
        p.gb[int64_t(h) * p.tp + t] = expf(-expf(a.a_log[h]) * softplus);
        p.gb[int64_t(hv + h) * p.tp + t] = a.exact ? sig : bf16_round(sig);
    }
}

// After the prep has read the old history: keep the last 3 inputs (old history when T < 3).
__global__ void gdn_prefill_history_kernel(GdnPrefillArgs a) {
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= a.conv_dim) return;
    __nv_bfloat16* hist = a.conv_state + int64_t(a.slot) * 3 * a.conv_dim;
    __nv_bfloat16 keep[3];
#pragma unroll
    for (int m = 0; m < 3; ++m) {
        const int pos = a.n_tokens - 3 + m;
        keep[m] = pos >= 0 ? a.qkv[int64_t(pos) * a.qkv_stride + ch] : hist[int64_t(3 + pos) * a.conv_dim + ch];
    }
#pragma unroll
    for (int m = 0; m < 3; ++m) hist[int64_t(m) * a.conv_dim + ch] = keep[m];
}

// The scan. KS threads (adjacent lanes) share one value column, each holding R = 128 / KS state
// rows in registers; S^T k and S^T q are reduced over the KS lanes with shuffles, so no block
// barrier is needed per token. Block: 128 threads = 128 / KS columns of one head; grid (KS, Hv).
template <int KS> struct ScanShape {
    static constexpr int R = D / KS;   // state rows per thread
    static constexpr int CB = D / KS;  // value columns per block
    static constexpr int RP = R + 4;   // padded row group: the KS groups start in different banks
    static constexpr int VEC = KS * RP; // floats per staged q or k vector
    struct Stage {
        float qk[kScanTile][2][VEC]; // [token][q, k][group][row]
        __nv_bfloat16 v[kScanTile][CB];
        float decay[kScanTile];
        float beta[kScanTile];
    };
};

struct ScanPtrs {
    const float* qk;
    const __nv_bfloat16* v;
    const float* gb;
    float* o;
    int tp;
};

template <int KS>
__global__ void __launch_bounds__(D) gdn_prefill_scan_kernel(GdnPrefillArgs a, ScanPtrs p) {
    using Shape = ScanShape<KS>;
    constexpr int R = Shape::R, CB = Shape::CB, RP = Shape::RP;
    using Stage = typename Shape::Stage;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Stage* stages = reinterpret_cast<Stage*>(smem_raw);
    const int h = blockIdx.y, tid = threadIdx.x, T = a.n_tokens, hk = a.n_k_heads, hv = a.n_v_heads;
    const int r = h / (hv / hk), kq = tid % KS, col0 = blockIdx.x * CB, col = col0 + tid / KS;

    auto load_tile = [&](int tile, Stage& st) {
        const int t0 = tile * kScanTile, n = min(kScanTile, T - t0);
        for (int i = tid; i < n * 2 * (D / 4); i += D) { // 16-byte pieces of q and k
            const int tt = i / (2 * (D / 4)), wv = (i / (D / 4)) & 1, c = i % (D / 4);
            const float* src = p.qk + (int64_t(t0 + tt) * 2 * hk + wv * hk + r) * D + c * 4;
            cp_async16(&st.qk[tt][wv][(c * 4) / R * RP + (c * 4) % R], src);
        }
        constexpr int v_pieces = CB / 8;
        for (int i = tid; i < n * v_pieces; i += D) {
            const int tt = i / v_pieces, c = i % v_pieces;
            cp_async16(&st.v[tt][c * 8], p.v + int64_t(t0 + tt) * hv * D + h * D + col0 + c * 8);
        }
        if (tid < 2 * (kScanTile / 4)) { // decay and beta: whole padded tile, rows are tp long
            const int which = tid / (kScanTile / 4), c = tid % (kScanTile / 4);
            float* dst = which ? st.beta : st.decay;
            cp_async16(dst + c * 4, p.gb + int64_t(which * hv + h) * p.tp + t0 + c * 4);
        }
    };

    float* S = a.state + (int64_t(a.slot) * hv + h) * D * D;
    float s[R];
#pragma unroll
    for (int i = 0; i < R; ++i) s[i] = S[(kq * R + i) * D + col];

    const int n_tiles = (T + kScanTile - 1) / kScanTile;
    load_tile(0, stages[0]);
    cp_async_commit();
    for (int tile = 0; tile < n_tiles; ++tile) {
        if (tile + 1 < n_tiles) {
            load_tile(tile + 1, stages[(tile + 1) & 1]);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const Stage& st = stages[tile & 1];
        const int t0 = tile * kScanTile, n = min(kScanTile, T - t0);
        for (int tt = 0; tt < n; ++tt) {
            float kk[R], qq[R];
#pragma unroll
            for (int i = 0; i < R; i += 4) {
                const float4 k4 = *reinterpret_cast<const float4*>(&st.qk[tt][1][kq * RP + i]);
                const float4 q4 = *reinterpret_cast<const float4*>(&st.qk[tt][0][kq * RP + i]);
                kk[i] = k4.x, kk[i + 1] = k4.y, kk[i + 2] = k4.z, kk[i + 3] = k4.w;
                qq[i] = q4.x, qq[i + 1] = q4.y, qq[i + 2] = q4.z, qq[i + 3] = q4.w;
            }
            const float decay = st.decay[tt], beta = st.beta[tt];
            // Four partial sums: the chain of R dependent FMAs would otherwise set the pace.
            float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < R; ++i) {
                s[i] *= decay;
                part[i & 3] = fmaf(s[i], kk[i], part[i & 3]);
            }
            float sk = (part[0] + part[1]) + (part[2] + part[3]);
#pragma unroll
            for (int o = 1; o < KS; o <<= 1) sk += __shfl_xor_sync(0xffffffffu, sk, o);
            const float delta = beta * (__bfloat162float(st.v[tt][tid / KS]) - sk);
            part[0] = part[1] = part[2] = part[3] = 0.f;
#pragma unroll
            for (int i = 0; i < R; ++i) {
                s[i] = fmaf(kk[i], delta, s[i]);
                part[i & 3] = fmaf(s[i], qq[i], part[i & 3]);
            }
            float o = (part[0] + part[1]) + (part[2] + part[3]);
#pragma unroll
            for (int off = 1; off < KS; off <<= 1) o += __shfl_xor_sync(0xffffffffu, o, off);
            if (kq == 0) p.o[int64_t(t0 + tt) * hv * D + h * D + col] = o;
        }
        __syncthreads(); // the next iteration refills this stage
    }
#pragma unroll
    for (int i = 0; i < R; ++i) S[(kq * R + i) * D + col] = s[i];
}

// grid (Hv, T), 128 threads: gated RMSNorm of one head's scan output, as gdn_recurrent_decode.
__global__ void __launch_bounds__(D) gdn_prefill_norm_kernel(GdnPrefillArgs a, const float* o_all) {
    __shared__ float red[32];
    const int h = blockIdx.x, t = blockIdx.y, v = threadIdx.x;
    float o = o_all[int64_t(t) * a.n_v_heads * D + h * D + v];
    if (!a.exact) o = bf16_round(o);
    const float var = block_sum(o * o, red) / float(D);
    const float nrm = a.exact ? o * rsqrtf(var + a.eps) : bf16_round(o * rsqrtf(var + a.eps));
    const float wn = a.exact ? __bfloat162float(a.norm_w[v]) * nrm : bf16_round(__bfloat162float(a.norm_w[v]) * nrm);
    const float z = __bfloat162float(a.z[int64_t(t) * a.z_stride + h * D + v]);
    a.y[int64_t(t) * a.y_stride + h * D + v] = __float2bfloat16(wn * silu(z));
}

template <int KS> cudaError_t launch_scan(const GdnPrefillArgs& a, const ScanPtrs& p, cudaStream_t stream) {
    constexpr size_t smem = 2 * sizeof(typename ScanShape<KS>::Stage);
    static_assert(smem <= 48 * 1024, "scan stages must fit the default shared-memory limit");
    gdn_prefill_scan_kernel<KS><<<dim3(KS, unsigned(a.n_v_heads)), D, smem, stream>>>(a, p);
    return cudaGetLastError();
}

} // namespace detail

size_t gdn_prefill_scratch_bytes(int n_tokens, int n_k_heads, int n_v_heads) {
    return detail::GdnScratch(n_tokens, n_k_heads, n_v_heads).total;
}

cudaError_t gdn_prefill(const GdnPrefillArgs& a, cudaStream_t stream) {
    using namespace detail;
    const int T = a.n_tokens, hk = a.n_k_heads, hv = a.n_v_heads;
    const bool aligned = a.qkv_stride % 8 == 0 && a.z_stride % 8 == 0 && a.y_stride % 8 == 0 &&
                         reinterpret_cast<uintptr_t>(a.qkv) % 16 == 0 && reinterpret_cast<uintptr_t>(a.z) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(a.y) % 16 == 0 && reinterpret_cast<uintptr_t>(a.scratch) % 256 == 0;
    if (!a.qkv || !a.z || !(a.a || a.a_f32) || !(a.b || a.b_f32) || !a.conv_w || !a.conv_state || !a.state ||
        !a.a_log || !a.dt_bias || !a.norm_w || !a.y || !a.scratch || !aligned || a.slot < 0 || hk < 1 || hv < hk ||
        hv % hk != 0 || (a.scan_split != 0 && a.scan_split != 4 && a.scan_split != 8) || a.conv_dim != (2 * hk + hv) * D || T < 1 || T > 65535 ||
        a.scratch_bytes < gdn_prefill_scratch_bytes(T, hk, hv))
        return cudaErrorInvalidValue;
    const GdnScratch lay(T, hk, hv);
    unsigned char* base = static_cast<unsigned char*>(a.scratch);
    const PrepPtrs prep{reinterpret_cast<float*>(base + lay.qk), reinterpret_cast<__nv_bfloat16*>(base + lay.v),
                        reinterpret_cast<float*>(base + lay.gb), lay.tp};
    float* o = reinterpret_cast<float*>(base + lay.o);
    gdn_prefill_prep_kernel<<<dim3(unsigned(2 * hk + hv), unsigned(T)), D, 0, stream>>>(a, prep);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    gdn_prefill_history_kernel<<<unsigned((a.conv_dim + 255) / 256), 256, 0, stream>>>(a);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    const ScanPtrs scan{prep.qk, prep.v, prep.gb, o, lay.tp};
    err = a.scan_split == 8 ? launch_scan<8>(a, scan, stream) : launch_scan<4>(a, scan, stream);
    if (err != cudaSuccess) return err;
    gdn_prefill_norm_kernel<<<dim3(unsigned(hv), unsigned(T)), D, 0, stream>>>(a, o);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
