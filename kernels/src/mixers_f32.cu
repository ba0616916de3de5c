// ninfer::kernels - decode attention and Gated DeltaNet in the CPU reference's f32 (the runner's check mode).
#include "common.cuh"
#include "gdn_decode_v4.cuh"
#include "kv_quant.cuh"
#include "kv_store.cuh"
#include "mrope.cuh"
#include "ninfer/kernels/gdn_decode.h"
#include "ninfer/kernels/gdn_window.h"
#include "ninfer/kernels/mixers_f32.h"

namespace ninfer::kernels {

namespace detail {

constexpr int kF32HeadDim = 256;

// Pool row (kvh, pos) of lane: bf16 row, or codes + scales.
__device__ __forceinline__ __nv_bfloat16* bf16_row(__nv_bfloat16* pool, const KvPages& kv, int n_kv, int lane, int kvh,
                                                   int pos) {
    const int page = kv.page_table[int64_t(lane) * kv.max_pages + pos / kKvPageTokens];
    return pool + ((int64_t(page) * n_kv + kvh) * kKvPageTokens + pos % kKvPageTokens) * kF32HeadDim;
}

// Dim d of pool row (kvh, pos), decoded as kv_decode_row does.
__device__ __forceinline__ float pool_value(bool value, const KvPages& kv, int n_kv, int lane, int kvh, int pos, int d) {
    if (kv.dtype == KvDtype::Bf16)
        return __bfloat162float(bf16_row(value ? kv.v : kv.k, kv, n_kv, lane, kvh, pos)[d]);
    const KvQuantRow row = kv_quant_row(value ? kv.v_q : kv.k_q, kv, n_kv, lane, kvh, pos);
    const float s = kv.dtype == KvDtype::Fp8 ? bf16_bits_to_float(row.scales[0]) : f16_bits_to_float(row.scales[d / 64]);
    const uint8_t c = row.codes[d];
    return (kv.dtype == KvDtype::Fp8 ? e4m3_to_float(c) : float(int8_t(c))) * s;
}

// grid (n_heads + 2 n_kv_heads, n_tokens), 128 threads (dims tid, tid + 128): q rows to a.q, K and V
// rows into the pool.
__global__ void attn_prep_f32_kernel(AttnF32Args a) {
    constexpr int D = kF32HeadDim;
    __shared__ float red[32], xs[D];
    const AttnGeometry& geo = a.geo;
    const int t = blockIdx.y, hb = blockIdx.x, tid = threadIdx.x;
    const bool is_q = hb < geo.n_heads, is_k = !is_q && hb < geo.n_heads + geo.n_kv_heads;
    const int kvh = is_q ? 0 : (is_k ? hb - geo.n_heads : hb - geo.n_heads - geo.n_kv_heads);
    const int lane = a.lanes[t], pos = a.positions[t];
    const float* src = is_q ? a.qg + int64_t(t) * a.qg_stride + int64_t(hb) * 2 * D
                            : (is_k ? a.k + int64_t(t) * a.k_stride : a.v + int64_t(t) * a.v_stride) + int64_t(kvh) * D;
    float y[2] = {src[tid], src[tid + 128]};
    if (is_q || is_k) {
        // offset RMSNorm: (x * r) * (1 + w), r = 1 / sqrt(mean(x^2) + eps).
        const float* w = is_q ? a.q_norm : a.k_norm;
        const float r = 1.f / sqrtf(block_sum(y[0] * y[0] + y[1] * y[1], red) / float(D) + geo.eps);
        for (int e = 0; e < 2; ++e) xs[tid + 128 * e] = (y[e] * r) * (1.f + w[tid + 128 * e]);
        __syncthreads();
        const int half = geo.rotary_dim / 2;
        for (int e = 0; e < 2; ++e) {
            const int d = tid + 128 * e;
            y[e] = xs[d];
            if (d < geo.rotary_dim) {
                const float inv_freq = 1.f / powf(geo.rope_theta, float(2 * (d % half)) / float(geo.rotary_dim));
                const float angle = rope_position(geo, d % half, t, lane, pos, a.rope_thw, a.rope_offset) * inv_freq;
                const float c = cosf(angle), s = sinf(angle);
                y[e] = d < half ? xs[d] * c - xs[d + half] * s : xs[d] * c + xs[d - half] * s;
            }
        }
    }
    if (is_q) {
        float* q = a.q + int64_t(t) * a.q_stride + int64_t(hb) * D;
        q[tid] = y[0];
        q[tid + 128] = y[1];
    } else if (a.kv.dtype == KvDtype::Bf16) {
        __nv_bfloat16* dst = bf16_row(is_k ? a.kv.k : a.kv.v, a.kv, geo.n_kv_heads, lane, kvh, pos);
        dst[tid] = __float2bfloat16(y[0]);
        dst[tid + 128] = __float2bfloat16(y[1]);
    } else {
        kv_store_quantized(a.kv.dtype, y[0], y[1], kv_quant_row(is_k ? a.kv.k_q : a.kv.v_q, a.kv, geo.n_kv_heads, lane, kvh, pos),
                           red);
    }
}

// grid (n_heads, n_tokens), 256 threads: scores by warps (position j on warp j % 8), softmax over
// the block, then thread d sums p_j V_j[d] in position order.
__global__ void attn_f32_kernel(AttnF32Args a) {
    constexpr int D = kF32HeadDim;
    __shared__ float qs[D], red[32];
    const AttnGeometry& geo = a.geo;
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x, lane_id = tid & 31, warp = tid >> 5;
    const int kvh = h / (geo.n_heads / geo.n_kv_heads), lane = a.lanes[t], n_see = a.positions[t] + 1;
    float* sc = a.scores + (int64_t(t) * geo.n_heads + h) * a.max_context;
    qs[tid] = a.q[int64_t(t) * a.q_stride + int64_t(h) * D + tid];
    __syncthreads();
    const float scale = 1.f / sqrtf(float(D));
    for (int j = warp; j < n_see; j += 8) {
        float part = 0.f;
        for (int i = 0; i < 8; ++i) {
            const int d = lane_id * 8 + i;
            part = fmaf(qs[d], pool_value(false, a.kv, geo.n_kv_heads, lane, kvh, j, d), part);
        }
        part = warp_sum(part);
        if (lane_id == 0) sc[j] = part * scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int j = tid; j < n_see; j += blockDim.x) m = fmaxf(m, sc[j]);
    m = warp_max(m);
    if (lane_id == 0) red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < 8; ++w) m = fmaxf(m, red[w]);
    float part = 0.f;
    for (int j = tid; j < n_see; j += blockDim.x) {
        const float e = expf(sc[j] - m);
        sc[j] = e;
        part += e;
    }
    const float inv = 1.f / block_sum(part, red); // block_sum's barriers also publish sc
    float o = 0.f;
    for (int j = 0; j < n_see; ++j) o = fmaf(sc[j] * inv, pool_value(true, a.kv, geo.n_kv_heads, lane, kvh, j, tid), o);
    const float gate = a.qg[int64_t(t) * a.qg_stride + int64_t(h) * 2 * D + D + tid];
    a.out[int64_t(t) * a.out_stride + int64_t(h) * D + tid] = o * (1.f / (1.f + expf(-gate)));
}

// Channel ch's conv output from its inputs x, oldest first.
__device__ __forceinline__ float gdn_conv_f32_value(const GdnF32Args& a, int ch, const float (&x)[4]) {
    float acc = 0.f;
    for (int j = 0; j < 4; ++j) acc += a.conv_w[int64_t(ch) * 4 + j] * x[j];
    return silu(acc);
}

// grid (ceil(conv_dim / 256), n_tokens), 256 threads: one channel per thread.
__global__ void gdn_conv_f32_kernel(GdnF32Args a) {
    const int t = blockIdx.y, ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= a.conv_dim) return;
    float* st = a.conv_state + int64_t(a.slots[t]) * 3 * a.conv_dim;
    const float x[4] = {st[ch], st[a.conv_dim + ch], st[2 * a.conv_dim + ch], a.qkv[int64_t(t) * a.qkv_stride + ch]};
    st[ch] = x[1];
    st[a.conv_dim + ch] = x[2];
    st[2 * a.conv_dim + ch] = x[3];
    a.conv_out[int64_t(t) * a.conv_out_stride + ch] = gdn_conv_f32_value(a, ch, x);
}

