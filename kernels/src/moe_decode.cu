// ninfer::kernels - MoE decode: routing + shared gate/up, routed gate/up + SwiGLU, down + combine.
#include "moe_shared_mma.cuh"

#include <cstdlib>
#include <type_traits>

namespace ninfer::kernels {

namespace detail {

// The weight formats a MoE kernel instance is compiled for (bit 1 << format). moe_decode launches
// the smallest instance covering the layer's six views. Why: the code for every format made the
// three kernels 79-352 KB of SASS, and a launch's warps then stall on instruction fetch (ncu of the
// first launch at one token: PC samples mostly "no instruction"); the step with the kernels built
// for q4 alone ran faster at batch 1 (kernels/PERF_NOTES.md session 14). Every
// instance runs the same arithmetic for a format, so the bits do not depend on the instance.
constexpr unsigned format_bit(WeightFormat f) { return 1u << unsigned(f); }
constexpr unsigned kMoeFormatsQ4 = format_bit(WeightFormat::Q4G64Fp16);
// The converter's q4 recipe (bf16 router, q4 expert gate/up, q5 expert down, q8 shared expert).
constexpr unsigned kMoeFormatsMix = kMoeFormatsQ4 | format_bit(WeightFormat::Bf16) |
                                    format_bit(WeightFormat::Q5G64Fp16) | format_bit(WeightFormat::Q8G32Fp16);
constexpr unsigned kMoeFormatsAll = kMoeFormatsMix | format_bit(WeightFormat::Fp8E4m3RowBf16) |
                                    format_bit(WeightFormat::Q6G64Fp16);
// With kMoeTensorCoresOnly: every view q4 and each of the three launches on its tensor-core path
// (p.mma, p.shared_mma, p.down_mma), so the instance has no FMA dot code at all.
constexpr unsigned kMoeTensorCoresOnly = 1u << 31;
template <unsigned FS> constexpr bool tensor_cores_only() { return (FS & kMoeTensorCoresOnly) != 0; }

// fn(std::integral_constant<WeightFormat, F>{}) for the stored format f of a MoE view (not nvfp4),
// f in FS (the host picks an instance whose FS holds every view's format; q4 is the default case).
template <unsigned FS_, class Fn> __device__ __forceinline__ void with_format(WeightFormat f, Fn&& fn) {
    constexpr unsigned FS = FS_ & ~kMoeTensorCoresOnly;
    static_assert((FS & kMoeFormatsQ4) != 0 && (FS & ~kMoeFormatsAll) == 0);
    using F = WeightFormat;
    if constexpr (FS == kMoeFormatsAll) { // (the form every instance had before the sets)
        switch (f) {
        case F::Bf16: fn(std::integral_constant<F, F::Bf16>{}); break;
        case F::Fp8E4m3RowBf16: fn(std::integral_constant<F, F::Fp8E4m3RowBf16>{}); break;
        case F::Q5G64Fp16: fn(std::integral_constant<F, F::Q5G64Fp16>{}); break;
        case F::Q6G64Fp16: fn(std::integral_constant<F, F::Q6G64Fp16>{}); break;
        case F::Q8G32Fp16: fn(std::integral_constant<F, F::Q8G32Fp16>{}); break;
        default: fn(std::integral_constant<F, F::Q4G64Fp16>{}); break;
        }
    } else if constexpr (FS == kMoeFormatsQ4) {
        fn(std::integral_constant<F, F::Q4G64Fp16>{});
    } else {
        static_assert(FS == kMoeFormatsMix);
        switch (f) {
        case F::Bf16: fn(std::integral_constant<F, F::Bf16>{}); break;
        case F::Q5G64Fp16: fn(std::integral_constant<F, F::Q5G64Fp16>{}); break;
        case F::Q8G32Fp16: fn(std::integral_constant<F, F::Q8G32Fp16>{}); break;
        default: fn(std::integral_constant<F, F::Q4G64Fp16>{}); break;
        }
    }
}

template <WeightFormat F, int NT, int NR>
__device__ __forceinline__ void gate_up_dots(const MoeRows& m, const int64_t (&rows)[NR], const float* const (&xs)[NT],
                                             int nt, float (&acc)[NT][NR]) {
    rows_dot<F, NR, NT>(m, rows, xs, nt, threadIdx.x & 31, 32, acc);
}

// One warp: intermediate rows i .. i + R - 1 of an expert (gate rows at base, up rows at base + I)
// for the tokens of pair[0..nt): act[pair][i] = silu(gate . x) * (up . x). A row's dot does not
// depend on R (rows_dot keeps each row's sum apart), so R = 1 and 2 give the same bits.
template <unsigned FS, int NT, int R = kGateUpRowsPerWarp>
__device__ __forceinline__ void gate_up_warp(const MoeParams& p, const MoeRows& m, int64_t I, int64_t base,
                                             const int32_t (&pair)[NT], int nt, int64_t i) {
    static_assert(R == 1 || R == 2);
    int64_t rows[2 * R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        rows[r] = base + i + r;
        rows[R + r] = base + I + i + r;
    }
    if constexpr (NT > 1) {
        // One token at a time in a real loop: the dots unrolled over 8 tokens (and six formats) made
        // a kernel too large for the instruction cache (PERF_NOTES session 8). rows_dot adds a token's
        // chunks in the same order either way: the same bits.
        float scale[2 * R];
#pragma unroll
        for (int j = 0; j < 2 * R; ++j) scale[j] = fp8_row_scale(m, rows[j]);
#pragma unroll 1
        for (int t = 0; t < nt; ++t) {
            const int32_t pr = pick(pair, t);
            const float* const x1[1] = {p.x + int64_t(pr / (p.top_k + 1)) * p.x_stride};
            float acc1[1][2 * R] = {};
            with_format<FS>(m.format, [&](auto f) { gate_up_dots<decltype(f)::value, 1, 2 * R>(m, rows, x1, 1, acc1); });
            float v[2 * R];
#pragma unroll
            for (int j = 0; j < 2 * R; ++j) v[j] = warp_sum(acc1[0][j]) * scale[j];
            if ((threadIdx.x & 31) == 0) {
                float* a = p.act + int64_t(pr) * p.act_stride + i;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    a[r] = silu(v[r]) * v[R + r];
                    store_act_parts(p, pr, i + r, a[r]);
                }
            }
        }
    } else {
        const float* xs[NT];
#pragma unroll
        for (int t = 0; t < NT; ++t) xs[t] = p.x + int64_t(pair[t] / (p.top_k + 1)) * p.x_stride;
        float acc[NT][2 * R] = {};
        with_format<FS>(m.format, [&](auto f) { gate_up_dots<decltype(f)::value, NT, 2 * R>(m, rows, xs, nt, acc); });
        float scale[2 * R];
#pragma unroll
        for (int j = 0; j < 2 * R; ++j) scale[j] = fp8_row_scale(m, rows[j]);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t >= nt) break;
            float v[2 * R];
#pragma unroll
            for (int j = 0; j < 2 * R; ++j) v[j] = warp_sum(acc[t][j]) * scale[j];
            if ((threadIdx.x & 31) == 0) {
                float* a = p.act + int64_t(pair[t]) * p.act_stride + i;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    a[r] = silu(v[r]) * v[R + r];
                    store_act_parts(p, pair[t], i + r, a[r]);
                }
            }
        }
    }
}

