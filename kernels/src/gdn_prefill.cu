// ninfer::kernels - Gated DeltaNet prefill: conv/norm prep, conv history, delta rule (column scan or chunked), gated norm.
#include "common.cuh"
#include "gdn_prefill_chunked.cuh"
#include "ninfer/kernels/gdn_prefill.h"
#include "prefill_async.cuh"

namespace ninfer::kernels {

namespace detail {

constexpr int D = kGdnHeadDim;
constexpr int kScanTile = 16; // tokens staged in shared memory per step of the scan

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

// Scratch regions (bytes): fp32 q/k after l2norm [t][2][Hk][128] (chunked: the raw bf16 values in
// the first half); bf16 v [t][Hv*128]; fp32 decay and beta [2][Hv][tp] (tp = T rounded up to the
// scan tile so tiles copy in 16-byte pieces; chunked: the log decay); fp32 scan output o
// [t][Hv*128]; chunked only: fp32 l2 scales [t][2][Hk] and the per-chunk regions.
struct GdnScratch {
    size_t qk = 0, v = 0, gb = 0, o = 0, qs = 0, chunk = 0, total = 0;
    size_t chunk_off[4] = {};
    int tp = 0;
    GdnScratch(int T, int hk, int hv) {
        tp = (T + kScanTile - 1) / kScanTile * kScanTile;
        v = align256(size_t(T) * 2 * hk * D * sizeof(float));
        gb = v + align256(size_t(T) * hv * D * sizeof(__nv_bfloat16));
        o = gb + align256(size_t(2) * hv * tp * sizeof(float));
        qs = o + align256(size_t(T) * hv * D * sizeof(float));
        chunk = qs + align256(size_t(T) * 2 * hk * sizeof(float));
        total = chunk + chunk_region_bytes(T, hv, chunk_off);
    }
};

struct PrepPtrs {
    float* qk;
    __nv_bfloat16* v;
    float* gb;
    int tp;
    float* qk_scale; // chunked form: raw bf16 q/k into qk, their scales here, log decay into gb
};

// Prep and norm: a warp owns one head (128 channels, 4 per lane) for kWarpTokens consecutive
// tokens, so the l2 and RMS norms are warp reductions; a block is 4 warps = kBlockTokens tokens.
constexpr int kWarpTokens = 8;
constexpr int kBlockTokens = 4 * kWarpTokens;

__device__ __forceinline__ void load_bf16x4(const __nv_bfloat16* p, float (&out)[4]) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    out[0] = lo.x, out[1] = lo.y, out[2] = hi.x, out[3] = hi.y;
}
__device__ __forceinline__ void store_bf16x4(__nv_bfloat16* p, const float (&v)[4]) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]), hi = __floats2bfloat162_rn(v[2], v[3]);
    uint2 raw;
    raw.x = *reinterpret_cast<const uint32_t*>(&lo);
    raw.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(p) = raw;
}

