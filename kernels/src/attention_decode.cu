// ninfer::kernels - decode attention: q/k norm + RoPE + KV append, split-context attention, combine.
#include "common.cuh"
#include "kv_quant.cuh"
#include "ninfer/kernels/attention_decode.h"

namespace ninfer::kernels {

namespace detail {

constexpr int kHeadDim = 256;
constexpr int kMaxGroup = 8;
constexpr int kPartFloats = kHeadDim + 2; // o[256], m, l

__device__ __forceinline__ __nv_bfloat16* kv_row(__nv_bfloat16* pages, const KvPages& kv, int n_kv, int lane,
                                                 int kvh, int pos) {
    const int page = kv.page_table[int64_t(lane) * kv.max_pages + pos / kKvPageTokens];
    return pages + ((int64_t(page) * n_kv + kvh) * kKvPageTokens + pos % kKvPageTokens) * kHeadDim;
}

// Quantises one row held by a block of 128 threads (y0 at dim tid, y1 at tid + 128) exactly as
// kv_encode_row does (kv_codec.cpp): scale from the amax, reciprocal multiply, RNE.
__device__ void kv_store_quantized(KvDtype dtype, float y0, float y1, KvQuantRow row, float* red) {
    const int tid = threadIdx.x, warp = tid >> 5;
    const float m0 = warp_max(fabsf(y0)), m1 = warp_max(fabsf(y1));
    __syncthreads(); // red may still be read by an earlier reduction
    if ((tid & 31) == 0) {
        red[warp] = m0;
        red[4 + warp] = m1;
    }
    __syncthreads();
    if (dtype == KvDtype::Fp8) {
        const float amax = fmaxf(fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3])),
                                 fmaxf(fmaxf(red[4], red[5]), fmaxf(red[6], red[7])));
        uint16_t sw = amax > 0.f ? __bfloat16_as_ushort(__float2bfloat16_rn(amax / 448.f)) : 0;
        if (sw == 0 && amax > 0.f) sw = 1;
        const float inv = sw ? 1.f / bf16_bits_to_float(sw) : 0.f;
        row.codes[tid] = __nv_cvt_float_to_fp8(fminf(fmaxf(y0 * inv, -448.f), 448.f), __NV_SATFINITE, __NV_E4M3);
        row.codes[tid + 128] = __nv_cvt_float_to_fp8(fminf(fmaxf(y1 * inv, -448.f), 448.f), __NV_SATFINITE, __NV_E4M3);
        if (tid == 0) row.scales[0] = sw;
        return;
    }
    // int8, 64-value groups: dim tid is in group tid / 64 (warps 2g, 2g+1), dim tid + 128 in 2 + tid / 64.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int grp = 2 * half + tid / 64;
        const float amax = fmaxf(red[4 * half + 2 * (tid / 64)], red[4 * half + 2 * (tid / 64) + 1]);
        uint16_t sw = amax > 0.f ? __half_as_ushort(__float2half_rn(amax / 127.f)) : 0;
        if (sw == 0 && amax > 0.f) sw = 1;
        const float inv = sw ? 1.f / f16_bits_to_float(sw) : 0.f;
        const float y = half ? y1 : y0;
        row.codes[tid + 128 * half] = uint8_t(int8_t(fminf(fmaxf(rintf(y * inv), -127.f), 127.f)));
        if (tid % 64 == 0) row.scales[grp] = sw;
    }
}

