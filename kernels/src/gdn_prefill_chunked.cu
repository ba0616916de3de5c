// ninfer::kernels - chunked Gated DeltaNet prefill: per-chunk WY prep (all chunks in parallel), then a serial state pass, on mma.sync.
#include "gdn_prefill_chunked.cuh"
#include "prefill_async.cuh"

namespace ninfer::kernels::detail {

namespace {

constexpr int D = kGdnHeadDim, C = kChunk;
constexpr int LDB = D + 8;  // bf16 row of 128 + 16 bytes: ldmatrix rows land in distinct banks
constexpr int LDP = C + 8;  // bf16 row of 64 + 16 bytes
constexpr int kSlice = 64;  // state columns per block of the state pass
static_assert(kSlice == C, "the state pass shares LDP between chunk-wide and slice-wide tiles");

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

__device__ __forceinline__ uint32_t pack_bf16(float lo_half, float hi_half) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo_half, hi_half);
    return *reinterpret_cast<const uint32_t*>(&v);
}
// x = hi + lo with hi = bf16(x), lo = bf16(x - hi): 16 significant bits, so a product of two split
// operands (dropping lo.lo) is good to ~2^-16 relative, where one bf16 term alone gives ~2^-8.
__device__ __forceinline__ void split2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
    const float h0 = __bfloat162float(__float2bfloat16(x0)), h1 = __bfloat162float(__float2bfloat16(x1));
    hi = pack_bf16(h0, h1);
    lo = pack_bf16(x0 - h0, x1 - h1);
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_bf16_16816(d, a[0], a[1], a[2], a[3], b0, b1);
}
// Fragment addresses (lane l): A 16x16 from row-major [m][k]; B 16x16 (two n8 tiles) from [n][k]
// (non-trans) or A from [k][m] (trans) share one formula; B from row-major [k][n] (trans).
__device__ __forceinline__ int a_row(int lane) { return lane & 15; }
__device__ __forceinline__ int a_col(int lane) { return (lane >> 4) * 8; }
__device__ __forceinline__ int nk_row(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
__device__ __forceinline__ int nk_col(int lane) { return ((lane >> 3) & 1) * 8; }

// Chunks sit at absolute multiples of C (a.start_pos is the first token's position), so a prompt
// prefilled in several calls is cut into the same chunks as in one call, except the chunk a call
// boundary falls in. Chunk n holds call tokens t0 + row for rows [begin, end).
__host__ __device__ __forceinline__ int chunk_phase(const GdnPrefillArgs& a) { return int(a.start_pos % C); }
__host__ __device__ __forceinline__ int chunk_count(const GdnPrefillArgs& a) {
    return (a.n_tokens + chunk_phase(a) + C - 1) / C;
}
struct ChunkRows {
    int t0, begin, end;
    __device__ ChunkRows(int n, const GdnPrefillArgs& a)
        : t0(n * C - chunk_phase(a)), begin(max(0, -t0)), end(min(C, a.n_tokens - t0)) {}
    __device__ bool valid(int row) const { return row >= begin && row < end; }
};

// ---- kernel 1: per chunk and key head ----

struct WySmem {
    __nv_bfloat16 cq[C][LDB], ck[C][LDB];
    float kk[C][C + 1];
    float am[C][C];
    float sq[C], sk[C], gcum[C], beta[C];
};

__global__ void __launch_bounds__(256, 2) gdn_chunk_wy_kernel(GdnPrefillArgs a, ChunkPtrs p) {
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
            qacc[nt][e] *= s.sq[i] * s.sk[j];
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
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                const int i = fr + (e >> 1) * 8, j = fc + nt * 8;
                const float p0 = j <= i ? expf(s.gcum[i] - s.gcum[j]) * qacc[nt][e] : 0.f;
                const float p1 = j + 1 <= i ? expf(s.gcum[i] - s.gcum[j + 1]) * qacc[nt][e + 1] : 0.f;
                uint32_t hi, lo;
                split2(p0, p1, hi, lo);
                uint32_t* dst = reinterpret_cast<uint32_t*>(p.p + nh * 2 * C * C);
                dst[(i * C + j) / 2] = hi;
                dst[(C * C + i * C + j) / 2] = lo;
            }
        __syncthreads();
        // One right-hand-side column per thread: 128 of V (-> U), 128 of K (-> W).
        float x[C];
        const int c = tid & (D - 1);
        if (tid < D) {
#pragma unroll
            for (int i = 0; i < C; ++i)
                x[i] = cr.valid(i) ? s.beta[i] * __bfloat162float(p.v[int64_t(t0 + i) * hv * D + h * D + c]) : 0.f;
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

// acc[nt] += (Ah + Al) (Bh + Bl) minus Al.Bl, for 16 rows (row0..) and 32 columns (col0..) over
// k-steps [0, ksteps) of at most KS: A row-major [m][k] (ldmatrix), B row-major [k][n] (trans).
// Without al (A exact bf16) the products are Ah.Bl + Ah.Bh. Small terms first.
template <int KS, int LDA>
__device__ __forceinline__ void split_product(float (&acc)[4][4], const __nv_bfloat16 (*ah)[LDA], const __nv_bfloat16 (*al)[LDA],
                                              const __nv_bfloat16 (*bh)[LDP], const __nv_bfloat16 (*bl)[LDP], int row0,
                                              int col0, int ksteps, int lane) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        if (ks >= ksteps) break; // warp-uniform
        uint32_t fh[4], fl[4];
        ldmatrix_x4(fh, &ah[row0 + a_row(lane)][ks * 16 + a_col(lane)]);
        if (al) ldmatrix_x4(fl, &al[row0 + a_row(lane)][ks * 16 + a_col(lane)]);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
            uint32_t gh[4], gl[4];
            ldmatrix_x4_trans(gh, &bh[ks * 16 + a_row(lane)][col0 + np * 16 + a_col(lane)]);
            ldmatrix_x4_trans(gl, &bl[ks * 16 + a_row(lane)][col0 + np * 16 + a_col(lane)]);
#pragma unroll
            for (int t = 0; t < 2; ++t) {
                if (al) mma(acc[2 * np + t], fl, gh[2 * t], gh[2 * t + 1]);
                mma(acc[2 * np + t], fh, gl[2 * t], gl[2 * t + 1]);
                mma(acc[2 * np + t], fh, gh[2 * t], gh[2 * t + 1]);
            }
        }
    }
}

