// ninfer::kernels - chunked GDN prefill, kernel 1: per chunk and key head, the WY form (K K^T, Q K^T on mma.sync, f32 forward substitution).
#include "gdn_prefill_chunked.cuh"
#include "prefill_async.cuh"

namespace ninfer::kernels::detail {

namespace {

constexpr int D = kGdnHeadDim, C = kChunk, LDB = kChunkLdb;

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

struct WySmem {
    __nv_bfloat16 cq[C][LDB], ck[C][LDB];
    float kk[C][C + 1]; // k_i.k_j (scaled)
    float qk[C][C + 1]; // q_i.k_j (scaled): in shared memory, not registers, through the solves
    float am[C][C];
    float sq[C], sk[C], gcum[C], beta[C];
};

template <int kMinBlocks>
__global__ void __launch_bounds__(256, kMinBlocks) gdn_chunk_wy_kernel(GdnPrefillArgs a, ChunkPtrs p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    WySmem& s = *reinterpret_cast<WySmem*>(smem_raw);
    const int n = blockIdx.x, r = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int hk = a.n_k_heads, hv = a.n_v_heads;
    const ChunkRows cr(n, a);
    const int t0 = cr.t0, len = cr.end;
    const int64_t row_stride = int64_t(2) * hk * D;
    for (int i = tid; i < 2 * C * (D / 8); i += 256) { // q and k rows, 16-byte pieces, zeros outside
        const int which = i / (C * (D / 8)), row = (i / (D / 8)) % C, c = (i % (D / 8)) * 8;
        const bool valid = cr.valid(row);
        const __nv_bfloat16* src = p.qk + (valid ? int64_t(t0 + row) * row_stride : 0) + (which * hk + r) * D + c;
        cp_async16_or_zero(which ? &s.ck[row][c] : &s.cq[row][c], src, valid);
    }
    cp_async_commit();
    if (tid < C) {
        const bool valid = cr.valid(tid);
        s.sq[tid] = valid ? p.qk_scale[int64_t(t0 + tid) * 2 * hk + r] : 0.f;
        s.sk[tid] = valid ? p.qk_scale[int64_t(t0 + tid) * 2 * hk + hk + r] : 0.f;
    }
    cp_async_wait<0>();
    __syncthreads();

    // K K^T and Q K^T: exact bf16 products, f32 sums. Warp: 16 rows (mt), 32 columns (nq).
    const int mt = warp & 3, nq = warp >> 2;
    float kacc[4][4] = {}, qacc[4][4] = {};
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t af[4], qf[4];
        ldmatrix_x4(af, &s.ck[mt * 16 + a_row(lane)][ks * 16 + a_col(lane)]);
        ldmatrix_x4(qf, &s.cq[mt * 16 + a_row(lane)][ks * 16 + a_col(lane)]);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
            uint32_t bf[4];
            ldmatrix_x4(bf, &s.ck[nq * 32 + np * 16 + nk_row(lane)][ks * 16 + nk_col(lane)]);
#pragma unroll
            for (int t = 0; t < 2; ++t) {
                mma(kacc[2 * np + t], af, bf[2 * t], bf[2 * t + 1]);
                mma(qacc[2 * np + t], qf, bf[2 * t], bf[2 * t + 1]);
            }
        }
    }
    const int fr = mt * 16 + (lane >> 2), fc = nq * 32 + 2 * (lane & 3); // fragment row / column base
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = fr + (e >> 1) * 8, j = fc + nt * 8 + (e & 1);
            s.kk[i][j] = kacc[nt][e] * s.sk[i] * s.sk[j];
            s.qk[i][j] = qacc[nt][e] * s.sq[i] * s.sk[j];
        }

    const int group = hv / hk;
    for (int gi = 0; gi < group; ++gi) {
        const int h = r * group + gi;
        const int64_t nh = int64_t(n) * hv + h;
        __syncthreads(); // kk written; the previous head's am/gcum/beta readers are done
        if (tid < C) {
            const bool valid = cr.valid(tid);
            s.gcum[tid] = valid ? p.gb[int64_t(h) * p.tp + t0 + tid] : 0.f;
            s.beta[tid] = valid ? p.gb[int64_t(hv + h) * p.tp + t0 + tid] : 0.f;
        }
        __syncthreads();
        if (tid == 0) // inclusive prefix sum of the log decay, in token order as the CPU op
            for (int i = 1; i < C; ++i) s.gcum[i] += s.gcum[i - 1];
        __syncthreads();
        const float gC = s.gcum[len - 1];
        if (tid < C) {
            float* sc = p.sc + nh * 3 * C;
            sc[tid] = expf(s.gcum[tid]) * s.sq[tid];
            sc[C + tid] = expf(gC - s.gcum[tid]) * s.sk[tid];
            sc[2 * C + tid] = tid == 0 ? expf(gC) : 0.f;
        }
        for (int idx = tid; idx < C * C; idx += 256) {
            const int i = idx / C, j = idx % C;
            s.am[i][j] = j < i ? s.beta[i] * expf(s.gcum[i] - s.gcum[j]) * s.kk[i][j] : 0.f;
        }
        for (int idx = tid; idx < C * C / 2; idx += 256) { // P hi/lo, two columns per store
            const int i = idx / (C / 2), j = (idx % (C / 2)) * 2;
            const float p0 = j <= i ? expf(s.gcum[i] - s.gcum[j]) * s.qk[i][j] : 0.f;
            const float p1 = j + 1 <= i ? expf(s.gcum[i] - s.gcum[j + 1]) * s.qk[i][j + 1] : 0.f;
            uint32_t* dst = reinterpret_cast<uint32_t*>(p.p + nh * 2 * C * C);
            split2(p0, p1, dst[idx], dst[C * C / 2 + idx]);
        }
        __syncthreads();
        // One right-hand-side column per thread: 128 of V (-> U), 128 of K (-> W).
        float x[C];
        const int c = tid & (D - 1);
        if (tid < D) {
#pragma unroll
            for (int i = 0; i < C; ++i) { // beta is 0 outside the chunk's rows: clamp, load, multiply
                const int t = min(max(t0 + i, 0), a.n_tokens - 1);
                x[i] = s.beta[i] * __bfloat162float(p.v[int64_t(t) * hv * D + h * D + c]);
            }
        } else {
#pragma unroll
            for (int i = 0; i < C; ++i)
                x[i] = s.beta[i] * expf(s.gcum[i]) * s.sk[i] * __bfloat162float(s.ck[i][c]);
        }
        // Forward substitution x_i -= sum_{j<i} A[i][j] x_j (two partial sums halve the chain).
#pragma unroll
        for (int i = 1; i < C; ++i) {
            float e0 = 0.f, e1 = 0.f;
#pragma unroll
            for (int j4 = 0; j4 < i; j4 += 4) {
                const float4 av = *reinterpret_cast<const float4*>(&s.am[i][j4]);
                e0 = fmaf(av.x, x[j4], e0);
                if (j4 + 1 < i) e1 = fmaf(av.y, x[j4 + 1], e1);
                if (j4 + 2 < i) e0 = fmaf(av.z, x[j4 + 2], e0);
                if (j4 + 3 < i) e1 = fmaf(av.w, x[j4 + 3], e1);
            }
            x[i] -= e0 + e1;
        }
        if (tid < D) {
            float* u = p.u + nh * C * D + c;
#pragma unroll
            for (int i = 0; i < C; ++i) u[i * D] = x[i];
        } else {
            __nv_bfloat16* w = p.w + nh * 2 * C * D + c;
#pragma unroll
            for (int i = 0; i < C; ++i) {
                const __nv_bfloat16 hi = __float2bfloat16(x[i]);
                w[i * D] = hi;
                w[C * D + i * D] = __float2bfloat16(x[i] - __bfloat162float(hi));
            }
        }
    }
}

} // namespace