// grid (n_heads + 2 * n_kv_heads, n_tokens), 128 threads; each thread owns dims tid and tid + 128.
__global__ void attn_prep_kernel(AttnPrepArgs a) {
    __shared__ float red[32];
    __shared__ float xs[kHeadDim];
    __shared__ float ys[kHeadDim]; // quantised K: the roped row before its scale is known
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const AttnGeometry& geo = a.geo;
    const int t = blockIdx.y, hb = blockIdx.x, tid = threadIdx.x;
    const int lane_id = a.lanes[t], pos = a.positions[t];
    const bool is_q = hb < geo.n_heads, is_k = !is_q && hb < geo.n_heads + geo.n_kv_heads;
    const int kvh = is_q ? 0 : (is_k ? hb - geo.n_heads : hb - geo.n_heads - geo.n_kv_heads);
    const __nv_bfloat16* src = is_q ? a.qg + int64_t(t) * a.qg_stride + int64_t(hb) * 2 * kHeadDim
                                    : (is_k ? a.k + int64_t(t) * a.k_stride : a.v + int64_t(t) * a.v_stride) +
                                          int64_t(kvh) * kHeadDim;
    const bool quant = a.kv.dtype != KvDtype::Bf16;
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
    const float x0 = __bfloat162float(src[tid]), x1 = __bfloat162float(src[tid + 128]);
    const float inv = rsqrtf(block_sum(x0 * x0 + x1 * x1, red) / float(kHeadDim) + geo.eps);
    const __nv_bfloat16* w = is_q ? a.q_norm : a.k_norm;
    const float y0 = x0 * inv * (1.f + __bfloat162float(w[tid])), y1 = x1 * inv * (1.f + __bfloat162float(w[tid + 128]));
    xs[tid] = geo.exact ? y0 : bf16_round(y0);
    xs[tid + 128] = geo.exact ? y1 : bf16_round(y1);
    __syncthreads();
    __nv_bfloat16* dst = is_q ? a.q_out + int64_t(t) * a.q_out_stride + int64_t(hb) * kHeadDim
                              : quant ? nullptr : kv_row(a.kv.k, a.kv, geo.n_kv_heads, lane_id, kvh, pos);
    const int half = geo.rotary_dim / 2;
    for (int d = tid; d < kHeadDim; d += 128) {
        float out = xs[d];
        if (d < geo.rotary_dim) {
            const int i = d % half;
            const float inv_freq = 1.f / powf(geo.rope_theta, float(2 * i) / float(geo.rotary_dim));
            const float freq = float(pos) * inv_freq;
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
    kv_store_quantized(a.kv.dtype, ys[tid], ys[tid + 128], kv_quant_row(a.kv.k_q, a.kv, geo.n_kv_heads, lane_id, kvh, pos),
                       red);
}

// Context per block: whole 64-token pages, at most kMaxAttnChunks chunks (bounds the scratch), so
// contexts up to 32K tokens get one page per block (enough blocks to fill the GPU at any depth).
constexpr int kMaxAttnChunks = 512;
int chunk_tokens_for(int max_context) {
    const int pages = (max_context + kKvPageTokens - 1) / kKvPageTokens;
    return (pages + kMaxAttnChunks - 1) / kMaxAttnChunks * kKvPageTokens;
}

// grid (n_chunks, n_kv_heads, n_tokens), 128 threads: one context chunk for one GQA group, page by
// page with an online softmax. Scores: warp w takes rows w, w+4, ... of the page, its K rows
// loaded 8 at a time before use (one 512-byte row per warp load). Values: thread tid owns dims
// 2 tid, 2 tid + 1, 16 V rows loaded before use. fp8/int8 pages (D): the same rows as codes plus
// their scales, decoded exactly (code * scale, kv_quant.cuh) where bf16 rows are widened.
template <KvDtype D>
__global__ void __launch_bounds__(128) attn_partial_kernel(AttnDecodeArgs a, int n_chunks, int chunk_tokens) {
    constexpr int kRowsK = 8, kRowsV = 16;
    __shared__ float qs[kMaxGroup][kHeadDim];
    __shared__ float ps[kMaxGroup][kKvPageTokens];
    __shared__ float ml[kMaxGroup][2]; // running max and sum of this chunk
    __shared__ float corr[kMaxGroup];  // rescale of the accumulators for the current page
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const AttnGeometry& geo = a.geo;
    const int chunk = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int len = a.positions[t] + 1, c0 = chunk * chunk_tokens;
    if (c0 >= len) return;
    const int c1 = min(len, c0 + chunk_tokens);
    const int group = geo.n_heads / geo.n_kv_heads, lane_id = a.lanes[t];
    const float scale = rsqrtf(float(kHeadDim));
    for (int i = tid; i < group * kHeadDim; i += 128)
        qs[i / kHeadDim][i % kHeadDim] =
            __bfloat162float(a.q[int64_t(t) * a.q_stride + int64_t(kvh * group) * kHeadDim + i]) * scale;
    if (tid < kMaxGroup) {
        ml[tid][0] = -INFINITY;
        ml[tid][1] = 0.f;
    }
    __syncthreads();
    float acc[kMaxGroup][2] = {};
    for (int p0 = c0; p0 < c1; p0 += kKvPageTokens) {
        const int n = min(kKvPageTokens, c1 - p0);
        const int64_t page = a.kv.page_table[int64_t(lane_id) * a.kv.max_pages + p0 / kKvPageTokens];
        const int64_t row0 = (page * geo.n_kv_heads + kvh) * kKvPageTokens * kHeadDim; // this page's row 0
        const __nv_bfloat16* kp = D == KvDtype::Bf16 ? a.kv.k + row0 : nullptr;
        const __nv_bfloat16* vp = D == KvDtype::Bf16 ? a.kv.v + row0 : nullptr;
        // Quantised pages: this KV head's 64 code rows and their scales.
        const KvQuantRow kq = D == KvDtype::Bf16 ? KvQuantRow{} : kv_quant_row(a.kv.k_q, a.kv, geo.n_kv_heads, lane_id, kvh, p0);
        const KvQuantRow vq = D == KvDtype::Bf16 ? KvQuantRow{} : kv_quant_row(a.kv.v_q, a.kv, geo.n_kv_heads, lane_id, kvh, p0);
        constexpr int kScales = kv_scales_per_row(D, kHeadDim);
        for (int r0 = warp; r0 < n; r0 += 4 * kRowsK) {
            uint4 kr[kRowsK];
            float ks[kRowsK];
#pragma unroll
            for (int i = 0; i < kRowsK; ++i) {
                const int r = r0 + 4 * i;
                if constexpr (D == KvDtype::Bf16) {
                    kr[i] = r < n ? load_cached16(kp + int64_t(r) * kHeadDim + lane * 8) : make_uint4(0, 0, 0, 0);
                } else {
                    const uint2 c = r < n ? __ldg(reinterpret_cast<const uint2*>(kq.codes + int64_t(r) * kHeadDim + lane * 8))
                                          : make_uint2(0, 0);
                    kr[i] = make_uint4(c.x, c.y, 0, 0);
                    ks[i] = r < n ? kv_scale8(D, kq.scales + r * kScales, lane) : 0.f;
                }
            }
#pragma unroll
            for (int i = 0; i < kRowsK; ++i) {
                const int r = r0 + 4 * i;
                if (r >= n) break; // warp-uniform
                float kf[8];
                if constexpr (D == KvDtype::Bf16) {
                    const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&kr[i]);
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const float2 f = __bfloat1622float2(k2[e]);
                        kf[2 * e] = f.x;
                        kf[2 * e + 1] = f.y;
                    }
                } else {
                    kv_decode8(D, make_uint2(kr[i].x, kr[i].y), ks[i], kf);
                }
                for (int g = 0; g < group; ++g) {
                    float dot = 0.f;
#pragma unroll
                    for (int e = 0; e < 8; ++e) dot = fmaf(qs[g][lane * 8 + e], kf[e], dot);
                    dot = warp_sum(dot);
                    if (lane == 0) ps[g][r] = dot;
                }
            }
        }
        __syncthreads();
        for (int g = warp; g < group; g += 4) {
            float m = -INFINITY;
            for (int j = lane; j < n; j += 32) m = fmaxf(m, ps[g][j]);
            m = warp_max(m);
            const float m_old = ml[g][0], m_new = fmaxf(m_old, m);
            float l = 0.f;
            for (int j = lane; j < n; j += 32) {
                const float e = expf(ps[g][j] - m_new);
                ps[g][j] = e;
                l += e;
            }
            l = warp_sum(l);
            __syncwarp();
            if (lane == 0) {
                const float c = expf(m_old - m_new); // 0 on the first page (m_old = -inf)
                corr[g] = c;
                ml[g][0] = m_new;
                ml[g][1] = ml[g][1] * c + l;
            }
        }
        __syncthreads();
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g)
            if (g < group) {
                acc[g][0] *= corr[g];
                acc[g][1] *= corr[g];
            }
        for (int j0 = 0; j0 < n; j0 += kRowsV) {
            float2 vf[kRowsV];
#pragma unroll
            for (int i = 0; i < kRowsV; ++i) {
                if constexpr (D == KvDtype::Bf16) {
                    vf[i] = j0 + i < n ? __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(
                                             vp + int64_t(j0 + i) * kHeadDim + 2 * tid))
                                       : make_float2(0.f, 0.f);
                } else if (j0 + i < n) {
                    const uint16_t c = *reinterpret_cast<const uint16_t*>(vq.codes + int64_t(j0 + i) * kHeadDim + 2 * tid);
                    const float sv = kv_scale8(D, vq.scales + (j0 + i) * kScales, tid / 4); // dims 2 tid, 2 tid + 1
                    vf[i] = D == KvDtype::Fp8 ? make_float2(e4m3_to_float(uint8_t(c)) * sv, e4m3_to_float(uint8_t(c >> 8)) * sv)
                                              : make_float2(float(int8_t(c)) * sv, float(int8_t(c >> 8)) * sv);
                } else {
                    vf[i] = make_float2(0.f, 0.f);
                }
            }
#pragma unroll
            for (int i = 0; i < kRowsV; ++i) {
                if (j0 + i >= n) break;
#pragma unroll
                for (int g = 0; g < kMaxGroup; ++g)
                    if (g < group) {
                        const float p = ps[g][j0 + i];
                        acc[g][0] = fmaf(p, vf[i].x, acc[g][0]);
                        acc[g][1] = fmaf(p, vf[i].y, acc[g][1]);
                    }
            }
        }
        __syncthreads(); // ps, corr and ml are rewritten for the next page
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
        if (g < group) {
            const int h = kvh * group + g;
            float* part = a.scratch + ((int64_t(t) * geo.n_heads + h) * n_chunks + chunk) * kPartFloats;
            part[2 * tid] = acc[g][0];
            part[2 * tid + 1] = acc[g][1];
            if (tid == 0) {
                part[kHeadDim] = ml[g][0];
                part[kHeadDim + 1] = ml[g][1];
            }
        }
    }
}