// Router rows of a block: warp w, lane l takes chunk c0 = 32 w + l, then every 256th (w may be a
// virtual warp: route_block above one token).
template <WeightFormat F, int NT>
__device__ __forceinline__ void route_dots(const MoeRows& m, const int64_t (&rows)[kRouteRows], const float* const (&xs)[NT],
                                           int nt, int c0, float (&acc)[NT][kRouteRows]) {
    rows_dot<F, kRouteRows, NT>(m, rows, xs, nt, c0, kRouteWarps * 32, acc);
}

// Router block b < route_blocks - 1: router rows 4b..4b+3 for every token; b = route_blocks - 1:
// the score row. The last router block to finish routes (the counter counts router blocks only),
// except for one token (NT 1): then every block of the gate/up launch routes it from the logits,
// so the launch boundary replaces this launch's fence, counter and the logits' reload, and the
// gate/up blocks' read of the work list (session 7: a shorter chain per MoE layer).
template <unsigned FS, int NT> __device__ void route_block(const MoeParams& p) {
    __shared__ float part[kRouteWarps][NT][kRouteRows];
    __shared__ int32_t chosen[kMoeDecodeMaxTokens][kMoeMaxTopK];
    __shared__ uint32_t tok_mask[kMoeMaxExperts];
    __shared__ bool is_last;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, E = p.n_experts;
    const bool score_block = blockIdx.x == p.route_blocks - 1;
    const MoeRows& m = score_block ? p.score : p.router;
    const int n_rows = score_block ? 1 : E, row0 = score_block ? 0 : blockIdx.x * kRouteRows;
    int64_t rows[kRouteRows];
#pragma unroll
    for (int j = 0; j < kRouteRows; ++j) rows[j] = min(row0 + j, n_rows - 1);
    // One token keeps the unrolled form: the loop below measured slower at batch 1 (PERF_NOTES
    // session 8).
    if constexpr (NT == 1) {
        const float* xs[NT];
#pragma unroll
        for (int t = 0; t < NT; ++t) xs[t] = p.x + int64_t(min(t, p.n_tokens - 1)) * p.x_stride;
        float acc[NT][kRouteRows] = {};
        with_format<FS>(m.format, [&](auto f) { route_dots<decltype(f)::value, NT>(m, rows, xs, p.n_tokens, threadIdx.x, acc); });
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t >= p.n_tokens) break;
#pragma unroll
            for (int j = 0; j < kRouteRows; ++j) {
                const float v = warp_sum(acc[t][j]);
                if (lane == 0) part[warp][t][j] = v;
            }
        }
    }
    // More tokens: one at a time a warp group (a real loop; as gate_up_warp, the same bits): unrolled
    // over 8 tokens, the dots missed the instruction cache. Where a row has at most 128 chunks only
    // the first `used` warps hold one (route_dots' chunk 32 w + lane), so the block
    // runs 8 / used tokens at once, warp w acting as warp w % used for token w / used: every token's
    // chunk partials, warp sums and zeros of the idle warps are those of the one-token loop, bit for
    // bit (q4 router rows of the 35B-A3B: 64 chunks, 4 tokens a round instead of 1).
    const int used = NT > 1 ? int(min(int64_t(kRouteWarps), (m.chunks + 31) / 32)) : kRouteWarps;
    const int per_round = kRouteWarps / used, vwarp = warp % used, slot = warp / used;
    if (NT > 1 && slot < per_round) {
#pragma unroll 1
        for (int t = slot; t < p.n_tokens; t += per_round) {
            const float* const x1[1] = {p.x + int64_t(t) * p.x_stride};
            float acc[1][kRouteRows] = {};
            with_format<FS>(m.format, [&](auto f) { route_dots<decltype(f)::value, 1>(m, rows, x1, 1, vwarp * 32 + lane, acc); });
#pragma unroll
            for (int j = 0; j < kRouteRows; ++j) {
                const float v = warp_sum(acc[0][j]);
                if (lane == 0) part[vwarp][t][j] = v;
            }
        }
    }
    if (NT > 1) // the warps past `used` held no chunk: their sums are +0, as the loop above gave them
        for (int i = threadIdx.x; i < (kRouteWarps - used) * p.n_tokens * kRouteRows; i += blockDim.x)
            part[used + i / (p.n_tokens * kRouteRows)][i / kRouteRows % p.n_tokens][i % kRouteRows] = 0.f;
    __syncthreads();
    const int t = threadIdx.x / kRouteRows, j = threadIdx.x % kRouteRows;
    if (t < p.n_tokens && row0 + j < n_rows) {
        float s = 0.f;
        for (int w = 0; w < kRouteWarps; ++w) s += part[w][t][j];
        const float v = s * fp8_row_scale(m, rows[j]);
        if constexpr (NT == 1) { // kLogitCopies copies (route_one_token)
#pragma unroll
            for (int c = 0; c < kLogitCopies; ++c) p.logits[int64_t(c) * (E + 1) + (score_block ? E : row0 + j)] = v;
        } else {
            p.logits[int64_t(t) * (E + 1) + (score_block ? E : row0 + j)] = v;
            __threadfence(); // the last block reads these
        }
    }
    if constexpr (NT == 1) return;
    clear_choices(p, tok_mask); // every block: free work beside the counter's round trip
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(p.counter, 1u) == unsigned(p.route_blocks - 1);
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    route_tokens(p, chosen, tok_mask);
    __syncthreads();
    plan_work(p, chosen, tok_mask);
}

