// ninfer::kernels - glue kernels of the CUDA model runner: embedding, SwiGLU, MoE, logits scatter
// (the residual + RMSNorm is in add_rmsnorm.cu).
#include "common.cuh"
#include "gemv_f32x_tokens.cuh"
#include "int8_x.cuh"
#include "moe_combine.cuh"
#include "moe_route_warp.cuh"
#include "ninfer/kernels/runner_ops.h"
#include "row_decoder.cuh"

namespace ninfer::kernels {

namespace detail {

__global__ void embed_kernel(RowDecoder d, const int32_t* ids, float* out, int64_t out_stride) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: ids and out are shared with earlier kernels
    const int t = blockIdx.x;
    const int64_t row = ids[t];
    for (int64_t c = threadIdx.x; c < d.k; c += blockDim.x) out[t * out_stride + c] = d.value(row, c);
}

// grid (ceil(n/8), n_tokens), 256 threads: one warp per row.
__global__ void gemv_f32x_kernel(RowDecoder d, const float* x, int64_t x_stride, void* y, bool y_fp32,
                                 int64_t y_stride) {
    const int t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * 8 + warp;
    if (r >= d.n) return;
    float acc = 0.f;
    for (int64_t c = lane; c < d.k; c += 32) acc = fmaf(d.value(r, c), x[t * x_stride + c], acc);
    acc = warp_sum(acc);
    if (lane == 0) {
        if (y_fp32) static_cast<float*>(y)[t * y_stride + r] = acc;
        else static_cast<__nv_bfloat16*>(y)[t * y_stride + r] = __float2bfloat16(acc);
    }
}

// Element i of row t of both swiglu kernels: v = silu(gate) * up stored as out (bf16), out32 and
// out_lo (the low half) where given; returns the bf16 value and its low half.
struct SwigluHiLo {
    __nv_bfloat16 hi, lo;
};
__device__ __forceinline__ SwigluHiLo swiglu_element(const float* in, int64_t in_stride, int inter, int t, int i,
                                                     __nv_bfloat16* out, float* out32, __nv_bfloat16* out_lo,
                                                     int64_t out_stride) {
    const float g = in[t * in_stride + i], u = in[t * in_stride + inter + i];
    const float v = silu(g) * u;
    const __nv_bfloat16 hi = __float2bfloat16(v), lo = __float2bfloat16(v - __bfloat162float(hi));
    if (out) out[t * out_stride + i] = hi;
    if (out32) out32[t * out_stride + i] = v;
    if (out_lo) out_lo[t * out_stride + i] = lo;
    return {hi, lo};
}

__global__ void swiglu_kernel(const float* in, int64_t in_stride, int inter, __nv_bfloat16* out, float* out32,
                              __nv_bfloat16* out_lo, int64_t out_stride) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    const int t = blockIdx.y;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < inter; i += gridDim.x * blockDim.x)
        swiglu_element(in, in_stride, inter, t, i, out, out32, out_lo, out_stride);
}

// swiglu with int8 rows: block (b, t) owns elements [512 b, 512 b + 512) of row t (8 whole units):
// it writes them as swiglu_kernel does, keeps hi / lo in shared memory, then its first warp
// quantises the 8 units into out8.
constexpr int kSwigluChunk = 512;
__global__ void __launch_bounds__(256) swiglu_int8_kernel(const float* in, int64_t in_stride, int inter,
                                                          __nv_bfloat16* out, float* out32, __nv_bfloat16* out_lo,
                                                          int64_t out_stride, Int8X out8) {
    __shared__ __align__(16) __nv_bfloat16 hi_lo[2 * kSwigluChunk];
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    const int t = blockIdx.y, i0 = blockIdx.x * kSwigluChunk, len = min(kSwigluChunk, inter - i0);
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
        const SwigluHiLo e = swiglu_element(in, in_stride, inter, t, i0 + j, out, out32, out_lo, out_stride);
        hi_lo[j] = e.hi;
        hi_lo[kSwigluChunk + j] = e.lo;
    }
    __syncthreads();
    // All 8 units, also past inter in the last block: they are the Int8X's zero padding (gemv.h
    // int8_x_units), which the GEMV reads in its last step (the quantiser gives q 0, d 0 past len).
    constexpr int units = kSwigluChunk / 64;
    const int64_t u0 = blockIdx.x * int64_t(units);
    if (threadIdx.x < 32)
        q4a8_quantise_rows<false>(hi_lo, out_lo ? hi_lo + kSwigluChunk : nullptr, 0, 1, len, 0, units, threadIdx.x, 32,
                                  [&](int, int ui, int c, const uint4& words, float d16) {
                                      const int64_t u = u0 + ui;
                                      *reinterpret_cast<uint4*>(out8.q + t * out8.row_bytes + u * 64 + c * 16) = words;
                                      if (c == 0) out8.d[u * 8 + t] = d16;
                                  });
    if (t == 0) zero_int8_slots(out8.d + u0 * 8, gridDim.y, units, threadIdx.x, blockDim.x);
}