size_t chunk_region_bytes(int n_tokens, int n_v_heads, size_t (&offsets)[4]) {
    const size_t nh = size_t((n_tokens + 2 * C - 2) / C) * n_v_heads; // the most chunks any start_pos gives
    offsets[0] = 0;                                                           // w
    offsets[1] = offsets[0] + align256(nh * 2 * C * D * sizeof(__nv_bfloat16)); // u
    offsets[2] = offsets[1] + align256(nh * C * D * sizeof(float));            // p
    offsets[3] = offsets[2] + align256(nh * 2 * C * C * sizeof(__nv_bfloat16)); // sc
    return offsets[3] + align256(nh * 3 * C * sizeof(float));
}

cudaError_t launch_chunk_wy(const GdnPrefillArgs& a, const ChunkPtrs& p, int min_blocks, cudaStream_t stream) {
    auto kernel = min_blocks == 2 ? gdn_chunk_wy_kernel<2> : gdn_chunk_wy_kernel<1>;
    const cudaError_t err = allow_smem(kernel, sizeof(WySmem));
    if (err != cudaSuccess) return err;
    kernel<<<dim3(unsigned(chunk_count(a)), unsigned(a.n_k_heads)), 256, sizeof(WySmem), stream>>>(a, p);
    return cudaGetLastError();
}

} // namespace ninfer::kernels::detail