// Launch 1, 256 threads: route_blocks router blocks, then shared_row_blocks blocks of the shared
// expert's gate/up for each token group (it needs no routing, so it runs beside it): a q4 shared
// expert on tensor cores, 16 rows a block (shared_gate_up_mma: at one token these blocks were the
// launch's critical path in FMA dots); other formats in FMA dots, ceil(Is / 8)
// blocks at one token, ceil(Is / 16) above. NT: 1 for one token (fewer registers), else
// kMoeDecodeMaxTokens.
// Under PDL this kernel may start while the previous one (the norm that writes x) still runs: it
// first pulls its weight rows towards L2, then waits.
// NT 8 at one block an SM: at two (<= 128 registers) it spilled 480 bytes in its 8-token dots; its
// 97 blocks fit one wave either way.
template <int NT, unsigned FS>
__global__ void __launch_bounds__(kRouteWarps * 32, NT == 1 ? 2 : 1) moe_route_shared_kernel(MoeParams p) {
    const bool router = int(blockIdx.x) < p.route_blocks;
    // Shared-expert block sb = blockIdx.x - route_blocks: row block sb % shared_row_blocks for the
    // tokens of group sb / shared_row_blocks (one group at one token).
    // One token: a row per warp (twice the blocks, half the chain a warp; 129 blocks at two an SM);
    // more tokens: two rows per warp, so the two token groups stay one wave at one block an SM.
    constexpr int kSharedRows = NT == 1 ? 1 : kGateUpRowsPerWarp;
    const int sb = int(blockIdx.x) - p.route_blocks, rb = NT == 1 ? sb : sb % p.shared_row_blocks;
    if (!router && (tensor_cores_only<FS>() || p.shared_mma)) { // q4 shared expert on tensor cores (moe_shared_mma.cuh), its own PDL wait
        // No L2 prefetch of the shared down rows (the FMA path below keeps its): batch 1 was faster
        // without it, batch 2-8 the same (PERF_NOTES session 10).
        shared_gate_up_mma<NT>(p, sb);
        return;
    }
    const int64_t i = int64_t(rb) * kSharedRows * kRouteWarps + (threadIdx.x >> 5) * kSharedRows;
    if (router) { // the block's 4 router (or the score) rows, one 128-byte line per thread at a time
        const bool score_block = int(blockIdx.x) == p.route_blocks - 1;
        const MoeRows& m = score_block ? p.score : p.router;
        const int n_rows = score_block ? 1 : p.n_experts, row0 = score_block ? 0 : blockIdx.x * kRouteRows;
        for (int j = 0; j < kRouteRows; ++j)
            for (int64_t at = threadIdx.x * 128; at < m.row_bytes; at += blockDim.x * 128)
                prefetch_l2(m.data + min(row0 + j, n_rows - 1) * m.row_bytes + at);
    } else {
        if (i < p.shared_inter) { // the warp's gate and up rows
            const MoeRows& m = p.shared_gate_up;
            for (int r = 0; r < kSharedRows; ++r)
                for (const int64_t row : {i + r, p.shared_inter + i + r})
                    for (int64_t at = (threadIdx.x & 31) * 128; at < m.row_bytes; at += 32 * 128)
                        prefetch_l2(m.data + row * m.row_bytes + at);
        }
        // The third launch's shared down rows, a slice per block: they are L2 hits there.
        if (threadIdx.x == 0)
            prefetch_rows_l2(p.shared_down, 0, p.hidden, int(blockIdx.x) - p.route_blocks, int(gridDim.x) - p.route_blocks);
    }
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    if (router) {
        // One token with every x-parts item on a thread of its own (the 35B-A3B: 512 items, blocks 0
        // and 1): the item's x is loaded before the block's dots and split and stored after them, so
        // its L2 round trip overlaps theirs instead of preceding it (MoeParams::x_parts_early, set by
        // the host when every item has its thread).
        if (NT == 1 && p.x_parts_early && (tensor_cores_only<FS>() || p.mma)) {
            const XPartItem item = load_x_part_item(p, int(blockIdx.x * blockDim.x + threadIdx.x));
            route_block<FS, NT>(p);
            store_x_part_item(p, item);
            return;
        }
        if (tensor_cores_only<FS>() || p.mma) write_x_parts(p);
        route_block<FS, NT>(p);
        return;
    }
    if (i >= p.shared_inter) return; // Is is a multiple of 16: a warp has both of its rows or none
    const int t0 = NT == 1 ? 0 : sb / p.shared_row_blocks * p.shared_tokens;
    const int nt = NT == 1 ? p.n_tokens : min(p.n_tokens - t0, p.shared_tokens);
    int32_t pair[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) pair[t] = (t0 + min(t, nt - 1)) * (p.top_k + 1) + p.top_k;
    gate_up_warp<FS, NT, kSharedRows>(p, p.shared_gate_up, p.shared_inter, 0, pair, nt, i);
}

