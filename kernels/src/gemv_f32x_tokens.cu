// ninfer::kernels - gemv_f32x for many tokens (contract and why: gemv_f32x_tokens.cuh).
#include "gemv_f32x_tokens.cuh"

#include <cuda_fp8.h>

namespace ninfer::kernels::detail {

namespace {

constexpr int kRows = 32;     // rows per block: warp w takes rows 8 (w % 4) .. + 7
constexpr int kTokens = 128;  // tokens per block: warp w takes 64 (w / 4) + lane + 32 j, j < 2
constexpr int kSlab = 128;    // W columns decoded into shared memory at a time
constexpr int kSlice = 32;    // x columns staged at a time (the next slice waits in registers)
constexpr int kPad = 4;       // x row padding: lanes' 16-byte reads of 32 token rows hit all banks
constexpr int kThreads = 256;
constexpr int kXPerThread = kTokens * kSlice / kThreads;

// How a block brings its 32 x 128 slab of W into shared memory as exact f32 (RowDecoder::value's
// values). Bf16, Fp8 and Q4 (the formats of the router and score): thread i owns 16 columns of row
// i / 8 and loads them as one or two vectors into registers a slab ahead, so a restage costs no
// round trip. Generic (any format, any k): element by element through RowDecoder, a round trip each.
enum class Staging { Generic, Bf16, Fp8, Q4 };

template <Staging S> struct SlabRaw {
    uint4 v0 = {}, v1 = {};
    float scale = 0.f;
    int64_t col0 = 0;
};

template <Staging S>
__device__ __forceinline__ void load_slab(const RowDecoder& d, int64_t r0, int64_t c0, SlabRaw<S>& raw) {
    if constexpr (S != Staging::Generic) {
        const int64_t row = r0 + threadIdx.x / 8;
        raw.col0 = c0 + (threadIdx.x % 8) * 16;
        if (row >= d.n || raw.col0 >= d.k) return; // zeros: the slab's padding
        if constexpr (S == Staging::Bf16) {
            const uint4* p = reinterpret_cast<const uint4*>(d.data + (row * d.k + raw.col0) * 2);
            raw.v0 = __ldg(p);
            raw.v1 = __ldg(p + 1);
            raw.scale = 1.f;
        } else if constexpr (S == Staging::Fp8) {
            raw.v0 = __ldg(reinterpret_cast<const uint4*>(d.data + row * d.k + raw.col0));
            raw.scale = d.scale_of(row, 0);
        } else {
            const uint2 w = __ldg(reinterpret_cast<const uint2*>(d.data + row * d.g * 32 + raw.col0 / 2));
            raw.v0 = make_uint4(w.x, w.y, 0, 0);
            raw.scale = d.scale_of(row, raw.col0);
        }
    }
}

template <Staging S>
__device__ __forceinline__ void store_slab(const RowDecoder& d, int64_t r0, int64_t c0, const SlabRaw<S>& raw,
                                           float (*ws)[kSlab]) {
    if constexpr (S == Staging::Generic) {
        for (int i = threadIdx.x; i < kRows * kSlab; i += kThreads) {
            const int r = i / kSlab, c = i % kSlab;
            const int64_t row = r0 + r, col = c0 + c;
            ws[r][c] = row < d.n && col < d.k ? d.value(row, col) : 0.f;
        }
    } else {
        float v[16];
        const uint32_t words[8] = {raw.v0.x, raw.v0.y, raw.v0.z, raw.v0.w, raw.v1.x, raw.v1.y, raw.v1.z, raw.v1.w};
#pragma unroll
        for (int e = 0; e < 16; ++e) {
            float code;
            if constexpr (S == Staging::Bf16) {
                code = __uint_as_float(e % 2 ? words[e / 2] & 0xFFFF0000u : words[e / 2] << 16);
            } else if constexpr (S == Staging::Fp8) {
                const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t((words[e / 4] >> (8 * (e % 4))) & 0xFF), __NV_E4M3);
                code = __half2float(__half(h));
            } else {
                const int nib = (words[e / 8] >> (4 * (e % 8))) & 0xF;
                code = float((nib ^ 8) - 8);
            }
            // RowDecoder::value: code * multiplier (exact); past k (q4 padding codes) nothing.
            v[e] = raw.col0 + e < d.k ? (S == Staging::Bf16 ? code : code * raw.scale) : 0.f;
        }
        float* dst = &ws[threadIdx.x / 8][(threadIdx.x % 8) * 16];
#pragma unroll
        for (int e = 0; e < 16; e += 4) *reinterpret_cast<float4*>(dst + e) = make_float4(v[e], v[e + 1], v[e + 2], v[e + 3]);
    }
}

template <Staging S>
__global__ void __launch_bounds__(kThreads) gemv_f32x_tokens_kernel(RowDecoder d, const float* x, int64_t x_stride,
                                                                    int n_tokens, void* y, bool y_fp32,
                                                                    int64_t y_stride) {
    __shared__ __align__(16) float ws[kRows][kSlab];
    __shared__ __align__(16) float xs[kTokens][kSlice + kPad];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t r0 = int64_t(blockIdx.x) * kRows;
    const int t0 = int(blockIdx.y) * kTokens;
    const int wr = 8 * (warp % 4), wt = 64 * (warp / 4) + lane;
    // Thread i stages x elements i + 256 m: token (i + 256 m) / 32, column i % 32 (coalesced rows).
    const int xc = threadIdx.x % kSlice, xt = threadIdx.x / kSlice;
    float next[kXPerThread];
    auto load_x = [&](int64_t c0) {
#pragma unroll
        for (int m = 0; m < kXPerThread; ++m) {
            const int t = t0 + xt + m * (kThreads / kSlice);
            const int64_t c = c0 + xc;
            next[m] = t < n_tokens && c < d.k ? __ldg(x + int64_t(t) * x_stride + c) : 0.f;
        }
    };
    SlabRaw<S> raw;
    load_slab<S>(d, r0, 0, raw);
    float acc[8][2] = {};
    load_x(0);
    for (int64_t c0 = 0; c0 < d.k; c0 += kSlice) {
        if (c0 % kSlab == 0) { // a new slab of W (after the previous one's last reads)
            __syncthreads();
            store_slab<S>(d, r0, c0, raw, ws);
            if (c0 + kSlab < d.k) load_slab<S>(d, r0, c0 + kSlab, raw); // a slab ahead
        }
        __syncthreads(); // the previous slice's reads of xs are done
#pragma unroll
        for (int m = 0; m < kXPerThread; ++m) xs[xt + m * (kThreads / kSlice)][xc] = next[m];
        __syncthreads();
        if (c0 + kSlice < d.k) load_x(c0 + kSlice); // in flight during this slice's arithmetic
        const int wc0 = int(c0 % kSlab);
#pragma unroll
        for (int c = 0; c < kSlice; c += 4) {
            const float4 x0 = *reinterpret_cast<const float4*>(&xs[wt][c]);
            const float4 x1 = *reinterpret_cast<const float4*>(&xs[wt + 32][c]);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float4 w = *reinterpret_cast<const float4*>(&ws[wr + i][wc0 + c]);
                acc[i][0] = fmaf(w.x, x0.x, acc[i][0]);
                acc[i][0] = fmaf(w.y, x0.y, acc[i][0]);
                acc[i][0] = fmaf(w.z, x0.z, acc[i][0]);
                acc[i][0] = fmaf(w.w, x0.w, acc[i][0]);
                acc[i][1] = fmaf(w.x, x1.x, acc[i][1]);
                acc[i][1] = fmaf(w.y, x1.y, acc[i][1]);
                acc[i][1] = fmaf(w.z, x1.z, acc[i][1]);
                acc[i][1] = fmaf(w.w, x1.w, acc[i][1]);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const int t = t0 + wt + 32 * j;
        if (t >= n_tokens) continue;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int64_t r = r0 + wr + i;
            if (r >= d.n) continue;
            const int64_t at = int64_t(t) * y_stride + r;
            if (y_fp32) static_cast<float*>(y)[at] = acc[i][j];
            else static_cast<__nv_bfloat16*>(y)[at] = __float2bfloat16(acc[i][j]);
        }
    }
}

} // namespace