// One warp per token (moe_route_warp.cuh).
__global__ void moe_route_kernel(const float* logits, int64_t stride, int n_experts, int top_k, int32_t* ids,
                                 float* weights) {
    const int t = blockIdx.x, lane = threadIdx.x;
    int id, rank;
    float p, sum;
    route_token_warp_any(logits + t * stride, n_experts, top_k, id, p, sum, rank);
    if (lane < top_k) {
        ids[t * top_k + lane] = id;
        weights[t * top_k + lane] = p / sum;
    }
}

// grid (ceil(rows/8), n_tokens*top_k), 256 threads: one warp per output row.
__global__ void moe_gemv_kernel(RowDecoder d, MoeGemvArgs a) {
    const int slot = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = blockIdx.x * 8 + warp;
    if (r >= a.rows_per_expert) return;
    const int t = slot / a.top_k;
    const int64_t row = int64_t(a.ids[slot]) * a.rows_per_expert + r;
    const float* x = a.x + int64_t(a.x_per_slot ? slot : t) * a.x_stride;
    float acc = 0.f;
    if (d.format == WeightFormat::Bf16) {
        for (int64_t c = lane; c < d.k; c += 32) acc = fmaf(d.code(row, c), x[c], acc);
    } else if (d.format == WeightFormat::Fp8E4m3RowBf16) {
        for (int64_t c = lane; c < d.k; c += 32) acc = fmaf(d.code(row, c), x[c], acc);
        acc *= d.scale_of(row, 0);
    } else if (d.format != WeightFormat::Q4G64Fp16) { // q5/q6/q8/nvfp4: element by element
        for (int64_t c = lane; c < d.k; c += 32) acc = fmaf(d.value(row, c), x[c], acc);
    } else {
        for (int64_t g0 = 0; g0 < d.k; g0 += 64) {
            float part = 0.f;
            for (int64_t c = g0 + lane; c < min(g0 + 64, d.k); c += 32)
                part = fmaf(d.code(row, c), x[c], part);
            acc = fmaf(part, d.scale_of(row, g0), acc);
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) a.y[int64_t(slot) * a.y_stride + r] = acc;
}

// Fast f32-x row dots (gemv_f32x and moe_gemv when k % 16 == 0 and x is 16-byte aligned):
// each lane streams 16-byte vectors of its row (artifact layout, coalesced along k) and multiplies
// them with f32 x from L1. kLpr lanes share a row (the row's 16-byte chunks, rounded up to a power
// of two, at most 32), so short rows (the experts' down projection) keep every lane busy; each lane
// works on 4 rows at once, all their loads issued before the first use. Products exact, f32 sums.
struct RowsF32x {
    RowDecoder d;
    int64_t row_bytes;
    const int32_t* ids; // null: plain matrix (slot = token)
    int rows, top_k;    // rows per expert (n for a plain matrix)
    const float* x;
    int64_t x_stride;
    bool x_per_slot;
    void* y;
    bool y_fp32;
    int64_t y_stride;
};

template <WeightFormat F>
__device__ __forceinline__ float chunk_dot(uint4 w, const float* x, int64_t e0, int64_t k, float q4_scale) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    float s = 0.f;
    if constexpr (F == WeightFormat::Bf16) { // 8 elements
        const float4 xa = __ldg(reinterpret_cast<const float4*>(x + e0));
        const float4 xb = __ldg(reinterpret_cast<const float4*>(x + e0 + 4));
        const float xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            s = fmaf(__uint_as_float(words[m] << 16), xs[2 * m], s);
            s = fmaf(__uint_as_float(words[m] & 0xFFFF0000u), xs[2 * m + 1], s);
        }
    } else if constexpr (F == WeightFormat::Fp8E4m3RowBf16) { // 16 elements
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const float4 xv = __ldg(reinterpret_cast<const float4*>(x + e0 + 4 * m));
            const uint32_t p02 = fp8_pair_to_bf16(words[m]), p13 = fp8_pair_to_bf16(words[m] >> 8);
            s = fmaf(__uint_as_float(p02 << 16), xv.x, s);
            s = fmaf(__uint_as_float(p13 << 16), xv.y, s);
            s = fmaf(__uint_as_float(p02 & 0xFFFF0000u), xv.z, s);
            s = fmaf(__uint_as_float(p13 & 0xFFFF0000u), xv.w, s);
        }
    } else { // 32 codes of one group: 2^23 + u - (2^23 + 8) = u - 8, exact
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            if (e0 + 8 * m >= k) break; // the group's codes past k (padding) meet no x
            const uint32_t t = words[m] ^ 0x88888888u;
            const float4 xa = __ldg(reinterpret_cast<const float4*>(x + e0 + 8 * m));
            const float4 xb = __ldg(reinterpret_cast<const float4*>(x + e0 + 8 * m + 4));
            const float xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
            for (int j = 0; j < 8; ++j)
                s = fmaf(__int_as_float(0x4B000000 | ((t >> (4 * j)) & 0xF)) - 8388616.f, xs[j], s);
        }
        s *= q4_scale;
    }
    return s;
}