// Launch 2: grid (ceil(I / 16), min(n_tokens * K, E)), 256 threads: warp w of block (b, entry)
// computes intermediate rows 16b + 2w, +1 of the entry's expert for every token of the entry
// (q4 on tensor cores: the block's 16 rows, k split over the warps, moe_decode_mma.cuh). One
// token: each block first routes it from the logits (block (0, 0) publishes the routing).
// 2 blocks per SM (<= 128 registers): the 8 entries x 32 blocks of a 35B-A3B step fit in one wave.
template <int NT, unsigned FS>
__global__ void __launch_bounds__(kExpertWarps * 32, 2) moe_gate_up_kernel(MoeParams p) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: the logits or the work list come from the previous kernel
    const int entry = blockIdx.y, warp = threadIdx.x >> 5;
    int n_entries, expert, nt;
    int32_t pair[NT];
    if constexpr (NT == 1) { // route the token here (route_one_token); entry j: expert of rank j, pair j
        __shared__ int32_t chosen[kMoeMaxTopK];
        route_one_token(p, chosen, blockIdx.x == 0 && blockIdx.y == 0);
        __syncthreads();
        n_entries = p.top_k;
        if (entry >= n_entries) return;
        expert = chosen[entry];
        nt = 1;
        pair[0] = entry;
    } else {
        // The entry is read with the count (one round trip; entries past the count are in bounds).
        const int32_t* en = p.work + 1 + entry * kMoeEntryInts;
        n_entries = p.work[0];
        expert = en[0];
        nt = en[1];
        if (entry >= n_entries) return;
#pragma unroll
        for (int t = 0; t < NT; ++t) pair[t] = en[2 + min(t, nt - 1)];
    }
    // No L2 prefetch of the third launch's rows of this expert here: with it (up to 16 experts) the
    // step was slower at batch 1 and 2 (PERF_NOTES session 10).
    if (tensor_cores_only<FS>() || p.mma) { // block-uniform: every warp takes part (shared-memory reduction)
        gate_up_mma<NT>(p, expert, pair, nt, int64_t(blockIdx.x) * kGateUpRowsPerBlock);
        return;
    }
    const int64_t I = p.inter, i = int64_t(blockIdx.x) * kGateUpRowsPerBlock + warp * kGateUpRowsPerWarp;
    if (i >= I) return;
    gate_up_warp<FS, NT>(p, p.gate_up, I, int64_t(expert) * 2 * I, pair, nt, i);
}

