// ninfer::kernels - MoE decode v4 (moe_decode.h, MoeDecodePath::V4 / V4Cluster): the first launch with
// the shared expert's gate/up on tensor cores (optionally the router as one cluster), and the down
// launch on tensor cores. The second launch is moe_decode.cu's gate/up kernel writing act parts.
//
// Why (PERF_NOTES "MoE decode v3", what is left): at batch 8 the shared gate/up on FMAs over 32
// blocks made the first launch 49 us and the down on FMAs took 42 us (issue-bound: ~4 instructions
// per weight per token); at batch 1 the routing waits on logit stores, a fence and a counter atomic.
#include "moe_decode_v4.cuh"

#include <atomic>

namespace ninfer::kernels::detail {

namespace {

// The shared expert's gate/up, v4: block sb = (token chunk tc, row block rb) of the shared blocks
// computes rows 16 rb .. 16 rb + 15 for tokens tc * ST .. (ST = p.shared_tokens). It splits those
// tokens' x into parts in shared memory (a B fragment read per mma instead of 4 bytes of x per
// code), and stores the groups g = rb (mod Is / 16) of them to global x_parts for the second
// launch. A token's sums never depend on the chunk it shares: batch == singles.
template <int ST> __device__ void shared_gate_up_v4(const MoeParams& p, uint32_t* xs) {
    const int rbs = int(p.shared_inter / kGateUpRowsPerBlock), sb = int(blockIdx.x) - p.route_blocks;
    const int rb = sb % rbs, t0 = (sb / rbs) * ST, nt = min(ST, p.n_tokens - t0), G = int(p.gate_up.groups);
    if (nt <= 0) return; // grid padding (cluster launches round the grid up)
    for (int it = threadIdx.x; it < nt * G * 16; it += blockDim.x) {
        const int i = it & 3, q = (it >> 2) & 3, g = (it >> 4) % G, tl = (it >> 4) / G;
        uint32_t w[3][2];
        x_item_words(p, t0 + tl, g, q, i, w);
        uint32_t* local = xs + (tl * G + g) * kXPartWords + q * 24 + 2 * i;
        uint32_t* global = p.x_parts + (int64_t(t0 + tl) * G + g) * kXPartWords + q * 24 + 2 * i;
#pragma unroll
        for (int pp = 0; pp < 3; ++pp) {
            local[pp * 8] = w[pp][0];
            local[pp * 8 + 1] = w[pp][1];
            if (g % rbs == rb) {
                global[pp * 8] = w[pp][0];
                global[pp * 8 + 1] = w[pp][1];
            }
        }
    }
    __syncthreads();
    int32_t pair[ST];
#pragma unroll
    for (int c = 0; c < ST; ++c) pair[c] = (t0 + min(c, nt - 1)) * (p.top_k + 1) + p.top_k;
    const int64_t i0 = int64_t(rb) * kGateUpRowsPerBlock;
    gate_up_mma<ST, true, true>(p, p.shared_gate_up, i0, p.shared_inter, xs, t0, pair, nt, i0);
}

// Launch 1 (v4), 256 threads: p.route_blocks router blocks (Cluster: one cluster of
// kMoeClusterBlocks), then p.shared_blocks shared gate/up blocks (then padding to a whole cluster).
// Dynamic shared memory: the x parts of p.shared_tokens tokens. Before the PDL wait only weights are
// touched (L2 prefetch of the block's rows and a slice of the shared down rows).
template <int NT, bool Cluster>
__global__ void __launch_bounds__(kRouteWarps * 32, 2) moe_route_shared_v4_kernel(MoeParams p) {
    extern __shared__ __align__(16) uint32_t xs[];
    const bool router = int(blockIdx.x) < p.route_blocks;
    if (router) {
        if constexpr (Cluster) cluster_arrive_relaxed(); // "started" for the exchange (cluster_route_block)
        prefetch_router_rows(p, Cluster);
    } else {
        const int sb = int(blockIdx.x) - p.route_blocks, rbs = int(p.shared_inter / kGateUpRowsPerBlock);
        if (sb < p.shared_blocks) {
            const MoeRows& m = p.shared_gate_up;
            const int64_t i0 = int64_t(sb % rbs) * kGateUpRowsPerBlock, j = threadIdx.x >> 3;
            const int64_t r = j < 16 ? i0 + j : p.shared_inter + i0 + j - 16; // 32 rows, 8 threads each
            for (int64_t at = (threadIdx.x & 7) * 128; at < m.row_bytes; at += 8 * 128) prefetch_l2(m.data + r * m.row_bytes + at);
            if (threadIdx.x == 0) prefetch_rows_l2(p.shared_down, 0, p.hidden, sb, p.shared_blocks);
        }
    }
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    if (router) {
        if constexpr (Cluster) cluster_route_block<NT>(p);
        else route_block<NT>(p);
        return;
    }
    shared_gate_up_v4<NT == 1 ? 1 : kSharedTokensPerBlock>(p, xs);
}

// Launch 3 (v4): grid (H / 16, n_tokens), min(K + 1, 16) warps. Warp j takes choice j (then j + 16):
// the 16 down rows h0 .. h0 + 15 of its expert (the shared one for j = K) as one mma tile, B = the
// choice's act parts (columns 0-2: hi, mid, lo; act_parts past the valid I are never read: a lane's
// 16 codes are all below I or all above, I % 16 == 0); the dots go to shared memory and are
// combined in j order, as moe_down_kernel does.
__global__ void __maxnreg__(96) moe_down_mma_kernel(MoeParams p) {
    constexpr int U = kDownGroupsPerRound;
    __shared__ float dots[kMoeMaxTopK + 1][16];
    ninfer_grid_launch_dependents();
    ninfer_grid_wait(); // PDL: routes and SwiGLU parts come from the previous kernels
    const int t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 2, q = lane & 3, K = p.top_k;
    const int64_t h0 = int64_t(blockIdx.x) * 16;
    for (int j = warp; j <= K; j += int(blockDim.x >> 5)) {
        const bool shared = j == K;
        const MoeRows& m = shared ? p.shared_down : p.down;
        const int64_t valid = shared ? p.shared_inter : p.inter;
        const int64_t row = (shared ? 0 : int64_t(p.ids[t * K + j]) * p.hidden) + h0 + r;
        const uint32_t* ap = p.act_parts + int64_t(t * (K + 1) + j) * p.act_groups * kXPartWords + q * 24 + r * 8;
        const __half* scales = reinterpret_cast<const __half*>(m.scales);
        const int G = int(m.groups);
        float acc[4] = {};
        for (int gb = 0; gb < G; gb += U) {
            uint2 w[U][2];
            float s[U][2];
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int h = 0; h < 2; ++h) { // rows r, r + 8
                    const bool in = gb + u < G;
                    w[u][h] = in ? load_stream8(m.data + (row + 8 * h) * m.row_bytes + (gb + u) * 32 + 8 * q) : make_uint2(0, 0);
                    s[u][h] = in ? __half2float(scales[(row + 8 * h) * G + gb + u]) : 0.f;
                }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int g = gb + u;
                if (g >= G) break;
                uint32_t a[4][4];
                q4_tile_a(w[u][0], w[u][1], a);
                uint4 b0 = make_uint4(0, 0, 0, 0), b1 = b0;
                if (r < 3 && int64_t(g) * 64 + 16 * q < valid) {
                    const uint4* src = reinterpret_cast<const uint4*>(ap + int64_t(g) * kXPartWords);
                    b0 = __ldg(src);
                    b1 = __ldg(src + 1);
                }
                const uint32_t b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
                float d[4] = {};
                q4_tile_mma(a, b, d);
                acc[0] = fmaf(d[0], s[u][0], acc[0]);
                acc[1] = fmaf(d[1], s[u][0], acc[1]);
                acc[2] = fmaf(d[2], s[u][1], acc[2]);
                acc[3] = fmaf(d[3], s[u][1], acc[3]);
            }
        }
        // Columns 0, 1 (hi, mid) sit in lane q = 0, column 2 (lo) in lane q = 1: (hi + mid) + lo.
        const float lo_r = __shfl_down_sync(0xffffffffu, acc[0], 1), lo_r8 = __shfl_down_sync(0xffffffffu, acc[2], 1);
        if (q == 0) {
            dots[j][r] = (acc[0] + acc[1]) + lo_r;
            dots[j][r + 8] = (acc[2] + acc[3]) + lo_r8;
        }
    }
    __syncthreads();
    if (threadIdx.x < 16) {
        const float* w = p.weights + t * (K + 1);
        float s = 0.f;
        for (int j = 0; j <= K; ++j) s = fmaf(w[j], dots[j][threadIdx.x], s);
        p.out[int64_t(t) * p.out_stride + h0 + threadIdx.x] = s;
    }
}