template <WeightFormat F, int kLpr>
__global__ void __launch_bounds__(256) rows_f32x_kernel(RowsF32x a) {
    constexpr int kRowsPerPass = 32 / kLpr, kRows = 4 * kRowsPerPass;
    constexpr int kElems = F == WeightFormat::Bf16 ? 8 : F == WeightFormat::Fp8E4m3RowBf16 ? 16 : 32;
    const int slot = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int sub = lane / kLpr, ch0 = lane % kLpr;
    const int warp_row = (blockIdx.x * 8 + warp) * kRows, r_base = warp_row + sub;
    if (warp_row >= a.rows) return; // whole warps only: the lanes below shuffle together
    const int t = a.ids ? slot / a.top_k : slot;
    const int64_t row0 = a.ids ? int64_t(a.ids[slot]) * a.rows : 0;
    const float* x = a.x + int64_t(a.ids && a.x_per_slot ? slot : t) * a.x_stride;
    const int64_t chunks = a.row_bytes / 16;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int64_t rows[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) rows[j] = row0 + min(r_base + j * kRowsPerPass, a.rows - 1);
    for (int64_t ch = ch0; ch < chunks; ch += kLpr) {
        uint4 w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = load_stream16(a.d.data + rows[j] * a.row_bytes + ch * 16);
        const int64_t e0 = ch * kElems;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float sc = F == WeightFormat::Q4G64Fp16
                                 ? __half2float(reinterpret_cast<const __half*>(a.d.scales)[rows[j] * a.d.g + ch / 2])
                                 : 1.f;
            acc[j] += chunk_dot<F>(w[j], x, e0, a.d.k, sc);
        }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int o = kLpr / 2; o > 0; o >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
        const int r = r_base + j * kRowsPerPass;
        if (ch0 != 0 || r >= a.rows) continue;
        float v = acc[j];
        if (F == WeightFormat::Fp8E4m3RowBf16) v *= a.d.scale_of(rows[j], 0);
        const int64_t at = int64_t(slot) * a.y_stride + r;
        if (a.y_fp32) static_cast<float*>(a.y)[at] = v;
        else static_cast<__nv_bfloat16*>(a.y)[at] = __float2bfloat16(v);
    }
}

template <WeightFormat F>
void launch_rows_f32x(const RowsF32x& a, int n_slots, cudaStream_t stream) {
    const int64_t chunks = a.row_bytes / 16;
    const int lpr = chunks >= 32 ? 32 : chunks >= 16 ? 16 : chunks >= 8 ? 8 : 4;
    const int rows_per_block = 8 * 4 * (32 / lpr);
    const dim3 grid(unsigned((a.rows + rows_per_block - 1) / rows_per_block), unsigned(n_slots));
    switch (lpr) {
    case 32: rows_f32x_kernel<F, 32><<<grid, 256, 0, stream>>>(a); break;
    case 16: rows_f32x_kernel<F, 16><<<grid, 256, 0, stream>>>(a); break;
    case 8: rows_f32x_kernel<F, 8><<<grid, 256, 0, stream>>>(a); break;
    default: rows_f32x_kernel<F, 4><<<grid, 256, 0, stream>>>(a); break;
    }
}