// Lanes per row of the down launch: enough for the row's 16-byte chunks, 8 to 32.
__host__ __device__ inline int down_lanes_per_row(int64_t chunks) { return chunks >= 32 ? 32 : chunks >= 16 ? 16 : 8; }

template <WeightFormat F>
__device__ __forceinline__ void down_dots(const MoeRows& m, const int64_t (&rows)[4], const float* x, int lpr,
                                          float (&acc)[1][4]) {
    const float* const xs[1] = {x};
    rows_dot<F, 4, 1, true>(m, rows, xs, 1, threadIdx.x % lpr, lpr, acc);
}

// Down blocks: up to 16 warps (K + 1 of them) at <= 96 registers: 2 blocks of 9 warps per SM (at 104
// registers only one fits: ncu, Block Limit Registers 1, two waves at batch 1).
constexpr int kDownMaxWarps = 16;

// Launch 3: grid (H / T, token groups), min(K + 1, 16) warps, T = down_tile: block (b, g) computes
// out[t][bT, bT + T) for the down_tokens tokens of group g. Warp j takes choice j (then j + 16) of
// each of them in turn: q4 rows as one 16-row mma tile (down_mma_tile), else lpr lanes per row, 4
// rows per lane group, so a pass covers 128 / lpr rows (T for the routed experts: one pass); the
// dots go to shared memory ([t][j][T], down_tokens (K + 1) T floats, dynamic) and are combined in j
// order. Why not a block per (tile, token): at batch 8 that made 2048 small blocks, eight waves of
// latency-bound work; two token groups keep one wave.
template <unsigned FS> __global__ void __maxnreg__(96) moe_down_kernel(MoeParams p) {
    extern __shared__ float dots[];
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: routes and SwiGLU rows come from the previous kernels
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, K = p.top_k, T = p.down_tile;
    // Tokens [t0, t1) of this block (blockIdx.y: a group of down_tokens); dots indexed from t0.
    const int t0 = int(blockIdx.y) * p.down_tokens, t1 = min(p.n_tokens, t0 + p.down_tokens), n = t1 - t0;
    const int64_t h0 = int64_t(blockIdx.x) * T;
    // The combine's route weights, loaded now beside the expert ids and kept in a register until the
    // dots are done (not one more L2 round trip after them): thread i < n (K + 1) <= blockDim.x takes
    // weight i of the group's tokens.
    __shared__ float route_w[kMoeDecodeMaxTokens * (kMoeMaxTopK + 1)];
    const bool has_w = int(threadIdx.x) < n * (K + 1);
    const float w_mine = has_w ? p.weights[t0 * (K + 1) + threadIdx.x] : 0.f;
    for (int j = warp; j <= K; j += int(blockDim.x >> 5)) {
        const bool shared = j == K;
        const MoeRows& m = shared ? p.shared_down : p.down;
        if (tensor_cores_only<FS>() || p.down_mma) { // q4 on tensor cores: T = 16, one tile a (token, choice)
            for (int t = t0; t < t1; ++t) {
                const int64_t base = (shared ? 0 : int64_t(p.ids[t * K + j]) * p.hidden) + h0;
                float v_r, v_r8;
                down_mma_tile(p, m, base, t * (K + 1) + j, v_r, v_r8);
                if ((lane & 3) == 0) {
                    float* d = dots + ((t - t0) * (K + 1) + j) * T + (lane >> 2);
                    d[0] = v_r;
                    d[8] = v_r8;
                }
            }
            continue;
        }
        const int lpr = down_lanes_per_row(m.chunks), group = lane / lpr;
        for (int t = t0; t < t1; ++t) {
            const int64_t base = (shared ? 0 : int64_t(p.ids[t * K + j]) * p.hidden) + h0;
            const float* x = p.act + int64_t(t * (K + 1) + j) * p.act_stride;
            for (int r0 = 0; r0 < T; r0 += 128 / lpr) {
                int64_t rows[4];
#pragma unroll
                for (int r = 0; r < 4; ++r) rows[r] = base + min(r0 + group * 4 + r, T - 1);
                float acc[1][4] = {};
                with_format<FS>(m.format, [&](auto f) { down_dots<decltype(f)::value>(m, rows, x, lpr, acc); });
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    for (int o = lpr / 2; o > 0; o >>= 1) acc[0][r] += __shfl_xor_sync(0xffffffffu, acc[0][r], o);
                    const int local = r0 + group * 4 + r;
                    if (lane % lpr == 0 && local < T)
                        dots[((t - t0) * (K + 1) + j) * T + local] = acc[0][r] * fp8_row_scale(m, rows[r]);
                }
            }
        }
    }
    if (has_w) route_w[threadIdx.x] = w_mine;
    __syncthreads();
    for (int idx = threadIdx.x; idx < n * T; idx += blockDim.x) {
        const int tl = idx / T, h = idx % T, t = t0 + tl;
        const float* w = route_w + tl * (K + 1);
        float s = 0.f;
        for (int j = 0; j <= K; ++j) s = fmaf(w[j], dots[(tl * (K + 1) + j) * T + h], s);
        p.out[int64_t(t) * p.out_stride + h0 + h] = s;
    }
}