// Window w's tokens in order (gdn_window.h), one channel per thread: grid (ceil(conv_dim / 256), windows).
__global__ void gdn_conv_f32_window_kernel(GdnF32Args a, GdnWindows ws) {
    const GdnWindow& w = ws.w[blockIdx.y];
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= a.conv_dim) return;
    float* st = a.conv_state + int64_t(w.slot) * 3 * a.conv_dim;
    float x[4] = {st[ch], st[a.conv_dim + ch], st[2 * a.conv_dim + ch], 0.f};
    for (int j = 0; j < w.n_tokens; ++j) {
        x[3] = a.qkv[int64_t(w.rows[j]) * a.qkv_stride + ch];
        a.conv_out[int64_t(w.rows[j]) * a.conv_out_stride + ch] = gdn_conv_f32_value(a, ch, x);
        x[0] = x[1], x[1] = x[2], x[2] = x[3];
        float* dst = j + 1 < w.n_tokens ? static_cast<float*>(w.conv_snap) + int64_t(j) * 3 * a.conv_dim : st;
        dst[ch] = x[0];
        dst[a.conv_dim + ch] = x[1];
        dst[2 * a.conv_dim + ch] = x[2];
    }
}

// Token row t of V head h, thread j = state column j: the column's state read at src and written
// at dst (the same column of another copy, or src itself).
__device__ __forceinline__ void gdn_recurrent_f32_token(const GdnF32Args& a, int t, int h, const float* src, float* dst,
                                                        float (&qs)[kGdnHeadDim], float (&ks)[kGdnHeadDim], float (&red)[32]) {
    constexpr int D = kGdnHeadDim;
    const int j = threadIdx.x;
    const int r = h / (a.n_v_heads / a.n_k_heads), key_dim = a.n_k_heads * D;
    const float* c = a.conv_out + int64_t(t) * a.conv_out_stride;
    const float q = c[r * D + j], k = c[key_dim + r * D + j], v = c[2 * key_dim + h * D + j];
    const float q_inv = 1.f / sqrtf(block_sum(q * q, red) + 1e-6f);
    const float k_inv = 1.f / sqrtf(block_sum(k * k, red) + 1e-6f);
    qs[j] = q * q_inv * (1.f / sqrtf(float(D)));
    ks[j] = k * k_inv;
    const float x = a.a[int64_t(t) * a.ab_stride + h] + a.dt_bias[h];
    const float g = -expf(a.a_log[h]) * (x > 20.f ? x : log1pf(expf(x)));
    const float decay = expf(g), beta = 1.f / (1.f + expf(-a.b[int64_t(t) * a.ab_stride + h]));
    __syncthreads();
    float ks_dot = 0.f;
    for (int i = 0; i < D; ++i) {
        const float s = src[i * D] * decay;
        dst[i * D] = s;
        ks_dot += ks[i] * s;
    }
    const float delta = beta * (v - ks_dot);
    float o = 0.f;
    for (int i = 0; i < D; ++i) {
        const float s = dst[i * D] + ks[i] * delta;
        dst[i * D] = s;
        o += qs[i] * s;
    }
    const float rn = 1.f / sqrtf(block_sum(o * o, red) / float(D) + a.eps); // its barriers end every read of qs / ks
    const float z = a.z[int64_t(t) * a.z_stride + h * D + j];
    a.y[int64_t(t) * a.y_stride + h * D + j] = a.norm_w[j] * (o * rn) * silu(z);
}