// True (and launched) when the fast kernel applies: k % 16 == 0, x and its stride 16-byte aligned.
bool try_rows_f32x(const WeightView& w, const int32_t* ids, int rows, int top_k, const float* x, int64_t x_stride,
                   bool x_per_slot, void* y, bool y_fp32, int64_t y_stride, int n_slots, cudaStream_t stream) {
    if (w.format > WeightFormat::Q4G64Fp16) return false; // the vector kernel decodes bf16, fp8 and q4
    if (w.k % 16 != 0 || (reinterpret_cast<uintptr_t>(x) & 15u) != 0 || x_stride % 4 != 0 ||
        (reinterpret_cast<uintptr_t>(w.data) & 15u) != 0)
        return false;
    RowsF32x a{make_decoder(w), 0, ids, rows, top_k, x, x_stride, x_per_slot, y, y_fp32, y_stride};
    a.row_bytes = w.format == WeightFormat::Bf16 ? 2 * w.k : w.format == WeightFormat::Fp8E4m3RowBf16 ? w.k : a.d.g * 32;
    switch (w.format) {
    case WeightFormat::Bf16: launch_rows_f32x<WeightFormat::Bf16>(a, n_slots, stream); break;
    case WeightFormat::Fp8E4m3RowBf16: launch_rows_f32x<WeightFormat::Fp8E4m3RowBf16>(a, n_slots, stream); break;
    case WeightFormat::Q4G64Fp16: launch_rows_f32x<WeightFormat::Q4G64Fp16>(a, n_slots, stream); break;
    default: return false;
    }
    return true;
}

__global__ void moe_combine_kernel(const float* y, int64_t y_stride, const float* weights, int top_k,
                                   const float* shared, int64_t shared_stride, const float* score,
                                   int64_t score_stride, float* out, int64_t out_stride, int dim) {
    moe_combine_token(
        y, y_stride, [](int pair) { return int64_t(pair); }, weights, top_k, shared, shared_stride, score,
        score_stride, out, out_stride, dim);
}

__global__ void scatter_rows_kernel(const float* src, int64_t src_stride, const int32_t* lanes, float* dst,
                                    int64_t dst_stride, int64_t n) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    const int t = blockIdx.y;
    const int64_t lane = lanes[t];
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        dst[lane * dst_stride + i] = src[t * src_stride + i];
}

bool format_ok(const WeightView& w) {
    return w.data && w.n >= 1 && w.k >= 1 && w.layout == WeightLayout::Artifact &&
           (w.format != WeightFormat::Nvfp4 || (w.n % 128 == 0 && w.k % 64 == 0));
}

} // namespace detail

cudaError_t embed_rows(const WeightView& w, const int32_t* ids, int n_tokens, float* out, int64_t out_stride,
                       cudaStream_t stream) {
    if (!detail::format_ok(w) || !ids || !out || n_tokens < 1 || n_tokens > 65535 || out_stride < w.k)
        return cudaErrorInvalidValue;
    return launch_pdl(detail::embed_kernel, dim3(n_tokens), dim3(256), 0, stream, detail::make_decoder(w), ids, out,
                      out_stride);
}

cudaError_t gemv_f32x(const WeightView& w, const float* x, int64_t x_stride, int n_tokens, void* y, bool y_fp32,
                      int64_t y_stride, cudaStream_t stream) {
    if (!detail::format_ok(w) || !x || !y || n_tokens < 1 || n_tokens > 65535) return cudaErrorInvalidValue;
    if (n_tokens >= detail::kF32xTokensMinTokens && w.n >= detail::kF32xTokensMinRows)
        return detail::launch_gemv_f32x_tokens(detail::make_decoder(w), x, x_stride, n_tokens, y, y_fp32, y_stride, stream);
    if (detail::try_rows_f32x(w, nullptr, int(w.n), 1, x, x_stride, false, y, y_fp32, y_stride, n_tokens, stream))
        return cudaGetLastError();
    const dim3 grid(unsigned((w.n + 7) / 8), unsigned(n_tokens));
    detail::gemv_f32x_kernel<<<grid, 256, 0, stream>>>(detail::make_decoder(w), x, x_stride, y, y_fp32, y_stride);
    return cudaGetLastError();
}