// grid (n_heads, n_tokens), 256 threads (one per dim): merge the chunks, apply the output gate.
__global__ void attn_combine_kernel(AttnDecodeArgs a, int n_chunks, int chunk_tokens) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: inputs come from the previous kernel
    const int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
    const int used = (a.positions[t] + chunk_tokens) / chunk_tokens;
    const float* part = a.scratch + (int64_t(t) * a.geo.n_heads + h) * n_chunks * kPartFloats;
    float m = -INFINITY;
#pragma unroll 8
    for (int c = 0; c < used; ++c) m = fmaxf(m, part[c * kPartFloats + kHeadDim]);
    float num = 0.f, den = 0.f;
#pragma unroll 8
    for (int c = 0; c < used; ++c) {
        const float w = expf(part[c * kPartFloats + kHeadDim] - m);
        num = fmaf(w, part[c * kPartFloats + d], num);
        den = fmaf(w, part[c * kPartFloats + kHeadDim + 1], den);
    }
    const float o = a.geo.exact ? num / den : bf16_round(num / den);
    const float gate = __bfloat162float(a.qg[int64_t(t) * a.qg_stride + int64_t(h) * 2 * kHeadDim + kHeadDim + d]);
    const float sg = a.geo.exact ? 1.f / (1.f + expf(-gate)) : bf16_round(1.f / (1.f + expf(-gate)));
    a.out[int64_t(t) * a.out_stride + int64_t(h) * kHeadDim + d] = __float2bfloat16(o * sg);
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

