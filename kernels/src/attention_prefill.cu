// ninfer::kernels - prefill attention: prep over the chunk, causal flash attention on mma.sync tensor cores.
#include "common.cuh"
#include "flash_softmax.cuh"
#include "kv_quant.cuh"
#include "ninfer/kernels/attention_prefill.h"
#include "prefill_async.cuh"

namespace ninfer::kernels {

namespace detail {

constexpr int kPrefillHeadDim = 256;
constexpr int kKeyTile = kKvPageTokens;    // one page of one KV head per step
constexpr int kRowChunks = kPrefillHeadDim / 8; // 16-byte chunks per 256-dim bf16 row
constexpr size_t kTileElems = size_t(kKeyTile) * kPrefillHeadDim;

// Block shape: WARPS x 16 query rows, STAGES K/V tile buffers (2: the next tile loads during this
// one; 1: overlap comes from a second resident block instead).
template <int WARPS, int STAGES> struct PrefillShape {
    static constexpr int kQueryTile = WARPS * 16;
    static constexpr int kThreads = WARPS * 32;
    static constexpr int kBlocksPerSm = WARPS == 4 && STAGES == 1 ? 2 : 1;
    static constexpr size_t kSmemBytes =
        (size_t(kQueryTile) * kPrefillHeadDim + 2 * STAGES * kTileElems) * sizeof(__nv_bfloat16);
};

size_t align256_bytes(size_t v) { return (v + 255) / 256 * 256; }

// Rows of 512 bytes would put the 8 rows an ldmatrix reads in the same banks: chunk c of row r is
// stored at chunk c ^ (r & 7).
__device__ __forceinline__ int swz(int row, int chunk) { return row * kPrefillHeadDim + ((chunk ^ (row & 7)) << 3); }

__global__ void prefill_indices_kernel(int32_t* lanes, int32_t* positions, int lane, int start_pos, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    lanes[t] = lane;
    positions[t] = start_pos + t;
}

// fp8/int8 pages: rows decoded (code * scale, kv_quant.cuh) and rounded to bf16 for the tensor
// cores, stored with plain shared-memory stores (the caller's barrier orders them).
template <int THREADS>
__device__ __forceinline__ void load_kv_tile_quant(const KvPages& kv, int n_kv, int lane, int kvh, int tile,
                                                   int last_pos, __nv_bfloat16* k_dst, __nv_bfloat16* v_dst, int tid) {
    for (int i = tid; i < kKeyTile * kRowChunks; i += THREADS) {
        const int row = i / kRowChunks, c = i % kRowChunks;
        const bool valid = tile * kKeyTile + row <= last_pos;
#pragma unroll
        for (int value = 0; value < 2; ++value) {
            uint4 packed = make_uint4(0, 0, 0, 0);
            if (valid) {
                const KvQuantRow r = kv_quant_row(value ? kv.v_q : kv.k_q, kv, n_kv, lane, kvh, tile * kKeyTile + row);
                float f[8];
                kv_decode8(kv.dtype, *reinterpret_cast<const uint2*>(r.codes + c * 8), kv_scale8(kv.dtype, r.scales, c), f);
                const __nv_bfloat162 p0 = __floats2bfloat162_rn(f[0], f[1]), p1 = __floats2bfloat162_rn(f[2], f[3]),
                                     p2 = __floats2bfloat162_rn(f[4], f[5]), p3 = __floats2bfloat162_rn(f[6], f[7]);
                packed = make_uint4(*reinterpret_cast<const uint32_t*>(&p0), *reinterpret_cast<const uint32_t*>(&p1),
                                    *reinterpret_cast<const uint32_t*>(&p2), *reinterpret_cast<const uint32_t*>(&p3));
            }
            *reinterpret_cast<uint4*>((value ? v_dst : k_dst) + swz(row, c)) = packed;
        }
    }
}

// The one place that reads KV tiles: bf16 pages by cp.async, fp8/int8 pages decoded above. Rows
// past last_pos are zero-filled: they are masked out of S, and zero V keeps 0 * garbage out of P V.
template <int THREADS>
__device__ __forceinline__ void load_kv_tile(const KvPages& kv, int n_kv, int lane, int kvh, int tile, int last_pos,
                                             __nv_bfloat16* k_dst, __nv_bfloat16* v_dst, int tid) {
    if (kv.dtype != KvDtype::Bf16) {
        load_kv_tile_quant<THREADS>(kv, n_kv, lane, kvh, tile, last_pos, k_dst, v_dst, tid);
        return;
    }
    const int page = kv.page_table[int64_t(lane) * kv.max_pages + tile];
    const int64_t base = (int64_t(page) * n_kv + kvh) * kTileElems;
    for (int i = tid; i < kKeyTile * kRowChunks; i += THREADS) {
        const int row = i / kRowChunks, c = i % kRowChunks;
        const bool valid = tile * kKeyTile + row <= last_pos;
        const int64_t off = base + int64_t(row) * kPrefillHeadDim + c * 8;
        cp_async16_or_zero(k_dst + swz(row, c), kv.k + off, valid);
        cp_async16_or_zero(v_dst + swz(row, c), kv.v + off, valid);
    }
}

struct PrefillRun {
    AttnPrefillArgs a;
    const __nv_bfloat16* q; // prep's q scratch [t][n_heads*256]
};

// grid (n_heads, n_query_tiles), WARPS * 32 threads, kSmemBytes of dynamic shared memory. Warp w
// owns query rows w*16 .. w*16+15 of the tile and keeps their 16 x 256 output in registers.
template <int WARPS, int STAGES>
__global__ void __launch_bounds__(WARPS * 32, (PrefillShape<WARPS, STAGES>::kBlocksPerSm))
    attn_prefill_kernel(PrefillRun run) {
    using Shape = PrefillShape<WARPS, STAGES>;
    constexpr int kQueryTile = Shape::kQueryTile, kPrefillThreads = Shape::kThreads;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* ks = qs + kQueryTile * kPrefillHeadDim; // [STAGES][64][256]
    __nv_bfloat16* vs = ks + STAGES * kTileElems;
    const AttnPrefillArgs& a = run.a;
    const AttnGeometry& geo = a.geo;
    const int h = blockIdx.x, kvh = h / (geo.n_heads / geo.n_kv_heads);
    const int n_qtiles = (a.n_tokens + kQueryTile - 1) / kQueryTile;
    const int m0 = (n_qtiles - 1 - int(blockIdx.y)) * kQueryTile; // longest rows first
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int last_pos = a.start_pos + a.n_tokens - 1;
    const int64_t q_stride = int64_t(geo.n_heads) * kPrefillHeadDim;

    for (int i = tid; i < kQueryTile * kRowChunks; i += kPrefillThreads) {
        const int row = i / kRowChunks, c = i % kRowChunks;
        const bool valid = m0 + row < a.n_tokens;
        const __nv_bfloat16* src = run.q + (valid ? (m0 + row) * q_stride : 0) + h * kPrefillHeadDim + c * 8;
        cp_async16_or_zero(qs + swz(row, c), src, valid);
    }
    const int block_last = min(a.start_pos + m0 + kQueryTile - 1, last_pos);
    const int n_tiles = block_last / kKeyTile + 1;
    load_kv_tile<kPrefillThreads>(a.kv, geo.n_kv_heads, a.lane, kvh, 0, last_pos, ks, vs, tid);
    cp_async_commit();

    // This thread's two rows (g and g + 8 of the warp's 16); rows past the chunk act as its last.
    const int g = lane >> 2, quad = lane & 3;
    const int row_pos[2] = {min(a.start_pos + m0 + warp * 16 + g, last_pos),
                            min(a.start_pos + m0 + warp * 16 + g + 8, last_pos)};
    const int warp_first = min(a.start_pos + m0 + warp * 16, last_pos);
    const int warp_last = min(a.start_pos + m0 + warp * 16 + 15, last_pos);
    constexpr float kScaleLog2 = 0.0625f * 1.4426950408889634f; // head_dim^-0.5 * log2(e)
    float acc[32][4] = {};
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

    for (int tile = 0; tile < n_tiles; ++tile) {
        if (STAGES == 1) { // the buffer is free again after the previous iteration's barrier
            if (tile > 0) {
                load_kv_tile<kPrefillThreads>(a.kv, geo.n_kv_heads, a.lane, kvh, tile, last_pos, ks, vs, tid);
                cp_async_commit();
            }
            cp_async_wait<0>();
        } else if (tile + 1 < n_tiles) {
            const int st = (tile + 1) % STAGES;
            load_kv_tile<kPrefillThreads>(a.kv, geo.n_kv_heads, a.lane, kvh, tile + 1, last_pos,
                                          ks + st * kTileElems, vs + st * kTileElems, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const int key0 = tile * kKeyTile;
        if (key0 <= warp_last) { // else every key of the tile is after every row of this warp
            const __nv_bfloat16* kt = ks + (tile % STAGES) * kTileElems;
            const __nv_bfloat16* vt = vs + (tile % STAGES) * kTileElems;
            float s[8][4] = {};
#pragma unroll
            for (int kstep = 0; kstep < kPrefillHeadDim / 16; ++kstep) {
                uint32_t qf[4];
                ldmatrix_x4(qf, qs + swz(warp * 16 + (lane & 15), kstep * 2 + (lane >> 4)));
#pragma unroll
                for (int np = 0; np < 4; ++np) {
                    uint32_t kf[4];
                    ldmatrix_x4(kf, kt + swz(np * 16 + (lane & 7) + ((lane >> 4) << 3), kstep * 2 + ((lane >> 3) & 1)));
                    mma_bf16_16816(s[2 * np], qf[0], qf[1], qf[2], qf[3], kf[0], kf[1]);
                    mma_bf16_16816(s[2 * np + 1], qf[0], qf[1], qf[2], qf[3], kf[2], kf[3]);
                }
            }
            const bool masked = key0 + kKeyTile - 1 > warp_first;
            if (masked) {
#pragma unroll
                for (int nt = 0; nt < 8; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        if (key0 + nt * 8 + 2 * quad + (e & 1) > row_pos[e >> 1]) s[nt][e] = -INFINITY;
            }
            // Every row saw tile 0 (key 0) before any fully masked tile: its maximum is finite.
            uint32_t pf[8][2];
            flash_rescale(acc, flash_softmax_tile(s, row_max, row_sum, kScaleLog2, pf));
            static_assert(kKeyTile == 64, "flash_pv_tile takes 64-key tiles");
            flash_pv_tile(acc, pf, [&](int kstep, int dp, uint32_t(&vf)[4]) {
                ldmatrix_x4_trans(vf, vt + swz(kstep * 16 + (lane & 15), dp * 2 + (lane >> 4)));
            });
        }
        __syncthreads(); // the next iteration refills this stage
    }

    flash_total_sums(row_sum);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int t = m0 + warp * 16 + g + 8 * r;
        if (t >= a.n_tokens) continue;
        const float inv = 1.f / row_sum[r];
        const __nv_bfloat16* gate = a.qg + int64_t(t) * a.qg_stride + int64_t(h) * 2 * kPrefillHeadDim + kPrefillHeadDim;
        __nv_bfloat16* dst = a.out + int64_t(t) * a.out_stride + int64_t(h) * kPrefillHeadDim;
#pragma unroll
        for (int dt = 0; dt < 32; ++dt) {
            const int d = dt * 8 + 2 * quad;
            const float2 gf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(gate + d));
            float o[2] = {acc[dt][2 * r] * inv, acc[dt][2 * r + 1] * inv};
            float sg[2] = {1.f / (1.f + expf(-gf.x)), 1.f / (1.f + expf(-gf.y))};
            if (!geo.exact) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    o[e] = bf16_round(o[e]);
                    sg[e] = bf16_round(sg[e]);
                }
            }
            *reinterpret_cast<__nv_bfloat162*>(dst + d) = __floats2bfloat162_rn(o[0] * sg[0], o[1] * sg[1]);
        }
    }
}

bool prefill_geometry_ok(const AttnGeometry& g) {
    return g.head_dim == kPrefillHeadDim && g.n_kv_heads >= 1 && g.n_heads >= g.n_kv_heads &&
           g.n_heads % g.n_kv_heads == 0 && g.n_heads / g.n_kv_heads <= 8 && g.rotary_dim >= 0 &&
           g.rotary_dim % 2 == 0 && g.rotary_dim <= kPrefillHeadDim;
}

bool prefill_args_ok(const AttnPrefillArgs& a) {
    const auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool pools = a.kv.dtype == KvDtype::Bf16 ? a.kv.k && a.kv.v && al16(a.kv.k) && al16(a.kv.v)
                                                   : a.kv.k_q && a.kv.v_q && al16(a.kv.k_q) && al16(a.kv.v_q);
    return prefill_geometry_ok(a.geo) && a.qg && a.k && a.v && a.q_norm && a.k_norm && pools &&
           a.kv.page_table && a.kv.max_pages >= 1 && a.out && a.scratch && a.n_tokens >= 1 && a.n_tokens <= 65535 &&
           a.start_pos >= 0 && a.lane >= 0 && int64_t(a.start_pos) + a.n_tokens <= int64_t(a.kv.max_pages) * kKvPageTokens &&
           a.scratch_bytes >= attn_prefill_scratch_bytes(a.n_tokens, a.geo.n_heads) &&
           reinterpret_cast<uintptr_t>(a.scratch) % 256 == 0 && al16(a.qg) && al16(a.k) && al16(a.v) && al16(a.out) &&
           a.qg_stride % 8 == 0 && a.k_stride % 8 == 0 && a.v_stride % 8 == 0 &&
           a.out_stride % 8 == 0 && a.kernel_variant >= 0 && a.kernel_variant <= 3;
}

size_t q_scratch_bytes(int n_tokens, int n_heads) {
    return align256_bytes(size_t(n_tokens) * n_heads * kPrefillHeadDim * sizeof(__nv_bfloat16));
}

template <int WARPS, int STAGES> cudaError_t launch_prefill(const AttnPrefillArgs& a, cudaStream_t stream) {
    using Shape = PrefillShape<WARPS, STAGES>;
    cudaError_t err = cudaFuncSetAttribute(attn_prefill_kernel<WARPS, STAGES>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(Shape::kSmemBytes));
    if (err != cudaSuccess) return err;
    const PrefillRun run{a, reinterpret_cast<const __nv_bfloat16*>(a.scratch)};
    const dim3 grid(unsigned(a.geo.n_heads), unsigned((a.n_tokens + Shape::kQueryTile - 1) / Shape::kQueryTile));
    attn_prefill_kernel<WARPS, STAGES><<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(run);
    return cudaGetLastError();
}

} // namespace detail

