// ninfer::kernels - chunked GDN prefill, kernel 2: the serial state pass per value head and 64-column slice, on mma.sync.
#include "gdn_prefill_chunked.cuh"
#include "prefill_async.cuh"

namespace ninfer::kernels::detail {

namespace {

constexpr int D = kGdnHeadDim, C = kChunk, LDB = kChunkLdb, LDP = kChunkLdp;
constexpr int kSlice = 64; // state columns per block
static_assert(kSlice == C, "the state pass shares LDP between chunk-wide and slice-wide tiles");

// acc[nt] += (Ah + Al) (Bh + Bl) minus Al.Bl, for 16 rows (row0..) and NP pairs of n8 tiles
// (col0..) over k-steps [0, ksteps) of at most KS: A row-major [m][k] (ldmatrix), B row-major
// [k][n] (trans). Without al (A exact bf16) the products are Ah.Bl + Ah.Bh. Small terms first.
template <int KS, int NP, int LDA>
__device__ __forceinline__ void split_product(float (&acc)[2 * NP][4], const __nv_bfloat16 (*ah)[LDA],
                                              const __nv_bfloat16 (*al)[LDA], const __nv_bfloat16 (*bh)[LDP],
                                              const __nv_bfloat16 (*bl)[LDP], int row0, int col0, int ksteps, int lane) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        if (ks >= ksteps) break; // warp-uniform
        uint32_t fh[4], fl[4];
        ldmatrix_x4(fh, &ah[row0 + a_row(lane)][ks * 16 + a_col(lane)]);
        if (al) ldmatrix_x4(fl, &al[row0 + a_row(lane)][ks * 16 + a_col(lane)]);
#pragma unroll
        for (int np = 0; np < NP; ++np) {
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

struct StateSmem {
    __nv_bfloat16 wh[C][LDB], wl[C][LDB]; // W hi / lo [token][dk]
    __nv_bfloat16 cq[C][LDB], ck[C][LDB]; // raw q, k [token][dk]
    __nv_bfloat16 ph[C][LDP], pl[C][LDP]; // P hi / lo [token i][token j]
    __nv_bfloat16 sh[D][LDP], sl[D][LDP]; // S hi / lo [dk][column]
    __nv_bfloat16 vh[C][LDP], vl[C][LDP]; // V' hi / lo [token][column]
    __nv_bfloat16 xh[C][LDP], xl[C][LDP]; // exp(G_C - G_j) sk_j V'_j hi / lo
    float sc[2][3][C];                    // the chunk's scales, double-buffered with W
};

// Per chunk: wait W; V' = U - W S; wait q/P; o = exp(G) sq (q S) + P V'; wait k; S = exp(G_C) S +
// k^T X; S hi/lo to shared. Each input is reloaded for chunk n+1 as soon as chunk n is done with
// it (cp.async groups W, q/P, k in that order, so every wait leaves the two newer groups pending).
// W warps: steps 1 and 3 give each warp 16 tokens x 64/(W/4) columns, step 4 16 dk rows x
// 64/(W/8) columns of the state, which lives in registers in step 4's layout.
template <int W> __global__ void __launch_bounds__(W * 32, 1) gdn_chunk_state_kernel(GdnPrefillArgs a, ChunkPtrs p) {
    constexpr int NTHREADS = W * 32;
    constexpr int NT1 = kSlice / 8 / (W / 4), NT4 = kSlice / 8 / (W / 8); // n8 tiles per warp
    extern __shared__ __align__(16) unsigned char smem_raw[];
    StateSmem& s = *reinterpret_cast<StateSmem*>(smem_raw);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, h = blockIdx.y, col0 = blockIdx.x * kSlice;
    const int hk = a.n_k_heads, hv = a.n_v_heads, r = h / (hv / hk);
    const int n_chunks = chunk_count(a);
    const int64_t row_stride = int64_t(2) * hk * D;

    auto load_w = [&](int n) { // W hi/lo and the scales
        if (n >= n_chunks) return;
        const int64_t nh = int64_t(n) * hv + h;
        for (int i = tid; i < 2 * C * (D / 8); i += NTHREADS) {
            const int which = i / (C * (D / 8)), row = (i / (D / 8)) % C, c = (i % (D / 8)) * 8;
            cp_async16(which ? &s.wl[row][c] : &s.wh[row][c], p.w + (nh * 2 + which) * C * D + row * D + c);
        }
        if (tid < 3 * C / 4) cp_async16(&s.sc[n & 1][0][tid * 4], p.sc + nh * 3 * C + tid * 4);
    };
    auto load_rows = [&](int n, int which, __nv_bfloat16 (*dst)[LDB]) { // raw q (0) or k (1) rows
        const ChunkRows cr(n, a);
        for (int i = tid; i < C * (D / 8); i += NTHREADS) {
            const int row = i / (D / 8), c = (i % (D / 8)) * 8;
            const bool valid = cr.valid(row);
            cp_async16_or_zero(&dst[row][c], p.qk + (valid ? int64_t(cr.t0 + row) * row_stride : 0) + (which * hk + r) * D + c, valid);
        }
    };
    auto load_pq = [&](int n) {
        if (n >= n_chunks) return;
        load_rows(n, 0, s.cq);
        const int64_t nh = int64_t(n) * hv + h;
        for (int i = tid; i < 2 * C * (C / 8); i += NTHREADS) {
            const int which = i / (C * (C / 8)), row = (i / (C / 8)) % C, c = (i % (C / 8)) * 8;
            cp_async16(which ? &s.pl[row][c] : &s.ph[row][c], p.p + (nh * 2 + which) * C * C + row * C + c);
        }
    };
    auto load_k = [&](int n) {
        if (n < n_chunks) load_rows(n, 1, s.ck);
    };

    const int fr = lane >> 2, fc = 2 * (lane & 3);
    const int mt = warp & 3, c1 = (warp >> 2) * NT1 * 8; // steps 1, 3: tokens mt*16.., columns c1..
    const int m4 = warp & 7, c4 = (warp >> 3) * NT4 * 8; // step 4: dk rows m4*16.., columns c4..
    float st[NT4][4]; // S rows m4*16 + fr (+8), columns c4 + 8 nt + fc (+1) of the slice
    float* S = a.state + (int64_t(a.slot) * hv + h) * D * D + col0;
    auto s_index = [&](int nt, int e) { return int64_t(m4 * 16 + fr + (e >> 1) * 8) * D + c4 + nt * 8 + fc + (e & 1); };
    auto store_s_smem = [&] {
#pragma unroll
        for (int nt = 0; nt < NT4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                const int row = m4 * 16 + fr + (e >> 1) * 8, col = c4 + nt * 8 + fc;
                split2(st[nt][e], st[nt][e + 1], *reinterpret_cast<uint32_t*>(&s.sh[row][col]),
                       *reinterpret_cast<uint32_t*>(&s.sl[row][col]));
            }
    };
#pragma unroll
    for (int nt = 0; nt < NT4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[nt][e] = S[s_index(nt, e)];
    store_s_smem();
    float2 ureg[NT1][2]; // U at this thread's V' fragment positions, loaded a chunk ahead
    auto load_u = [&](int n) {
        if (n >= n_chunks) return;
        const float* u = p.u + (int64_t(n) * hv + h) * C * D + col0 + c1 + fc;
#pragma unroll
        for (int nt = 0; nt < NT1; ++nt)
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
        cp_async_wait<2>(); // W(n)
        __syncthreads();
        // Step 1: V' = U - W S, three split products; V' and X = exp(G_C - G) sk V' to shared.
        float acc[NT1][4] = {};
        split_product<D / 16, NT1 / 2>(acc, s.wh, s.wl, s.sh, s.sl, mt * 16, c1, D / 16, lane);
#pragma unroll
        for (int nt = 0; nt < NT1; ++nt)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int i = mt * 16 + fr + hh * 8, col = c1 + nt * 8 + fc;
                const float v0 = ureg[nt][hh].x - acc[nt][2 * hh], v1 = ureg[nt][hh].y - acc[nt][2 * hh + 1];
                const float us = s.sc[buf][1][i];
                split2(v0, v1, *reinterpret_cast<uint32_t*>(&s.vh[i][col]), *reinterpret_cast<uint32_t*>(&s.vl[i][col]));
                split2(us * v0, us * v1, *reinterpret_cast<uint32_t*>(&s.xh[i][col]), *reinterpret_cast<uint32_t*>(&s.xl[i][col]));
            }
        __syncthreads(); // W consumed, V' visible
        load_w(n + 1);
        cp_async_commit();
        load_u(n + 1);
        cp_async_wait<2>(); // q/P(n)
        __syncthreads();
        // Step 3: o = exp(G) sq (q S) + P V' (P is lower triangular: k-steps up to the diagonal).
        float oq[NT1][4] = {}, ov[NT1][4] = {};
        split_product<D / 16, NT1 / 2>(oq, s.cq, static_cast<const __nv_bfloat16 (*)[LDB]>(nullptr), s.sh, s.sl, mt * 16, c1,
                                       D / 16, lane);
        split_product<C / 16, NT1 / 2>(ov, s.ph, s.pl, s.vh, s.vl, mt * 16, c1, mt + 1, lane);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int i = mt * 16 + fr + hh * 8;
            if (!cr.valid(i)) continue;
            const float os = s.sc[buf][0][i];
            float* o = p.o + int64_t(cr.t0 + i) * hv * D + h * D + col0 + c1 + fc;
#pragma unroll
            for (int nt = 0; nt < NT1; ++nt)
                *reinterpret_cast<float2*>(o + nt * 8) = make_float2(fmaf(os, oq[nt][2 * hh], ov[nt][2 * hh]),
                                                                     fmaf(os, oq[nt][2 * hh + 1], ov[nt][2 * hh + 1]));
        }
        __syncthreads(); // q, P and S hi/lo consumed
        load_pq(n + 1);
        cp_async_commit();
        cp_async_wait<2>(); // k(n)
        __syncthreads();
        // Step 4: S = exp(G_C) S + k^T X (k is exact bf16: two products).
        const float decay = s.sc[buf][2][0];
#pragma unroll
        for (int nt = 0; nt < NT4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) st[nt][e] *= decay;
#pragma unroll
        for (int ks = 0; ks < C / 16; ++ks) {
            uint32_t ak[4];
            ldmatrix_x4_trans(ak, &s.ck[ks * 16 + nk_row(lane)][m4 * 16 + nk_col(lane)]);
#pragma unroll
            for (int np = 0; np < NT4 / 2; ++np) {
                uint32_t bh[4], bl[4];
                ldmatrix_x4_trans(bh, &s.xh[ks * 16 + a_row(lane)][c4 + np * 16 + a_col(lane)]);
                ldmatrix_x4_trans(bl, &s.xl[ks * 16 + a_row(lane)][c4 + np * 16 + a_col(lane)]);
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
    for (int nt = 0; nt < NT4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[s_index(nt, e)] = st[nt][e];
}

} // namespace

cudaError_t launch_chunk_state(const GdnPrefillArgs& a, const ChunkPtrs& p, int warps, cudaStream_t stream) {
    auto kernel = warps == 16 ? gdn_chunk_state_kernel<16> : gdn_chunk_state_kernel<8>;
    const cudaError_t err = allow_smem(kernel, sizeof(StateSmem));
    if (err != cudaSuccess) return err;
    kernel<<<dim3(D / kSlice, unsigned(a.n_v_heads)), unsigned(warps * 32), sizeof(StateSmem), stream>>>(a, p);
    return cudaGetLastError();
}

cudaError_t gdn_chunked_launch(const GdnPrefillArgs& a, const ChunkPtrs& p, cudaStream_t stream) {
    // Variants 1-4: kernel 1 at 2 or 1 blocks per SM x kernel 2 with 8 or 16 warps.
    const int v = (a.chunk_variant ? a.chunk_variant : kGdnChunkDefaultVariant) - 1;
    const cudaError_t err = launch_chunk_wy(a, p, v % 2 == 0 ? 2 : 1, stream);
    return err != cudaSuccess ? err : launch_chunk_state(a, p, v < 2 ? 8 : 16, stream);
}

} // namespace ninfer::kernels::detail