// grid (n_v_heads, n_tokens), 128 threads: thread j owns state column j of head h.
__global__ void gdn_recurrent_f32_kernel(GdnF32Args a) {
    __shared__ float qs[kGdnHeadDim], ks[kGdnHeadDim], red[32];
    const int h = blockIdx.x, t = blockIdx.y;
    float* S = a.state + (int64_t(a.slots[t]) * a.n_v_heads + h) * kGdnHeadDim * kGdnHeadDim + threadIdx.x;
    gdn_recurrent_f32_token(a, t, h, S, S, qs, ks, red);
}

// Window w's tokens in order (gdn_window.h): token j reads the state token j - 1 wrote (the live
// slot for the first) and writes snapshot j (the live slot for the last). grid (n_v_heads, windows).
__global__ void gdn_recurrent_f32_window_kernel(GdnF32Args a, GdnWindows ws) {
    constexpr int D = kGdnHeadDim;
    __shared__ float qs[D], ks[D], red[32];
    const GdnWindow& w = ws.w[blockIdx.y];
    const int h = blockIdx.x;
    float* live = a.state + (int64_t(w.slot) * a.n_v_heads + h) * D * D + threadIdx.x;
    const int64_t snap_stride = int64_t(a.n_v_heads) * D * D;
    float* snap = w.state_snap + int64_t(h) * D * D + threadIdx.x;
    for (int j = 0; j < w.n_tokens; ++j)
        gdn_recurrent_f32_token(a, w.rows[j], h, j == 0 ? live : snap + (j - 1) * snap_stride,
                                j + 1 < w.n_tokens ? snap + j * snap_stride : live, qs, ks, red);
}