size_t attn_prefill_scratch_bytes(int n_tokens, int n_heads) {
    return detail::q_scratch_bytes(n_tokens, n_heads) + detail::align256_bytes(size_t(2) * n_tokens * sizeof(int32_t));
}

cudaError_t attn_prefill_prep(const AttnPrefillArgs& a, cudaStream_t stream) {
    if (!detail::prefill_args_ok(a)) return cudaErrorInvalidValue;
    unsigned char* base = static_cast<unsigned char*>(a.scratch);
    int32_t* lanes = reinterpret_cast<int32_t*>(base + detail::q_scratch_bytes(a.n_tokens, a.geo.n_heads));
    int32_t* positions = lanes + a.n_tokens;
    detail::prefill_indices_kernel<<<unsigned((a.n_tokens + 255) / 256), 256, 0, stream>>>(lanes, positions, a.lane,
                                                                                           a.start_pos, a.n_tokens);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    // The decode prep over the chunk's tokens: one definition of the norm/RoPE math and KV layout.
    AttnPrepArgs p;
    p.geo = a.geo;
    p.qg = a.qg;
    p.qg_stride = a.qg_stride;
    p.k = a.k;
    p.k_stride = a.k_stride;
    p.v = a.v;
    p.v_stride = a.v_stride;
    p.q_norm = a.q_norm;
    p.k_norm = a.k_norm;
    p.lanes = lanes;
    p.positions = positions;
    p.rope_thw = a.rope_thw;
    p.rope_offset = a.rope_offset;
    p.kv = a.kv;
    p.q_out = reinterpret_cast<__nv_bfloat16*>(base);
    p.q_out_stride = int64_t(a.geo.n_heads) * detail::kPrefillHeadDim;
    p.n_tokens = a.n_tokens;
    return attn_decode_prep(p, stream);
}

cudaError_t attn_prefill(const AttnPrefillArgs& a, cudaStream_t stream) {
    if (!detail::prefill_args_ok(a)) return cudaErrorInvalidValue;
    switch (a.kernel_variant ? a.kernel_variant : kAttnPrefillDefaultVariant) {
    case 1: return detail::launch_prefill<8, 2>(a, stream);
    case 2: return detail::launch_prefill<4, 1>(a, stream);
    case 3: return detail::launch_prefill<4, 2>(a, stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace ninfer::kernels
