// ninfer::kernels - MoE decode v4 (moe_decode.h, MoeDecodePath::V4 / V4Cluster): the router as one
// thread-block cluster that routes without global logits, and the host entry points of
// moe_decode_v4.cu.
//
// Cluster routing: router rows are grouped in quads (4 rows, the last quad = the score row), quad Q
// belongs to cluster block Q mod kMoeClusterBlocks. A quad's dot is computed exactly as
// route_block computes it: "virtual warp" v (of kRouteWarps) sums chunks 32 v + lane, + 256, ...
// with rows_dot, a warp butterfly, then the virtual warps are added in order (empty ones hold +0,
// which leaves a sum that started at +0 unchanged, so they are skipped). Only the virtual warps that
// hold chunks become work items, spread over the block's warps: a q4 router of hidden 2048 (64
// chunks a row) has 2 busy virtual warps per quad, so one quad per block (65 blocks) becomes ~8
// quads over 8 warps (one cluster). The logits then equal V3's bit for bit, and each block stores
// them straight into block 0's shared memory (st.shared::cluster) between two cluster barriers;
// block 0 routes from there (no logit stores to global, no fence, no counter atomic).
#pragma once

#include "moe_decode_mma.cuh"

namespace ninfer::kernels::detail {

constexpr int kMoeClusterBlocks = 8;        // portable cluster size
constexpr int kMoeClusterMaxExperts = 256;  // block 0's logit buffer (more experts: V4 without cluster)
constexpr int kClusterMaxQuads = (kMoeClusterMaxExperts / kRouteRows + 1 + kMoeClusterBlocks - 1) / kMoeClusterBlocks;
constexpr int kSharedTokensPerBlock = 2;    // v4 shared gate/up: tokens per block at n_tokens > 1
constexpr int kDownGroupsPerRound = 8;      // v4 down: q4 groups loaded before the first mma (I = 512: all)

__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

// *local's counterpart in cluster block 0's shared memory = v.
__device__ __forceinline__ void store_block0(float* local, float v) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(remote) : "r"(uint32_t(__cvta_generic_to_shared(local))));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

// Router blocks of the first launch, before the PDL wait: their router (score) rows towards L2.
__device__ __forceinline__ void prefetch_router_rows(const MoeParams& p, bool cluster) {
    const int quads = (p.n_experts + kRouteRows - 1) / kRouteRows + 1; // the last: the score row
    for (int qd = int(blockIdx.x); qd < quads; qd += cluster ? kMoeClusterBlocks : quads) {
        const bool score = qd == quads - 1;
        const MoeRows& m = score ? p.score : p.router;
        const int n_rows = score ? 1 : p.n_experts, row0 = score ? 0 : qd * kRouteRows;
        for (int j = 0; j < kRouteRows; ++j)
            for (int64_t at = threadIdx.x * 128; at < m.row_bytes; at += blockDim.x * 128)
                prefetch_l2(m.data + min(row0 + j, n_rows - 1) * m.row_bytes + at);
    }
}

// Cluster block blockIdx.x (< kMoeClusterBlocks): its quads' logits for every token into block 0,
// which then routes and writes the work list. The caller did cluster_arrive_relaxed() at the start.
template <int NT> __device__ void cluster_route_block(const MoeParams& p) {
    __shared__ float all[NT][kMoeClusterMaxExperts + 1]; // block 0: token t's logits, then its score
    __shared__ float part[kClusterMaxQuads][kRouteWarps][NT][kRouteRows];
    __shared__ int32_t chosen[kMoeDecodeMaxTokens][kMoeMaxTopK];
    __shared__ uint32_t tok_mask[kMoeClusterMaxExperts];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, E = p.n_experts, rank = blockIdx.x;
    const int quads = (E + kRouteRows - 1) / kRouteRows + 1, mine = (quads - rank + kMoeClusterBlocks - 1) / kMoeClusterBlocks;
    auto busy = [](const MoeRows& m) { return int(min(int64_t(kRouteWarps), (m.chunks + 31) / 32)); };
    const int vr = busy(p.router), vs = busy(p.score);
    const bool has_score = (quads - 1) % kMoeClusterBlocks == rank; // the score quad is this block's last
    const int items = (mine - has_score) * vr + (has_score ? vs : 0);
    const float* xs[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) xs[t] = p.x + int64_t(min(t, p.n_tokens - 1)) * p.x_stride;
    for (int it = warp; it < items; it += kRouteWarps) {
        const int ql = it < (mine - has_score) * vr ? it / vr : mine - 1, v = ql < mine - has_score ? it % vr : it - ql * vr;
        const int qd = rank + ql * kMoeClusterBlocks;
        const bool score = qd == quads - 1;
        const MoeRows& m = score ? p.score : p.router;
        const int n_rows = score ? 1 : E, row0 = score ? 0 : qd * kRouteRows;
        int64_t rows[kRouteRows];
#pragma unroll
        for (int j = 0; j < kRouteRows; ++j) rows[j] = min(row0 + j, n_rows - 1);
        float acc[NT][kRouteRows] = {};
        route_dots<NT>(m, rows, xs, p.n_tokens, v * 32 + lane, acc); // as thread 32 v + lane of route_block
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t >= p.n_tokens) break;
#pragma unroll
            for (int j = 0; j < kRouteRows; ++j) {
                const float s = warp_sum(acc[t][j]);
                if (lane == 0) part[ql][v][t][j] = s;
            }
        }
    }
    if (rank == 0) clear_choices(p, tok_mask);
    __syncthreads();
    cluster_wait_acquire(); // every block has started: block 0's shared memory may be written
    for (int it = threadIdx.x; it < mine * p.n_tokens * kRouteRows; it += blockDim.x) {
        const int j = it % kRouteRows, t = (it / kRouteRows) % p.n_tokens, ql = it / (kRouteRows * p.n_tokens);
        const int qd = rank + ql * kMoeClusterBlocks;
        const bool score = qd == quads - 1;
        const MoeRows& m = score ? p.score : p.router;
        const int n_rows = score ? 1 : E, row0 = score ? 0 : qd * kRouteRows;
        if (row0 + j >= n_rows) continue;
        float s = 0.f;
        for (int w = 0; w < (score ? vs : vr); ++w) s += part[ql][w][t][j];
        store_block0(&all[t][score ? E : row0 + j], s * fp8_row_scale(m, row0 + j));
    }
    cluster_arrive_release(); // block 0's logits are complete once every block has arrived
    if (rank != 0) return;
    cluster_wait_acquire();
    route_tokens<false>(p, chosen, tok_mask, &all[0][0], kMoeClusterMaxExperts + 1);
    __syncthreads();
    plan_work(p, chosen, tok_mask);
}

// Host side (moe_decode_v4.cu). moe_v4_plan sets the v4 fields of p (after moe_decode filled the
// rest); the launches replace the first and third V3 launches.
void moe_v4_plan(MoeParams& p, bool cluster);
cudaError_t moe_v4_first_launch(const MoeParams& p, bool cluster, cudaStream_t stream);
cudaError_t moe_v4_down_launch(const MoeParams& p, cudaStream_t stream);

} // namespace ninfer::kernels::detail