cudaError_t launch_gemv_f32x_tokens(const RowDecoder& d, const float* x, int64_t x_stride, int n_tokens, void* y,
                                    bool y_fp32, int64_t y_stride, cudaStream_t stream) {
    const dim3 grid(unsigned((d.n + kRows - 1) / kRows), unsigned((n_tokens + kTokens - 1) / kTokens));
    // The vector staging reads 16-column pieces: whole ones need k % 16 == 0 where rows are not padded
    // (q4 rows are padded to 128 codes), and 16-byte aligned rows.
    const bool aligned16 = (reinterpret_cast<uintptr_t>(d.data) & 15u) == 0;
    if (d.format == WeightFormat::Q4G64Fp16 && aligned16)
        gemv_f32x_tokens_kernel<Staging::Q4><<<grid, kThreads, 0, stream>>>(d, x, x_stride, n_tokens, y, y_fp32, y_stride);
    else if (d.format == WeightFormat::Bf16 && aligned16 && d.k % 16 == 0)
        gemv_f32x_tokens_kernel<Staging::Bf16><<<grid, kThreads, 0, stream>>>(d, x, x_stride, n_tokens, y, y_fp32, y_stride);
    else if (d.format == WeightFormat::Fp8E4m3RowBf16 && aligned16 && d.k % 16 == 0)
        gemv_f32x_tokens_kernel<Staging::Fp8><<<grid, kThreads, 0, stream>>>(d, x, x_stride, n_tokens, y, y_fp32, y_stride);
    else
        gemv_f32x_tokens_kernel<Staging::Generic><<<grid, kThreads, 0, stream>>>(d, x, x_stride, n_tokens, y, y_fp32, y_stride);
    return cudaGetLastError();
}

} // namespace ninfer::kernels::detail