bool view_ok(const WeightView& w, int64_t n, int64_t k) {
    return w.data && w.n == n && w.k == k && k % 16 == 0 && w.layout == WeightLayout::Artifact &&
           (reinterpret_cast<uintptr_t>(w.data) & 15u) == 0 &&
           w.format != WeightFormat::Nvfp4;
}

} // namespace detail

size_t moe_decode_logits_floats(int n_experts) { return size_t(kMoeDecodeMaxTokens) * size_t(n_experts + 1); }
size_t moe_decode_work_ints(int n_experts, int top_k) {
    const int entries = std::min(kMoeDecodeMaxTokens * top_k, n_experts);
    return 1 + size_t(entries) * detail::kMoeEntryInts;
}
namespace {
// 64-element groups of a token's x parts (a q4 gate/up row's groups) and of a pair's act parts: the
// scratch's sizes below and moe_decode's pointers into it.
int64_t x_part_groups(int64_t hidden) { return detail::moe_align_up(hidden, 128) / 64; }
int64_t act_groups(int64_t inter, int64_t shared_inter) {
    return detail::moe_align_up(std::max(inter, shared_inter), 128) / 64;
}
} // namespace

size_t moe_decode_act_floats(int top_k, int64_t inter, int64_t shared_inter, int64_t hidden) {
    return size_t(kMoeDecodeMaxTokens) * size_t(top_k + 1) * size_t(detail::moe_align_up(std::max(inter, shared_inter), 4)) +
           size_t(kMoeDecodeMaxTokens) * size_t(x_part_groups(hidden)) * detail::kXPartWords +
           size_t(kMoeDecodeMaxTokens) * size_t(top_k + 1) * size_t(act_groups(inter, shared_inter)) * detail::kXPartWords;
}