// grid (2 Hk + Hv, ceil(T / kBlockTokens)), 128 threads: conv + SiLU (+ l2norm for q and k) of
// one head; each lane loads its 4 channels' inputs once for its kWarpTokens tokens.
__global__ void __launch_bounds__(D) gdn_prefill_prep_kernel(GdnPrefillArgs a, PrepPtrs p) {
    const int g = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, T = a.n_tokens;
    const int ch = g * D + lane * 4, t0 = blockIdx.y * kBlockTokens + warp * kWarpTokens;
    const int n = min(kWarpTokens, T - t0);
    const int hk = a.n_k_heads, hv = a.n_v_heads;
    if (n > 0) {
        const __nv_bfloat16* hist = a.conv_state + int64_t(a.slot) * 3 * a.conv_dim;
        float w[4][4], in[kWarpTokens + 3][4];
#pragma unroll
        for (int c = 0; c < 4; ++c) load_bf16x4(a.conv_w + int64_t(ch + c) * 4, w[c]);
#pragma unroll
        for (int j = 0; j < kWarpTokens + 3; ++j) {
            const int m = t0 - 3 + j; // input position; negative ones come from the history
            if (m < T) load_bf16x4(m >= 0 ? a.qkv + int64_t(m) * a.qkv_stride + ch : hist + int64_t(3 + m) * a.conv_dim + ch, in[j]);
        }
#pragma unroll
        for (int tt = 0; tt < kWarpTokens; ++tt) {
            if (tt >= n) break; // warp-uniform
            float u[4], ss = 0.f;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                float acc = 0.f;
#pragma unroll
                for (int j = 0; j < 4; ++j) acc = fmaf(w[c][j], in[tt + j][c], acc);
                u[c] = __bfloat162float(__float2bfloat16(silu(a.exact ? acc : bf16_round(acc))));
                ss = fmaf(u[c], u[c], ss);
            }
            const int t = t0 + tt;
            if (g < 2 * hk) {
                const float scale = rsqrtf(warp_sum(ss) + 1e-6f) * (g < hk ? rsqrtf(float(D)) : 1.f);
                if (p.qk_scale) { // u is bf16-exact, so u and the scale lose nothing of u * scale
                    store_bf16x4(reinterpret_cast<__nv_bfloat16*>(p.qk) + int64_t(t) * 2 * hk * D + ch, u);
                    if (lane == 0) p.qk_scale[int64_t(t) * 2 * hk + g] = scale;
                } else {
                    *reinterpret_cast<float4*>(p.qk + int64_t(t) * 2 * hk * D + ch) =
                        make_float4(u[0] * scale, u[1] * scale, u[2] * scale, u[3] * scale);
                }
            } else {
                store_bf16x4(p.v + int64_t(t) * hv * D + ch - 2 * hk * D, u);
            }
        }
    }
    if (g != 0) return;
    const int tb = blockIdx.y * kBlockTokens, nb = min(kBlockTokens, T - tb);
    for (int i = threadIdx.x; i < nb * hv; i += D) {
        const int t = tb + i / hv, h = i % hv;
        const float bb = a.b_f32 ? a.b_f32[int64_t(t) * a.b_stride + h] : __bfloat162float(a.b[int64_t(t) * a.b_stride + h]);
        const float sig = 1.f / (1.f + expf(-bb));
        const float x = (a.a_f32 ? a.a_f32[int64_t(t) * a.a_stride + h] : __bfloat162float(a.a[int64_t(t) * a.a_stride + h])) +
                        a.dt_bias[h];
        const float softplus = x > 20.f ? x : log1pf(expf(x));
        const float log_decay = -expf(a.a_log[h]) * softplus;
        p.gb[int64_t(h) * p.tp + t] = p.qk_scale ? log_decay : expf(log_decay);
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

// The scan. KS threads (adjacent lanes) share NC value columns, each holding R = 128 / KS state
// rows of them in registers; S^T k and S^T q are reduced over the KS lanes with shuffles, so no
// block barrier is needed per token. NC > 1 reuses each k/q value read from shared memory for
// NC columns (a 128-bit shared load costs 4 wavefronts however many lanes share its address).
// Block: 128 threads = (128 / KS) * NC columns of one head; grid (128 / columns, Hv).
template <int KS, int NC> struct ScanShape {
    static constexpr int R = D / KS;               // state rows per thread
    static constexpr int CB = (D / KS) * NC;       // value columns per block
    static constexpr int RP = R + 4;               // padded row group: groups start in different banks
    static constexpr int VEC = KS * RP;            // floats per staged q or k vector
    static constexpr int ACC = NC >= 4 ? 1 : 4 / NC; // partial sums per column: independent FMA chains
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

template <int KS> __device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int off = 1; off < KS; off <<= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

template <int KS, int NC>
__global__ void __launch_bounds__(D) gdn_prefill_scan_kernel(GdnPrefillArgs a, ScanPtrs p) {
    using Shape = ScanShape<KS, NC>;
    constexpr int R = Shape::R, CB = Shape::CB, RP = Shape::RP, ACC = Shape::ACC;
    using Stage = typename Shape::Stage;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Stage* stages = reinterpret_cast<Stage*>(smem_raw);
    const int h = blockIdx.y, tid = threadIdx.x, T = a.n_tokens, hk = a.n_k_heads, hv = a.n_v_heads;
    const int r = h / (hv / hk), kq = tid % KS, cb = (tid / KS) * NC, col0 = blockIdx.x * CB;

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
    float s[R][NC];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int c = 0; c < NC; ++c) s[i][c] = S[(kq * R + i) * D + col0 + cb + c];

    auto store_o = [&](int t, const float (&o)[NC]) {
        float* dst = p.o + int64_t(t) * hv * D + h * D + col0 + cb;
#pragma unroll
        for (int c = 0; c < NC; ++c) dst[c] = o[c];
    };
    float q_prev[R] = {}; // q of the token before the current one (none before the first)

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
            // One pass over the state S_{t-1} does two dot products: with q_{t-1} (the previous
            // token's output) and with k_t (S_t^T k_t = decay_t S_{t-1}^T k_t); their shuffle
            // reductions overlap, so each token waits for one reduction instead of two in a row.
            float kk[R], qq[R];
#pragma unroll
            for (int i = 0; i < R; i += 4) {
                const float4 k4 = *reinterpret_cast<const float4*>(&st.qk[tt][1][kq * RP + i]);
                const float4 q4 = *reinterpret_cast<const float4*>(&st.qk[tt][0][kq * RP + i]);
                kk[i] = k4.x, kk[i + 1] = k4.y, kk[i + 2] = k4.z, kk[i + 3] = k4.w;
                qq[i] = q4.x, qq[i + 1] = q4.y, qq[i + 2] = q4.z, qq[i + 3] = q4.w;
            }
            const float decay = st.decay[tt], beta = st.beta[tt];
            float pk[NC][ACC] = {}, pq[NC][ACC] = {};
#pragma unroll
            for (int i = 0; i < R; ++i)
#pragma unroll
                for (int c = 0; c < NC; ++c) {
                    pk[c][i % ACC] = fmaf(s[i][c], kk[i], pk[c][i % ACC]);
                    pq[c][i % ACC] = fmaf(s[i][c], q_prev[i], pq[c][i % ACC]);
                }
            float delta[NC], o[NC];
#pragma unroll
            for (int c = 0; c < NC; ++c) {
                float sk = pk[c][0];
                o[c] = pq[c][0];
#pragma unroll
                for (int j = 1; j < ACC; ++j) sk += pk[c][j], o[c] += pq[c][j];
                sk = group_sum<KS>(sk);
                o[c] = group_sum<KS>(o[c]);
                delta[c] = beta * (__bfloat162float(st.v[tt][cb + c]) - decay * sk);
            }
            if (kq == 0 && t0 + tt > 0) store_o(t0 + tt - 1, o);
#pragma unroll
            for (int i = 0; i < R; ++i) {
                q_prev[i] = qq[i];
#pragma unroll
                for (int c = 0; c < NC; ++c) s[i][c] = fmaf(s[i][c], decay, kk[i] * delta[c]);
            }
        }
        __syncthreads(); // the next iteration refills this stage
    }
    float o[NC]; // the last token's output
