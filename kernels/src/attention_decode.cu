// ninfer::kernels - decode attention prep: q/k norm + RoPE + KV append (attention itself: attention_decode_mma.cu).
#include "common.cuh"
#include "kv_quant.cuh"
#include "kv_store.cuh"
#include "mrope.cuh"
#include "ninfer/kernels/attention_decode.h"

namespace ninfer::kernels {

namespace detail {

constexpr int kHeadDim = 256;
constexpr int kMaxGroup = 8;

__device__ __forceinline__ __nv_bfloat16* kv_row(__nv_bfloat16* pages, const KvPages& kv, int n_kv, int lane,
                                                 int kvh, int pos) {
    const int page = kv.page_table[int64_t(lane) * kv.max_pages + pos / kKvPageTokens];
    return pages + ((int64_t(page) * n_kv + kvh) * kKvPageTokens + pos % kKvPageTokens) * kHeadDim;
}

// grid (n_heads + 2 * n_kv_heads, n_tokens), 128 threads; each thread owns dims tid and tid + 128.
__global__ void attn_prep_kernel(AttnPrepArgs a) {
    __shared__ float red[32];
    __shared__ float xs[kHeadDim];
    __shared__ float ys[kHeadDim]; // quantised K: the roped row before its scale is known
    ninfer_grid_launch_dependents();
    const AttnGeometry& geo = a.geo;
    const int t = blockIdx.y, hb = blockIdx.x, tid = threadIdx.x;
    const bool is_q = hb < geo.n_heads, is_k = !is_q && hb < geo.n_heads + geo.n_kv_heads;
    const int kvh = is_q ? 0 : (is_k ? hb - geo.n_heads : hb - geo.n_heads - geo.n_kv_heads);
    const bool quant = a.kv.dtype != KvDtype::Bf16;
    // Constant data before the PDL wait: the norm weights and the RoPE frequencies of dims tid and
    // tid + 128 (which do not depend on the position).
    const __nv_bfloat16* w = is_q ? a.q_norm : a.k_norm;
    const float w0 = 1.f + __bfloat162float(w[tid]), w1 = 1.f + __bfloat162float(w[tid + 128]);
    const int half = geo.rotary_dim / 2;
    float inv_freq[2] = {0.f, 0.f};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const int d = tid + 128 * e;
        if (d < geo.rotary_dim) inv_freq[e] = 1.f / powf(geo.rope_theta, float(2 * (d % half)) / float(geo.rotary_dim));
    }
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const int lane_id = a.lanes[t], pos = a.positions[t];
    const __nv_bfloat16* src = is_q ? a.qg + int64_t(t) * a.qg_stride + int64_t(hb) * 2 * kHeadDim
                                    : (is_k ? a.k + int64_t(t) * a.k_stride : a.v + int64_t(t) * a.v_stride) +
                                          int64_t(kvh) * kHeadDim;
    if (!is_q && !is_k && quant) {
        kv_store_quantized(a.kv.dtype, __bfloat162float(src[tid]), __bfloat162float(src[tid + 128]),
                           kv_quant_row(a.kv.v_q, a.kv, geo.n_kv_heads, lane_id, kvh, pos), red);
        return;
    }
    if (!is_q && !is_k) {
        __nv_bfloat16* dst = kv_row(a.kv.v, a.kv, geo.n_kv_heads, lane_id, kvh, pos);
        dst[tid] = src[tid];
        dst[tid + 128] = src[tid + 128];
        return;
    }
    // Destinations first: the page-table load overlaps the norm's reduction.
    __nv_bfloat16* dst = is_q ? a.q_out + int64_t(t) * a.q_out_stride + int64_t(hb) * kHeadDim
                              : quant ? nullptr : kv_row(a.kv.k, a.kv, geo.n_kv_heads, lane_id, kvh, pos);
    const KvQuantRow kq = is_k && quant ? kv_quant_row(a.kv.k_q, a.kv, geo.n_kv_heads, lane_id, kvh, pos) : KvQuantRow{};
    const float x0 = __bfloat162float(src[tid]), x1 = __bfloat162float(src[tid + 128]);
    const float inv = rsqrtf(block_sum(x0 * x0 + x1 * x1, red) / float(kHeadDim) + geo.eps);
    const float y0 = x0 * inv * w0, y1 = x1 * inv * w1;
    xs[tid] = geo.exact ? y0 : bf16_round(y0);
    xs[tid + 128] = geo.exact ? y1 : bf16_round(y1);
    __syncthreads();
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const int d = tid + 128 * e;
        float out = xs[d];
        if (d < geo.rotary_dim) {
            const float freq = rope_position(geo, d % half, t, lane_id, pos, a.rope_thw, a.rope_offset) * inv_freq[e];
            const float rot = d < half ? -xs[d + half] : xs[d - half];
            if (geo.exact) {
                out = xs[d] * cosf(freq) + rot * sinf(freq);
            } else {
                const float c = bf16_round(cosf(freq)), s = bf16_round(sinf(freq));
                out = bf16_round(xs[d] * c) + bf16_round(rot * s);
            }
        }
        if (dst) dst[d] = __float2bfloat16(out);
        else ys[d] = out;
    }
    if (dst) return;
    __syncthreads();
    kv_store_quantized(a.kv.dtype, ys[tid], ys[tid + 128], kq, red);
}

bool geometry_ok(const AttnGeometry& g) {
    return g.head_dim == kHeadDim && g.n_kv_heads >= 1 && g.n_heads >= g.n_kv_heads &&
           g.n_heads % g.n_kv_heads == 0 && g.n_heads / g.n_kv_heads <= kMaxGroup && g.rotary_dim >= 0 &&
           g.rotary_dim % 2 == 0 && g.rotary_dim <= kHeadDim;
}

bool pools_ok(const KvPages& kv) {
    return kv.dtype == KvDtype::Bf16 ? kv.k && kv.v : kv.k_q && kv.v_q;
}

} // namespace detail

cudaError_t attn_decode_prep(const AttnPrepArgs& a, cudaStream_t stream) {
    if (!detail::geometry_ok(a.geo) || !a.qg || !a.k || !a.v || !a.q_norm || !a.k_norm || !a.lanes ||
        !a.positions || !detail::pools_ok(a.kv) || !a.kv.page_table || a.kv.max_pages < 1 || !a.q_out ||
        a.n_tokens < 1 || a.n_tokens > 65535)
        return cudaErrorInvalidValue;
    const dim3 grid(unsigned(a.geo.n_heads + 2 * a.geo.n_kv_heads), unsigned(a.n_tokens));
    return launch_pdl(detail::attn_prep_kernel, grid, dim3(128), 0, stream, a);
}

} // namespace ninfer::kernels
