// ninfer::kernels - decode GEMV over the tiled layout with a shared-memory pipeline per warp.
//
// Contract: computes exactly what gemv_tiled_kernel computes (gemv.h, WeightLayout::Tiled): the same
// TiledFrag per step, the same tiled_compute mma sequence, the same epilogue, so for one split
// count the results are the same bits. Only the way weights reach the registers differs.
//
// Why: the register double buffer keeps at most one 4 KB step per warp in flight (16 warps x 4 KB
// per SM at 128 registers), which left the q4 GEMV latency bound at ~45% of copy bandwidth. Here
// each warp owns a ring of S stages of one step each (kUnroll units: 4 KB of codes, + 256 B of q4
// group multipliers; q5/q6: 4 units of 640/768 bytes + 128 B) in shared memory. A (tile, unit range) block is contiguous in the tiled
// layout, so lane 0 fetches a whole stage with one or two 1-D bulk copies (cp.async.bulk, no
// tensor map) that complete on the stage's mbarrier; S stages stay in flight while the warp
// dequantises the current one from registers, independent of the register budget. The warps of
// a block never wait for each other (one barrier set per warp), so the block keeps the register
// kernel's tile-per-warp shape and split-K epilogue.
//
// XS (one pass, fp8/q4/q5/q6): x is also staged, once per block after ninfer_grid_wait, in shared memory
// already permuted into the mma's B words, so the L1 (smaller next to the rings) no longer has to
// hold x and the lanes skip 8 byte permutes per unit. Same operands, same bits.
//
// Launch: grid (ceil(n / 64), splits), 128 threads, dynamic shared memory gemv_pipe_smem_bytes
// (+ xstage_bytes with XS); PDL as gemv_tiled_kernel (the first S stages are requested before
// ninfer_grid_wait).
#pragma once

#include "gemm_sm90.cuh"
#include "gemv_q4a8.cuh"
#include "gemv_tiled.cuh"