#pragma unroll
    for (int c = 0; c < NC; ++c) {
        float acc = 0.f;
#pragma unroll
        for (int i = 0; i < R; ++i) acc = fmaf(s[i][c], q_prev[i], acc);
        o[c] = group_sum<KS>(acc);
    }
    if (kq == 0) store_o(T - 1, o);
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int c = 0; c < NC; ++c) S[(kq * R + i) * D + col0 + cb + c] = s[i][c];
}

// grid (Hv, ceil(T / kBlockTokens)), 128 threads: gated RMSNorm of one head's scan output, a warp
// per kWarpTokens tokens, with gdn_recurrent_decode's roundings.
__global__ void __launch_bounds__(D) gdn_prefill_norm_kernel(GdnPrefillArgs a, const float* o_all) {
    const int h = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, col = h * D + lane * 4;
    const int t0 = blockIdx.y * kBlockTokens + warp * kWarpTokens, n = min(kWarpTokens, a.n_tokens - t0);
    float w[4];
    load_bf16x4(a.norm_w + lane * 4, w);
    for (int t = t0; t < t0 + n; ++t) {
        const float4 o4 = *reinterpret_cast<const float4*>(o_all + int64_t(t) * a.n_v_heads * D + col);
        float o[4] = {o4.x, o4.y, o4.z, o4.w}, z[4], y[4], ss = 0.f;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            if (!a.exact) o[c] = bf16_round(o[c]);
            ss = fmaf(o[c], o[c], ss);
        }
        const float inv = rsqrtf(warp_sum(ss) / float(D) + a.eps);
        load_bf16x4(a.z + int64_t(t) * a.z_stride + col, z);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const float nrm = a.exact ? o[c] * inv : bf16_round(o[c] * inv);
            const float wn = a.exact ? w[c] * nrm : bf16_round(w[c] * nrm);
            y[c] = wn * silu(z[c]);
        }
        store_bf16x4(a.y + int64_t(t) * a.y_stride + col, y);
    }
}