// ---- kernel 2: per value head and 64-column state slice, chunks in order ----

struct StateSmem {
    __nv_bfloat16 wh[C][LDB], wl[C][LDB]; // W hi / lo [token][dk]
    __nv_bfloat16 cq[C][LDB], ck[C][LDB]; // raw q, k [token][dk]
    __nv_bfloat16 ph[C][LDP], pl[C][LDP]; // P hi / lo [token i][token j]
    __nv_bfloat16 sh[D][LDP], sl[D][LDP]; // S hi / lo [dk][column]
    __nv_bfloat16 vh[C][LDP], vl[C][LDP]; // V' hi / lo [token][column]
    __nv_bfloat16 xh[C][LDP], xl[C][LDP]; // exp(G_C - G_j) sk_j V'_j hi / lo
    float sc[2][3][C];                    // the chunk's scales, double-buffered with W
};

__global__ void __launch_bounds__(256, 1) gdn_chunk_state_kernel(GdnPrefillArgs a, ChunkPtrs p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    StateSmem& s = *reinterpret_cast<StateSmem*>(smem_raw);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, h = blockIdx.y, col0 = blockIdx.x * kSlice;
    const int hk = a.n_k_heads, hv = a.n_v_heads, T = a.n_tokens, r = h / (hv / hk);
    const int n_chunks = chunk_count(a);
    const int64_t row_stride = int64_t(2) * hk * D;

    auto load_w = [&](int n) { // W hi/lo and the scales
        if (n >= n_chunks) return;
        const int64_t nh = int64_t(n) * hv + h;
        for (int i = tid; i < 2 * C * (D / 8); i += 256) {
            const int which = i / (C * (D / 8)), row = (i / (D / 8)) % C, c = (i % (D / 8)) * 8;
            cp_async16(which ? &s.wl[row][c] : &s.wh[row][c], p.w + (nh * 2 + which) * C * D + row * D + c);
        }
        if (tid < 3 * C / 4) cp_async16(&s.sc[n & 1][0][tid * 4], p.sc + nh * 3 * C + tid * 4);
    };
    auto load_rows = [&](int n, int which, __nv_bfloat16 (*dst)[LDB]) { // raw q (0) or k (1) rows
        const ChunkRows cr(n, a);
        for (int i = tid; i < C * (D / 8); i += 256) {
            const int row = i / (D / 8), c = (i % (D / 8)) * 8;
            const bool valid = cr.valid(row);
            cp_async16_or_zero(&dst[row][c], p.qk + (valid ? int64_t(cr.t0 + row) * row_stride : 0) + (which * hk + r) * D + c, valid);
        }
    };
    auto load_pq = [&](int n) {
        if (n >= n_chunks) return;
        load_rows(n, 0, s.cq);
        const int64_t nh = int64_t(n) * hv + h;
        for (int i = tid; i < 2 * C * (C / 8); i += 256) {
            const int which = i / (C * (C / 8)), row = (i / (C / 8)) % C, c = (i % (C / 8)) * 8;
            cp_async16(which ? &s.pl[row][c] : &s.ph[row][c], p.p + (nh * 2 + which) * C * C + row * C + c);
        }
    };
    auto load_k = [&](int n) {
        if (n < n_chunks) load_rows(n, 1, s.ck);
    };

    // Step-1/3 layout: warp = 16 tokens (mt) x 32 columns (nq); step-4 layout: 16 dk rows x 64 columns.
    const int mt = warp & 3, nq = warp >> 2, fr = lane >> 2, fc = 2 * (lane & 3);
    float st[8][4]; // S rows warp*16 + fr (+8), columns 8 nt + fc (+1) of the slice
    float* S = a.state + (int64_t(a.slot) * hv + h) * D * D + col0;
    auto store_s_smem = [&] {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                const int row = warp * 16 + fr + (e >> 1) * 8, col = nt * 8 + fc;
                split2(st[nt][e], st[nt][e + 1], *reinterpret_cast<uint32_t*>(&s.sh[row][col]),
                       *reinterpret_cast<uint32_t*>(&s.sl[row][col]));
            }
    };
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[nt][e] = S[int64_t(warp * 16 + fr + (e >> 1) * 8) * D + nt * 8 + fc + (e & 1)];
    store_s_smem();
    float2 ureg[4][2]; // U at this thread's V' fragment positions, loaded a chunk ahead
    auto load_u = [&](int n) {
        if (n >= n_chunks) return;
        const float* u = p.u + (int64_t(n) * hv + h) * C * D + col0 + nq * 32 + fc;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) ureg[nt][hh] = *reinterpret_cast<const float2*>(u + (mt * 16 + fr + hh * 8) * D + nt * 8);
    };
    load_w(0);
    cp_async_commit();
    load_u(0);
    load_pq(0);
    cp_async_commit();
    load_k(0);
    cp_async_commit();

    for (int n = 0; n < n_chunks; ++n) {
        const ChunkRows cr(n, a);
        const int buf = n & 1;
        cp_async_wait<2>(); // W(n) (groups complete in order: W, PQ, K per chunk)
        __syncthreads();
        // Step 1: V' = U - W S (tokens mt*16.., columns nq*32..), three split products.
        float acc[4][4] = {};
        split_product<D / 16>(acc, s.wh, s.wl, s.sh, s.sl, mt * 16, nq * 32, D / 16, lane);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int i = mt * 16 + fr + hh * 8, col = nq * 32 + nt * 8 + fc;
                const float v0 = ureg[nt][hh].x - acc[nt][2 * hh], v1 = ureg[nt][hh].y - acc[nt][2 * hh + 1];
                const float us = s.sc[buf][1][i];
                split2(v0, v1, *reinterpret_cast<uint32_t*>(&s.vh[i][col]), *reinterpret_cast<uint32_t*>(&s.vl[i][col]));
                split2(us * v0, us * v1, *reinterpret_cast<uint32_t*>(&s.xh[i][col]), *reinterpret_cast<uint32_t*>(&s.xl[i][col]));
            }
        __syncthreads(); // W consumed, V' visible
        load_w(n + 1);
        cp_async_commit();
        load_u(n + 1);
        cp_async_wait<2>(); // PQ(n)
        __syncthreads();
        // Step 3: o = exp(G) sq (q S) + P V' (P is lower triangular: k-steps up to the diagonal).
        float oq[4][4] = {}, ov[4][4] = {};
        split_product<D / 16>(oq, s.cq, static_cast<const __nv_bfloat16 (*)[LDB]>(nullptr), s.sh, s.sl, mt * 16, nq * 32, D / 16, lane);
        split_product<C / 16>(ov, s.ph, s.pl, s.vh, s.vl, mt * 16, nq * 32, mt + 1, lane);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int i = mt * 16 + fr + hh * 8;
            if (!cr.valid(i)) continue;
            const float os = s.sc[buf][0][i];
            float* o = p.o + int64_t(cr.t0 + i) * hv * D + h * D + col0 + nq * 32 + fc;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
                *reinterpret_cast<float2*>(o + nt * 8) = make_float2(fmaf(os, oq[nt][2 * hh], ov[nt][2 * hh]),
                                                                     fmaf(os, oq[nt][2 * hh + 1], ov[nt][2 * hh + 1]));
        }
        __syncthreads(); // q, P and S hi/lo consumed
        load_pq(n + 1);
        cp_async_commit();
        cp_async_wait<2>(); // K(n)
        __syncthreads();
        // Step 4: S = exp(G_C) S + K^T X (dk rows warp*16.., all 64 columns; K is exact bf16).
        const float decay = s.sc[buf][2][0];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) st[nt][e] *= decay;