size_t attn_decode_scratch_floats(int n_tokens, int n_heads, int max_context) {
    const int chunk_tokens = detail::chunk_tokens_for(max_context);
    const size_t n_chunks = size_t(max_context + chunk_tokens - 1) / chunk_tokens;
    return size_t(n_tokens) * size_t(n_heads) * n_chunks * detail::kPartFloats;
}

cudaError_t attn_decode_prep(const AttnPrepArgs& a, cudaStream_t stream) {
    if (!detail::geometry_ok(a.geo) || !a.qg || !a.k || !a.v || !a.q_norm || !a.k_norm || !a.lanes ||
        !a.positions || !detail::pools_ok(a.kv) || !a.kv.page_table || a.kv.max_pages < 1 || !a.q_out ||
        a.n_tokens < 1 || a.n_tokens > 65535)
        return cudaErrorInvalidValue;
    const dim3 grid(unsigned(a.geo.n_heads + 2 * a.geo.n_kv_heads), unsigned(a.n_tokens));
    return launch_pdl(detail::attn_prep_kernel, grid, dim3(128), 0, stream, a);
}

cudaError_t attn_decode(const AttnDecodeArgs& a, cudaStream_t stream) {
    if (!detail::geometry_ok(a.geo) || !a.q || !a.qg || !a.lanes || !a.positions || !detail::pools_ok(a.kv) ||
        !a.kv.page_table || !a.out || a.n_tokens < 1 || a.n_tokens > 65535 || a.max_context < 1 ||
        a.max_context > a.kv.max_pages * kKvPageTokens || !a.scratch ||
        a.scratch_floats < attn_decode_scratch_floats(a.n_tokens, a.geo.n_heads, a.max_context))
        return cudaErrorInvalidValue;
    const int chunk_tokens = detail::chunk_tokens_for(a.max_context);
    const int n_chunks = (a.max_context + chunk_tokens - 1) / chunk_tokens;
    const dim3 grid(unsigned(n_chunks), unsigned(a.geo.n_kv_heads), unsigned(a.n_tokens));
    const cudaError_t err =
        a.kv.dtype == KvDtype::Fp8 ? launch_pdl(detail::attn_partial_kernel<KvDtype::Fp8>, grid, dim3(128), 0, stream, a,
                                                n_chunks, chunk_tokens)
        : a.kv.dtype == KvDtype::Int8
            ? launch_pdl(detail::attn_partial_kernel<KvDtype::Int8>, grid, dim3(128), 0, stream, a, n_chunks, chunk_tokens)
            : launch_pdl(detail::attn_partial_kernel<KvDtype::Bf16>, grid, dim3(128), 0, stream, a, n_chunks, chunk_tokens);
    if (err != cudaSuccess) return err;
    return launch_pdl(detail::attn_combine_kernel, dim3(unsigned(a.geo.n_heads), unsigned(a.n_tokens)),
                      dim3(detail::kHeadDim), 0, stream, a, n_chunks, chunk_tokens);
}

} // namespace ninfer::kernels