cudaError_t swiglu(const float* in, int64_t in_stride, int inter, __nv_bfloat16* out, float* out32,
                   int64_t out_stride, int n_rows, cudaStream_t stream, __nv_bfloat16* out_lo, const Int8X& out8) {
    if (!in || (!out && !out32) || inter < 1 || n_rows < 1 || n_rows > 65535) return cudaErrorInvalidValue;
    if (out8.q && (!out || n_rows > kGemvMaxTokens || inter % 16 != 0 || out_stride % 8 != 0 ||
                   (reinterpret_cast<uintptr_t>(out) & 15u) || (reinterpret_cast<uintptr_t>(out_lo) & 15u) ||
                   (reinterpret_cast<uintptr_t>(out8.q) & 15u) || !out8.d || (reinterpret_cast<uintptr_t>(out8.d) & 7u) ||
                   out8.row_bytes % 16 != 0 || out8.row_bytes < int8_x_units(inter) * 64))
        return cudaErrorInvalidValue;
    if (out8.q)
        return launch_pdl(detail::swiglu_int8_kernel, dim3(unsigned((inter + detail::kSwigluChunk - 1) / detail::kSwigluChunk), unsigned(n_rows)),
                          dim3(256), 0, stream, in, in_stride, inter, out, out32, out_lo, out_stride, out8);
    // One element a thread: a thread's second element would wait for its first one's store (the
    // compiler cannot hoist the loads above it), a second dependent round trip.
    const dim3 grid(unsigned((inter + 255) / 256), unsigned(n_rows));
    return launch_pdl(detail::swiglu_kernel, grid, dim3(256), 0, stream, in, in_stride, inter, out, out32, out_lo,
                      out_stride);
}

cudaError_t moe_route(const float* logits, int64_t logits_stride, int n_experts, int top_k, int32_t* ids,
                      float* weights, int n_tokens, cudaStream_t stream) {
    if (!logits || !ids || !weights || n_experts < 1 || n_experts > 1024 || top_k < 1 || top_k > 32 ||
        top_k > n_experts || n_tokens < 1 || n_tokens > 65535)
        return cudaErrorInvalidValue;
    detail::moe_route_kernel<<<n_tokens, 32, 0, stream>>>(logits, logits_stride, n_experts, top_k, ids, weights);
    return cudaGetLastError();
}

cudaError_t moe_gemv(const MoeGemvArgs& a, cudaStream_t stream) {
    if (!detail::format_ok(a.w) || !a.ids || !a.x || !a.y || a.rows_per_expert < 1 || a.top_k < 1 ||
        a.n_tokens < 1 || int64_t(a.n_tokens) * a.top_k > 65535 || a.w.n % a.rows_per_expert != 0)
        return cudaErrorInvalidValue;
    if (detail::try_rows_f32x(a.w, a.ids, a.rows_per_expert, a.top_k, a.x, a.x_stride, a.x_per_slot, a.y, true,
                              a.y_stride, a.n_tokens * a.top_k, stream))
        return cudaGetLastError();
    const dim3 grid(unsigned((a.rows_per_expert + 7) / 8), unsigned(a.n_tokens * a.top_k));
    detail::moe_gemv_kernel<<<grid, 256, 0, stream>>>(detail::make_decoder(a.w), a);
    return cudaGetLastError();
}

cudaError_t moe_combine(const float* y, int64_t y_stride, const float* weights, int top_k, const float* shared,
                        int64_t shared_stride, const float* score, int64_t score_stride, float* out,
                        int64_t out_stride, int dim, int n_tokens, cudaStream_t stream) {
    if (!y || !weights || !shared || !score || !out || dim < 1 || n_tokens < 1 || n_tokens > 65535)
        return cudaErrorInvalidValue;
    const dim3 grid(unsigned(std::min(64, (dim + 255) / 256)), unsigned(n_tokens));
    detail::moe_combine_kernel<<<grid, 256, 0, stream>>>(y, y_stride, weights, top_k, shared, shared_stride, score,
                                                          score_stride, out, out_stride, dim);
    return cudaGetLastError();
}

cudaError_t scatter_rows(const float* src, int64_t src_stride, const int32_t* lanes, float* dst, int64_t dst_stride,
                         int64_t n, int n_tokens, cudaStream_t stream) {
    if (!src || !lanes || !dst || n < 1 || n_tokens < 1 || n_tokens > 65535) return cudaErrorInvalidValue;
    const dim3 grid(unsigned(std::min<int64_t>(256, (n + 255) / 256)), unsigned(n_tokens));
    return launch_pdl(detail::scatter_rows_kernel, grid, dim3(256), 0, stream, src, src_stride, lanes, dst, dst_stride,
                      n);
}

} // namespace ninfer::kernels