#pragma unroll
        for (int ks = 0; ks < C / 16; ++ks) {
            uint32_t ak[4];
            ldmatrix_x4_trans(ak, &s.ck[ks * 16 + nk_row(lane)][warp * 16 + nk_col(lane)]);
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                uint32_t bh[4], bl[4];
                ldmatrix_x4_trans(bh, &s.xh[ks * 16 + a_row(lane)][np * 16 + a_col(lane)]);
                ldmatrix_x4_trans(bl, &s.xl[ks * 16 + a_row(lane)][np * 16 + a_col(lane)]);
#pragma unroll
                for (int t = 0; t < 2; ++t) {
                    mma(st[2 * np + t], ak, bl[2 * t], bl[2 * t + 1]);
                    mma(st[2 * np + t], ak, bh[2 * t], bh[2 * t + 1]);
                }
            }
        }
        __syncthreads(); // k and X consumed
        load_k(n + 1);
        cp_async_commit();
        store_s_smem();
    }
    cp_async_wait<0>();
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[int64_t(warp * 16 + fr + (e >> 1) * 8) * D + nt * 8 + fc + (e & 1)] = st[nt][e];
}

template <typename Kernel> cudaError_t allow_smem(Kernel kernel, size_t bytes) {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
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

cudaError_t gdn_chunked_launch(const GdnPrefillArgs& a, const ChunkPtrs& p, cudaStream_t stream) {
    const unsigned n_chunks = unsigned(chunk_count(a));
    cudaError_t err = allow_smem(gdn_chunk_wy_kernel, sizeof(WySmem));
    if (err != cudaSuccess) return err;
    gdn_chunk_wy_kernel<<<dim3(n_chunks, unsigned(a.n_k_heads)), 256, sizeof(WySmem), stream>>>(a, p);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if ((err = allow_smem(gdn_chunk_state_kernel, sizeof(StateSmem))) != cudaSuccess) return err;
    gdn_chunk_state_kernel<<<dim3(D / kSlice, unsigned(a.n_v_heads)), 256, sizeof(StateSmem), stream>>>(a, p);
    return cudaGetLastError();
}

} // namespace ninfer::kernels::detail