namespace {
// The three launches' shapes (moe_decode) and the launches of instance FS.
struct MoeLaunch {
    dim3 first, gate_up, block, down, down_block;
    size_t down_smem;
};
template <unsigned FS>
cudaError_t launch_moe(const detail::MoeParams& p, const MoeLaunch& l, int n, cudaStream_t stream) {
    using namespace detail;
    cudaError_t err = n == 1 ? launch_pdl(moe_route_shared_kernel<1, FS>, l.first, l.block, 0, stream, p)
                             : launch_pdl(moe_route_shared_kernel<kMoeDecodeMaxTokens, FS>, l.first, l.block, 0, stream, p);
    if (err == cudaSuccess)
        err = n == 1 ? launch_pdl(moe_gate_up_kernel<1, FS>, l.gate_up, l.block, 0, stream, p)
                     : launch_pdl(moe_gate_up_kernel<kMoeDecodeMaxTokens, FS>, l.gate_up, l.block, 0, stream, p);
    if (err == cudaSuccess) err = launch_pdl(moe_down_kernel<FS>, l.down, l.down_block, l.down_smem, stream, p);
    return err;
}
} // namespace

cudaError_t moe_decode(const MoeDecodeArgs& a, cudaStream_t stream) {
    using namespace detail;
    const MoeDecodeWeights& w = a.w;
    const int E = w.n_experts, K = w.top_k, n = a.n_tokens;
    const int64_t H = w.router.k, I = w.inter, Is = w.shared_inter;
    const MoeDecodeScratch& s = a.scratch;
    if (n < 1 || n > kMoeDecodeMaxTokens || K < 1 || K > kMoeMaxTopK || E < K || E > kMoeMaxExperts || H % 16 != 0 ||
        I < 16 || I % 16 != 0 || Is < 16 || Is % 16 != 0 || !a.x || !a.out || a.x_stride % 4 != 0 ||
        a.x_stride < H || a.out_stride < H || (reinterpret_cast<uintptr_t>(a.x) & 15u) != 0 ||
        (reinterpret_cast<uintptr_t>(a.out) & 15u) != 0 || !s.logits || !s.ids || !s.weights || !s.work || !s.act ||
        !s.counter || !view_ok(w.router, E, H) || !view_ok(w.shared_score, 1, H) ||
        !view_ok(w.experts_gate_up, int64_t(E) * 2 * I, H) || !view_ok(w.experts_down, int64_t(E) * H, I) ||
        !view_ok(w.shared_gate_up, 2 * Is, H) || !view_ok(w.shared_down, H, Is))
        return cudaErrorInvalidValue;

    MoeParams p{};
    p.router = moe_rows(w.router);
    p.score = moe_rows(w.shared_score);
    p.gate_up = moe_rows(w.experts_gate_up);
    p.shared_gate_up = moe_rows(w.shared_gate_up);
    p.down = moe_rows(w.experts_down);
    p.shared_down = moe_rows(w.shared_down);
    p.n_experts = E;
    p.top_k = K;
    p.n_tokens = n;
    p.inter = I;
    p.shared_inter = Is;
    p.hidden = H;
    p.route_blocks = (E + kRouteRows - 1) / kRouteRows + 1;
    p.x = a.x;
    p.x_stride = a.x_stride;
    p.logits = s.logits;
    p.ids = s.ids;
    p.weights = s.weights;
    p.work = s.work;
    p.counter = s.counter;
    p.act = s.act;
    p.act_stride = moe_align_up(std::max(I, Is), 4);
    p.x_parts = reinterpret_cast<uint32_t*>(s.act + size_t(kMoeDecodeMaxTokens) * size_t(K + 1) * size_t(p.act_stride));
    p.mma = w.experts_gate_up.format == WeightFormat::Q4G64Fp16;
    p.down_mma = w.experts_down.format == WeightFormat::Q4G64Fp16 && w.shared_down.format == WeightFormat::Q4G64Fp16 &&
                 I % 128 == 0 && Is % 128 == 0;
    p.shared_mma = w.shared_gate_up.format == WeightFormat::Q4G64Fp16 && p.shared_gate_up.groups <= kSharedMmaMaxGroups;
    p.act_groups = act_groups(I, Is);
    p.act_parts = p.x_parts + size_t(kMoeDecodeMaxTokens) * size_t(x_part_groups(H)) * kXPartWords;
    // Output rows per down block: one 16-row mma tile, else 128 / lanes per routed row (4, 8 or 16);
    // each divides H.
    p.down_tile = p.down_mma ? 16 : 128 / down_lanes_per_row(p.down.chunks);
    // Above 4 tokens the shared expert's gate/up blocks, and from 2 tokens the down launch, take the
    // tokens in two groups, each its own blocks: a warp's tokens run one after another, each waiting
    // for its rows; two groups overlap those waits (measured with every lane routed apart, where
    // lanes that all choose the same experts show no gain: kernels/PERF_NOTES.md sessions 9, 10).
    const int group_tokens = n > 4 ? (n + 1) / 2 : n;
    p.down_tokens = (n + 1) / 2;
    p.out = a.out;
    p.out_stride = a.out_stride;
    p.x_parts_early = int64_t(n) * p.gate_up.groups * 16 <= int64_t(p.route_blocks) * kRouteWarps * 32;

    // The shared expert's gate/up blocks (at one block an SM the 65 router blocks and 2 x 32 shared
    // blocks of batch 8 are still one wave).
    // On tensor cores (shared_mma): 16 rows a block.
    const int shared_rows_per_block = p.shared_mma ? kSharedMmaRows : (n == 1 ? 1 : kGateUpRowsPerWarp) * kRouteWarps;
    p.shared_row_blocks = int((Is + shared_rows_per_block - 1) / shared_rows_per_block);
    p.shared_tokens = group_tokens; // <= 4 (shared_gate_up_mma's bound)
    const unsigned first =
        unsigned(p.route_blocks + p.shared_row_blocks * ((n + p.shared_tokens - 1) / p.shared_tokens));
    const dim3 gate_up_grid(unsigned((I + kGateUpRowsPerBlock - 1) / kGateUpRowsPerBlock), unsigned(std::min(n * K, E)));
    const dim3 block(kRouteWarps * 32),
        down_grid(unsigned(H / p.down_tile), unsigned((n + p.down_tokens - 1) / p.down_tokens));
    // The down launch's dots (n (K + 1) T floats) need no shared-memory opt-in.
    static_assert(sizeof(float) * kMoeDecodeMaxTokens * (kMoeMaxTopK + 1) * kDownMaxTile <= 48 * 1024);
    const size_t down_smem = size_t(p.down_tokens) * size_t(K + 1) * size_t(p.down_tile) * sizeof(float);
    const dim3 down_block(unsigned(std::min(K + 1, kDownMaxWarps)) * 32);
    const MoeLaunch launch{dim3(first), gate_up_grid, block, down_grid, down_block, down_smem};
    const unsigned formats = format_bit(w.router.format) | format_bit(w.shared_score.format) |
                             format_bit(w.experts_gate_up.format) | format_bit(w.experts_down.format) |
                             format_bit(w.shared_gate_up.format) | format_bit(w.shared_down.format);
    if ((formats & ~kMoeFormatsQ4) == 0 && p.mma && p.shared_mma && p.down_mma)
        return launch_moe<kMoeFormatsQ4 | kMoeTensorCoresOnly>(p, launch, n, stream);
    if ((formats & ~kMoeFormatsQ4) == 0) return launch_moe<kMoeFormatsQ4>(p, launch, n, stream);
    if ((formats & ~kMoeFormatsMix) == 0) return launch_moe<kMoeFormatsMix>(p, launch, n, stream);
    return launch_moe<kMoeFormatsAll>(p, launch, n, stream);
}

} // namespace ninfer::kernels