namespace ninfer::kernels::detail {

template <WeightFormat F> struct PipeStage {
    static constexpr int kCodeBytes = TiledTraits<F>::kUnroll * tiled_block_bytes(F);
    // q4: multipliers of kUnroll units = kUnroll / 4 quads of 8 x 16 bytes (contiguous per tile).
    static constexpr int kScaleBytes = TiledFrag<F>::kScaleVecs * 128 * (tiled_grouped(F) || F == WeightFormat::Q8G32Fp16);
    // Units per 128 bytes of multipliers (one uint4 per tile row pair): q4/q5/q6 4, q8 2.
    static constexpr int kScaleUnits = F == WeightFormat::Q8G32Fp16 ? 2 : 4;
    static constexpr int kBytes = kCodeBytes + kScaleBytes;
};
constexpr int kPipeBarrierBytes = 128; // room for kGemvWarps x S (<= 4) mbarriers before the rings

__host__ __device__ constexpr int pipe_stage_bytes(WeightFormat f) {
    return f == WeightFormat::Q4G64Fp16   ? PipeStage<WeightFormat::Q4G64Fp16>::kBytes
           : f == WeightFormat::Q5G64Fp16 ? PipeStage<WeightFormat::Q5G64Fp16>::kBytes
           : f == WeightFormat::Q6G64Fp16 ? PipeStage<WeightFormat::Q6G64Fp16>::kBytes
           : f == WeightFormat::Q8G32Fp16 ? PipeStage<WeightFormat::Q8G32Fp16>::kBytes
                                          : PipeStage<WeightFormat::Bf16>::kBytes; // bf16 and fp8: 4 KB
}
__host__ __device__ constexpr size_t gemv_pipe_smem_bytes(WeightFormat f, int stages) {
    return size_t(kPipeBarrierBytes) + size_t(kGemvWarps) * stages * pipe_stage_bytes(f);
}

// Staged x: row r (x_lo given: token r / 2, high (even r) or low half; else token r) holds per unit
// of the split and lane quad c the 8 B words of unit_mma_b (32 bytes); 16 bytes of padding move
// consecutive rows to other banks.
__host__ __device__ constexpr int64_t xstage_row_bytes(int64_t units) { return units * 128 + 16; }
__host__ __device__ constexpr int64_t xstage_bytes(int64_t units, int n_tokens, bool lo) {
    return (lo ? 2 * n_tokens : n_tokens) * xstage_row_bytes(units);
}
constexpr int64_t kXStageMaxBytes = 48 << 10; // larger x (long splits, many tokens): read from L1

template <WeightFormat F>
__device__ __forceinline__ void stage_x(const GemvParams& p, uint8_t* xs, int64_t u_begin, int units) {
    const bool lo = p.x_lo != nullptr;
    const int rows = lo ? 2 * p.n_tokens : p.n_tokens;
    const int64_t row_bytes = xstage_row_bytes(p.units_per_split);
    for (int idx = threadIdx.x; idx < rows * units * 4; idx += blockDim.x) {
        const int r = idx / (units * 4), ui = (idx >> 2) % units, c = idx & 3;
        const __nv_bfloat16* src = (lo && (r & 1) ? p.x_lo : p.x) + int64_t(lo ? r >> 1 : r) * p.ldx;
        uint32_t b[8];
        if constexpr (F == WeightFormat::Q8G32Fp16) {
            const int64_t k0 = (u_begin + ui) * TiledTraits<F>::kUnit;
            q8_unit_b<true>(b, src + k0, p.k - k0, c, true);
        } else {
            const int64_t kk = (u_begin + ui) * TiledTraits<F>::kUnit + c * 16; // k % 16 == 0: all or nothing
            const uint4 v0 = kk < p.k ? load_cached16(src + kk) : make_uint4(0, 0, 0, 0);
            const uint4 v1 = kk < p.k ? load_cached16(src + kk + 8) : make_uint4(0, 0, 0, 0);
            const uint32_t xw[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
            if constexpr (F == WeightFormat::Fp8E4m3RowBf16) fp8_unit_b(b, xw);
            else q4_unit_b(b, xw);
        }
        uint4* dst = reinterpret_cast<uint4*>(xs + r * row_bytes + ui * 128 + c * 32);
        dst[0] = make_uint4(b[0], b[1], b[2], b[3]);
        dst[1] = make_uint4(b[4], b[5], b[6], b[7]);
    }
    __syncthreads();
}

// tiled_compute's x source for staged x (one pass): row points at the lane's row, quad and the
// step's first unit. A column without a token reads token 0's row instead of zeros (no predicate,
// no zeroing per load): mma columns are independent and gemv_store never stores such a column,
// so the stored sums are the same bits.
struct SharedX {
    const uint8_t* row;
    __device__ __forceinline__ uint4 bf16_words(int, int) const { return make_uint4(0, 0, 0, 0); } // not staged
    __device__ __forceinline__ void words(int i, int, uint32_t (&b)[8]) const {
        const uint4 v0 = *reinterpret_cast<const uint4*>(row + i * 128);
        const uint4 v1 = *reinterpret_cast<const uint4*>(row + i * 128 + 16);
        b[0] = v0.x, b[1] = v0.y, b[2] = v0.z, b[3] = v0.w, b[4] = v1.x, b[5] = v1.y, b[6] = v1.z, b[7] = v1.w;
    }
};

// 1-D bulk copy global -> shared of `bytes` (multiple of 16, both ends 16-byte aligned), counted
// on mbarrier `bar` as transaction bytes.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

// Orders the generic-proxy shared-memory accesses that precede it (its own and, through a barrier
// before it, those of the threads it synchronised with) before its later async-proxy ones: here
// the lanes' ld.shared of a ring slot before lane 0's bulk copy that refills it.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// The stage in shared memory laid out as in global memory: TiledFrag as tiled_load would fill it.
template <WeightFormat F>
__device__ __forceinline__ void tiled_load_shared(TiledFrag<F>& f, const uint8_t* stage, int lane, int g) {
    constexpr int kBlock = tiled_block_bytes(F);
#pragma unroll
    for (int i = 0; i < TiledTraits<F>::kUnroll; ++i)
#pragma unroll
        for (int h = 0; h < TiledFrag<F>::kVecs; ++h)
            f.w[i][h] = *reinterpret_cast<const uint4*>(stage + i * kBlock + h * 512 + lane * 16);
    if constexpr (tiled_high_words(F) > 0) {
#pragma unroll
        for (int i = 0; i < TiledTraits<F>::kUnroll; ++i) tiled_load_high<F, true>(f.h[i], stage + i * kBlock, lane);
    }
    if constexpr (tiled_grouped(F)) {
#pragma unroll
        for (int q = 0; q < TiledTraits<F>::kUnroll / 4; ++q)
            f.s[q] = *reinterpret_cast<const uint4*>(stage + PipeStage<F>::kCodeBytes + (q * 8 + g) * 16);
    } else if constexpr (F == WeightFormat::Q8G32Fp16) {
#pragma unroll
        for (int q = 0; q < TiledTraits<F>::kUnroll / 2; ++q)
            f.s[q] = *reinterpret_cast<const uint4*>(stage + PipeStage<F>::kCodeBytes + (q * 8 + g) * 16);
    }
}

// A8 (with XS, q4 only): x staged as int8 (gemv_q4a8.cuh) and multiplied on int8 tensor cores;
// A8G: the int8 x read from p.x8 in global memory (L1) instead, nothing staged.
// C: the split-K partials may meet in a cluster (gemv_store; only A8G instances have it: the
// others, batch 1 among them, were slower with that path compiled in).
template <WeightFormat F, int P, int S, bool XS, bool A8 = false, bool A8G = false, bool C = false>
__global__ void __launch_bounds__(kGemvWarps * 32, P == 1 ? 4 : 3) gemv_tiled_pipe_kernel(GemvParams p) {
    static_assert(S >= 2 && kGemvWarps * S * 8 <= kPipeBarrierBytes, "barrier area");
    static_assert(!XS || (P == 1 && F != WeightFormat::Bf16), "x is staged for one-pass fp8/q4/q5/q6 only");
    static_assert(!A8 || (XS && F == WeightFormat::Q4G64Fp16), "int8 x is staged, for q4 only");
    static_assert(!A8G || A8, "int8 x from global memory is a form of the int8 route");
    static_assert(!C || A8G, "clusters for the batch-2..8 int8 route only");
    extern __shared__ __align__(128) uint8_t smem[];
    constexpr int kUnroll = TiledTraits<F>::kUnroll, kBlock = tiled_block_bytes(F);
    using Stage = PipeStage<F>;
    const TiledWarp<F> wp(p);
    const int lane = wp.lane, warp = threadIdx.x >> 5;
    GemvParams p_out = p; // the columns and the epilogue's view of p
    if constexpr (A8) p_out.x_lo = nullptr; // int8 x holds x + x_lo: a column is a token
    const TiledColumns<P> cols = tiled_columns<P>(p_out, wp.g, wp.c);
    const int64_t u_begin = wp.u_begin, u_end = wp.u_end;
    // units_per_split and tiled_units are multiples of kUnroll, so every step is whole.
    const int steps = u_begin < u_end ? int((u_end - u_begin) / kUnroll) : 0;
    const uint32_t bars = smem_u32(smem) + warp * S * 8;
    const uint8_t* ring = smem + kPipeBarrierBytes + size_t(warp) * S * Stage::kBytes;
    const uint32_t ring_addr = smem_u32(ring);
    // Steps are requested in order (0 .. S - 1 up front, then st + S while step st is multiplied), so
    // lane 0 walks the sources with two pointers. Step st goes into slot st % S; its barrier
    // completes phase st / S when all bytes have landed.
    const uint8_t* next_w = wp.wtile + u_begin * kBlock;
    const uint8_t* next_s = wp.stile + u_begin / Stage::kScaleUnits * 128;
    auto request = [&](int slot) {
        const uint32_t bar = bars + slot * 8, dst = ring_addr + slot * Stage::kBytes;
        mbar_arrive_expect_tx(bar, Stage::kBytes);
        bulk_load(dst, next_w, Stage::kCodeBytes, bar);
        next_w += Stage::kCodeBytes;
        if constexpr (Stage::kScaleBytes > 0) {
            bulk_load(dst + Stage::kCodeBytes, next_s, Stage::kScaleBytes, bar);
            next_s += Stage::kScaleBytes;
        }
    };
    if (lane == 0) {
#pragma unroll
        for (int s = 0; s < S; ++s) mbar_init(bars + s * 8, 1);
        mbar_init_fence();
#pragma unroll
        for (int s = 0; s < S; ++s)
            if (s < steps) request(s);
    }
    __syncwarp();
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // x, residual and the split-K scratch come from earlier kernels

    const uint8_t* xrow = nullptr; // XS: this lane's staged row and quad at the step's first unit
    const float* dsc = nullptr;    // A8: the step's first unit's token scales
    if constexpr (A8G) {
        // A column without a token multiplies token 0's row (valid bytes; its sums are not stored).
        const int token = wp.g < p.n_tokens ? wp.g : 0;
        xrow = p.x8.q + token * p.x8.row_bytes + u_begin * 64 + wp.c * 16;
        dsc = p.x8.d + u_begin * 8;
    } else if constexpr (A8) {
        uint8_t* xs = smem + kPipeBarrierBytes + size_t(kGemvWarps) * S * Stage::kBytes;
        stage_x_int8(p, xs, u_begin, int(u_end - u_begin));
        // A column without a token multiplies token 0's row (valid bytes; its sums are not stored).
        const int token = wp.g < p.n_tokens ? wp.g : 0;
        xrow = xs + token * x8_row_bytes(p.units_per_split) + wp.c * 16;
        dsc = reinterpret_cast<const float*>(xs + p.n_tokens * x8_row_bytes(p.units_per_split));
    } else if constexpr (XS) {
        uint8_t* xs = smem + kPipeBarrierBytes + size_t(kGemvWarps) * S * Stage::kBytes;
        stage_x<F>(p, xs, u_begin, int(u_end - u_begin));
        const bool lo = p.x_lo != nullptr;
        const int g_token = lo ? (wp.g & 3) : wp.g, token = g_token < p.n_tokens ? g_token : 0; // see SharedX
        const int r = lo ? 2 * token + (wp.g >> 2) : token;
        xrow = xs + r * xstage_row_bytes(p.units_per_split) + wp.c * 32;
    }

    float acc[P][4] = {};
    int slot = 0;
    uint32_t phase = 0;
    int64_t u = u_begin; // the step's first unit (x from L1)
    for (int st = 0; st < steps; ++st) {
        mbar_wait(bars + slot * 8, phase);
        TiledFrag<F> f;
        tiled_load_shared<F>(f, ring + slot * Stage::kBytes, lane, wp.g);
        // Every lane has read the slot (the loads are ordered before the warp barrier), so lane 0
        // may refill it now: S steps stay in flight while this one is multiplied. The refill is an
        // async-proxy write after generic-proxy reads of the same bytes, which __syncwarp does not
        // order (in SASS the copy is issued with the slot's last LDS still outstanding): without
        // the proxy fence a late LDS can read step st + S's bytes (rare, nondeterministic
        // mismatches of the q8 two-pass ring in [gemv_pipe] and [gemv]).
        __syncwarp();
        if (lane == 0 && st + S < steps) {
            fence_proxy_async_shared();
            request(slot);
        }
        if constexpr (A8) {
            q4a8_compute<A8G>(f, xrow, dsc, wp.c, acc);
            xrow += kUnroll * 64;
            dsc += kUnroll * 8;
        } else if constexpr (XS) {
            tiled_compute<F, 1>(f, SharedX{xrow}, acc);
            xrow += kUnroll * 128;
        } else {
            // GlobalX: columns without a token read token 0's x, except fp8 (ptxas schedules its
            // two-pass step worse without the predicates: 926 -> 1066 SASS per step).
            tiled_step<F, P, F == WeightFormat::Fp8E4m3RowBf16>(f, p, u, wp.c, cols, acc);
        }
        u += kUnroll;
        if (++slot == S) slot = 0, phase ^= 1u;
    }
    tiled_finish<F, P, 8, C>(p_out, acc, cols, wp.src_tile, wp.tile * 16, wp.g); // split-K partials in one round trip
}

// Host side (gemv_pipe.cu): resident blocks per SM of the one-pass pipelined kernel, and the
// launch of the one- or two-pass kernel; stages in 2..4, format Bf16/Fp8E4m3RowBf16/Q4G64Fp16/Q5G64Fp16/
// Q6G64Fp16. stage_x: use the XS kernel where it applies (one pass, not bf16, x within kXStageMaxBytes).
int gemv_pipe_resident_blocks(WeightFormat f, int stages);
void gemv_pipe_set_carveout(int percent); // gemv_set_tiled_pipeline's carveout
cudaError_t gemv_pipe_launch(WeightFormat f, int stages, bool stage_x, bool two_pass, const GemvParams& p,
                             dim3 grid, cudaStream_t stream);
// The int8-x launch (q4, one pass for up to 8 tokens, x_lo added to x; gemv_pipe_int8_fits(p) must
// hold; p.x8.q given: the int8 x read from there).
bool gemv_pipe_int8_fits(const GemvParams& p);
cudaError_t gemv_pipe_launch_int8(int stages, const GemvParams& p, dim3 grid, cudaStream_t stream);

} // namespace ninfer::kernels::detail