template <int NT, bool Cluster> cudaError_t launch_first(const MoeParams& p, size_t smem, cudaStream_t stream) {
    auto* kernel = moe_route_shared_v4_kernel<NT, Cluster>;
    // Without the opt-in a launch gets 48 KB of static + dynamic shared memory, and the static part
    // is not small (the cluster kernel: ~21 KB of router buffers): raise the dynamic limit to what
    // this call needs, once per larger size (hidden 2560+ with the cluster, 4096 without, fail else).
    static std::atomic<size_t> opted{0}; // per kernel instantiation
    if (smem > opted.load(std::memory_order_relaxed)) {
        const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        if (err != cudaSuccess) return err;
        opted.store(smem, std::memory_order_relaxed);
    }
    const unsigned blocks = unsigned(p.route_blocks + p.shared_blocks);
    if constexpr (Cluster) {
        const unsigned c = kMoeClusterBlocks, grid = (blocks + c - 1) / c * c;
        return launch_pdl_cluster(kernel, dim3(grid), dim3(kRouteWarps * 32), smem, stream, c, p);
    } else {
        return launch_pdl(kernel, dim3(blocks), dim3(kRouteWarps * 32), smem, stream, p);
    }
}

} // namespace

void moe_v4_plan(MoeParams& p, bool cluster) {
    p.mma = true;
    p.shared_tokens = p.n_tokens == 1 ? 1 : kSharedTokensPerBlock;
    p.shared_blocks = int(p.shared_inter / kGateUpRowsPerBlock) * ((p.n_tokens + p.shared_tokens - 1) / p.shared_tokens);
    p.route_blocks = cluster ? kMoeClusterBlocks : (p.n_experts + kRouteRows - 1) / kRouteRows + 1;
}

cudaError_t moe_v4_first_launch(const MoeParams& p, bool cluster, cudaStream_t stream) {
    const size_t smem = size_t(p.shared_tokens) * size_t(p.gate_up.groups) * kXPartWords * 4;
    if (p.n_tokens == 1) return cluster ? launch_first<1, true>(p, smem, stream) : launch_first<1, false>(p, smem, stream);
    return cluster ? launch_first<kMoeDecodeMaxTokens, true>(p, smem, stream)
                   : launch_first<kMoeDecodeMaxTokens, false>(p, smem, stream);
}

cudaError_t moe_v4_down_launch(const MoeParams& p, cudaStream_t stream) {
    const dim3 grid(unsigned(p.hidden / 16), unsigned(p.n_tokens)), block(unsigned(std::min(p.top_k + 1, kDownMaxWarps)) * 32);
    return launch_pdl(moe_down_mma_kernel, grid, block, 0, stream, p);
}

} // namespace ninfer::kernels::detail