bool attn_f32_ok(const AttnF32Args& a) {
    const AttnGeometry& g = a.geo;
    return g.head_dim == kF32HeadDim && g.n_kv_heads >= 1 && g.n_heads % g.n_kv_heads == 0 && g.rotary_dim >= 0 &&
           g.rotary_dim % 2 == 0 && g.rotary_dim <= kF32HeadDim && a.qg && a.k && a.v && a.q_norm && a.k_norm &&
           a.lanes && a.positions && a.kv.page_table && a.kv.max_pages >= 1 &&
           (a.kv.dtype == KvDtype::Bf16 ? a.kv.k && a.kv.v : a.kv.k_q && a.kv.v_q) && a.q && a.scores &&
           a.max_context >= 1 && a.out && a.n_tokens >= 1 && a.n_tokens <= 65535;
}

bool gdn_f32_buffers_ok(const GdnF32Args& a) {
    return a.qkv && a.z && a.a && a.b && a.conv_w && a.conv_state && a.conv_out && a.a_log && a.dt_bias && a.norm_w &&
           a.state && a.y && a.n_k_heads >= 1 && a.n_v_heads % a.n_k_heads == 0 &&
           a.conv_dim == (2 * a.n_k_heads + a.n_v_heads) * kGdnHeadDim;
}
bool gdn_f32_ok(const GdnF32Args& a) { return gdn_f32_buffers_ok(a) && a.slots && a.n_tokens >= 1 && a.n_tokens <= 65535; }

} // namespace detail

size_t attn_f32_scores_floats(int n_tokens, int n_heads, int max_context) {
    return size_t(n_tokens) * size_t(n_heads) * size_t(max_context);
}

cudaError_t attn_decode_f32(const AttnF32Args& a, cudaStream_t stream) {
    if (!detail::attn_f32_ok(a)) return cudaErrorInvalidValue;
    const AttnGeometry& g = a.geo;
    detail::attn_prep_f32_kernel<<<dim3(unsigned(g.n_heads + 2 * g.n_kv_heads), unsigned(a.n_tokens)), 128, 0, stream>>>(a);
    detail::attn_f32_kernel<<<dim3(unsigned(g.n_heads), unsigned(a.n_tokens)), detail::kF32HeadDim, 0, stream>>>(a);
    return cudaGetLastError();
}

cudaError_t gdn_decode_f32(const GdnF32Args& a, cudaStream_t stream) {
    if (!detail::gdn_f32_ok(a)) return cudaErrorInvalidValue;
    detail::gdn_conv_f32_kernel<<<dim3(unsigned((a.conv_dim + 255) / 256), unsigned(a.n_tokens)), 256, 0, stream>>>(a);
    detail::gdn_recurrent_f32_kernel<<<dim3(unsigned(a.n_v_heads), unsigned(a.n_tokens)), kGdnHeadDim, 0, stream>>>(a);
    return cudaGetLastError();
}

cudaError_t gdn_decode_f32_window(const GdnF32Args& a, const GdnWindows& ws, cudaStream_t stream) {
    if (!detail::gdn_f32_buffers_ok(a) || !detail::windows_ok(ws, true, true)) return cudaErrorInvalidValue;
    detail::gdn_conv_f32_window_kernel<<<dim3(unsigned((a.conv_dim + 255) / 256), unsigned(ws.n)), 256, 0, stream>>>(a, ws);
    detail::gdn_recurrent_f32_window_kernel<<<dim3(unsigned(a.n_v_heads), unsigned(ws.n)), kGdnHeadDim, 0, stream>>>(a, ws);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