template <int KS, int NC> cudaError_t launch_scan(const GdnPrefillArgs& a, const ScanPtrs& p, cudaStream_t stream) {
    using Shape = ScanShape<KS, NC>;
    constexpr size_t smem = 2 * sizeof(typename Shape::Stage);
    if (smem > 48 * 1024) { // above the default limit a kernel must opt in
        const cudaError_t err = cudaFuncSetAttribute(gdn_prefill_scan_kernel<KS, NC>,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        if (err != cudaSuccess) return err;
    }
    gdn_prefill_scan_kernel<KS, NC><<<dim3(D / Shape::CB, unsigned(a.n_v_heads)), D, smem, stream>>>(a, p);
    return cudaGetLastError();
}

cudaError_t launch_scan_variant(const GdnPrefillArgs& a, const ScanPtrs& p, cudaStream_t stream) {
    switch (a.scan_variant ? a.scan_variant : kGdnScanDefaultVariant) {
    case 1: return launch_scan<4, 1>(a, p, stream);
    case 2: return launch_scan<8, 1>(a, p, stream);
    case 3: return launch_scan<8, 2>(a, p, stream);
    case 4: return launch_scan<16, 2>(a, p, stream);
    case 5: return launch_scan<4, 2>(a, p, stream);
    case 6: return launch_scan<8, 4>(a, p, stream);
    default: return cudaErrorInvalidValue;
    }
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
                         reinterpret_cast<uintptr_t>(a.y) % 16 == 0 && reinterpret_cast<uintptr_t>(a.scratch) % 256 == 0 &&
                         reinterpret_cast<uintptr_t>(a.conv_w) % 16 == 0 && reinterpret_cast<uintptr_t>(a.conv_state) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(a.norm_w) % 16 == 0;
    if (!a.qkv || !a.z || !(a.a || a.a_f32) || !(a.b || a.b_f32) || !a.conv_w || !a.conv_state || !a.state ||
        !a.a_log || !a.dt_bias || !a.norm_w || !a.y || !a.scratch || !aligned || a.slot < 0 || hk < 1 || hv < hk ||
        hv % hk != 0 || a.scan_variant < 0 || a.scan_variant > 6 || a.algorithm < 0 || a.algorithm > 2 || a.chunk_variant < 0 || a.chunk_variant > 4 || a.start_pos < 0 || a.conv_dim != (2 * hk + hv) * D || T < 1 || T > 65535 ||
        a.scratch_bytes < gdn_prefill_scratch_bytes(T, hk, hv))
        return cudaErrorInvalidValue;
    const bool chunked = (a.algorithm ? a.algorithm : kGdnPrefillDefaultAlgorithm) == kGdnPrefillChunked;
    const GdnScratch lay(T, hk, hv);
    unsigned char* base = static_cast<unsigned char*>(a.scratch);
    const PrepPtrs prep{reinterpret_cast<float*>(base + lay.qk), reinterpret_cast<__nv_bfloat16*>(base + lay.v),
                        reinterpret_cast<float*>(base + lay.gb), lay.tp,
                        chunked ? reinterpret_cast<float*>(base + lay.qs) : nullptr};
    float* o = reinterpret_cast<float*>(base + lay.o);
    const unsigned n_groups = unsigned((T + kBlockTokens - 1) / kBlockTokens);
    gdn_prefill_prep_kernel<<<dim3(unsigned(2 * hk + hv), n_groups), D, 0, stream>>>(a, prep);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    gdn_prefill_history_kernel<<<unsigned((a.conv_dim + 255) / 256), 256, 0, stream>>>(a);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if (chunked) {
        unsigned char* cb = base + lay.chunk;
        ChunkPtrs cp;
        cp.qk = reinterpret_cast<const __nv_bfloat16*>(prep.qk), cp.qk_scale = prep.qk_scale, cp.v = prep.v;
        cp.gb = prep.gb, cp.tp = lay.tp, cp.o = o;
        cp.w = reinterpret_cast<__nv_bfloat16*>(cb + lay.chunk_off[0]), cp.u = reinterpret_cast<float*>(cb + lay.chunk_off[1]);
        cp.p = reinterpret_cast<__nv_bfloat16*>(cb + lay.chunk_off[2]), cp.sc = reinterpret_cast<float*>(cb + lay.chunk_off[3]);
        err = gdn_chunked_launch(a, cp, stream);
    } else {
        err = launch_scan_variant(a, ScanPtrs{prep.qk, prep.v, prep.gb, o, lay.tp}, stream);
    }
    if (err != cudaSuccess) return err;
    gdn_prefill_norm_kernel<<<dim3(unsigned(hv), n_groups), D, 0, stream>>>(a, o);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
