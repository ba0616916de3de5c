// ninfer::kernels - the online-softmax step shared by the flash attention kernels (attention_prefill.cu,
// vision_flash.cu): one warp's 16 x 64 score tile, held as 8 mma.sync m16n8 accumulators.
//
// Contract: flash_softmax_tile(s, row_max, row_sum, scale_log2, pf) takes the tile's unscaled
// scores (masked entries already -INFINITY; every row must have seen a finite score in this or an
// earlier tile), raises each of the thread's two rows' running maximum (rows g and g + 8 of the
// warp's 16, reduced over the quad that shares them), rescales the running sums, adds this tile's
// exp2((s - max) * scale_log2) to them and returns them as bf16 pairs in the A-fragment order of
// P V (pf[nt]: columns 8 nt .. 8 nt + 7). It returns per row the factor the caller's output
// accumulators must be multiplied by (exactly 1 where the maximum did not change).
// flash_rescale(acc, corr) does that multiplication, skipped when no row of the warp changed.
// flash_total_sums(row_sum), after the last tile: each row's sum over the quad's four threads.
// flash_pv_tile(acc, pf, v_fragment) adds P V over the tile's 64 keys to the output accumulators:
// v_fragment(kstep, dp) returns the ldmatrix.trans fragment of keys 16 kstep .. 16 kstep + 15 and
// output columns 16 dp .. 16 dp + 15 (two 8-column tiles).
#pragma once

#include "common.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace ninfer::kernels::detail {

struct FlashCorrection {
    float row[2];
};

__device__ __forceinline__ FlashCorrection flash_softmax_tile(float (&s)[8][4], float (&row_max)[2],
                                                              float (&row_sum)[2], float scale_log2,
                                                              uint32_t (&pf)[8][2]) {
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[nt][e]);
    FlashCorrection corr;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        const float m_new = fmaxf(row_max[r], tile_max[r]); // finite: see the contract
        corr.row[r] = exp2f((row_max[r] - m_new) * scale_log2);
        row_max[r] = m_new;
        row_sum[r] *= corr.row[r];
    }
    // Scores stay unscaled (max commutes with the positive scale): one FMA per exponent.
    const float neg_max[2] = {-row_max[0] * scale_log2, -row_max[1] * scale_log2};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
        const float p0 = exp2f(fmaf(s[nt][0], scale_log2, neg_max[0]));
        const float p1 = exp2f(fmaf(s[nt][1], scale_log2, neg_max[0]));
        const float p2 = exp2f(fmaf(s[nt][2], scale_log2, neg_max[1]));
        const float p3 = exp2f(fmaf(s[nt][3], scale_log2, neg_max[1]));
        row_sum[0] += p0 + p1;
        row_sum[1] += p2 + p3;
        const __nv_bfloat162 lo = __floats2bfloat162_rn(p0, p1), hi = __floats2bfloat162_rn(p2, p3);
        pf[nt][0] = *reinterpret_cast<const uint32_t*>(&lo);
        pf[nt][1] = *reinterpret_cast<const uint32_t*>(&hi);
    }
    return corr;
}

// Rescaling O costs 4 multiplies per output tile and thread, a large share of a tile's issue
// slots next to its mma: skipped when no row of the warp raised its maximum (corr == 1 exactly).
template <int TILES>
__device__ __forceinline__ void flash_rescale(float (&acc)[TILES][4], const FlashCorrection& corr) {
    if (!__any_sync(0xffffffffu, corr.row[0] != 1.f || corr.row[1] != 1.f)) return;
#pragma unroll
    for (int dt = 0; dt < TILES; ++dt) {
        acc[dt][0] *= corr.row[0];
        acc[dt][1] *= corr.row[0];
        acc[dt][2] *= corr.row[1];
        acc[dt][3] *= corr.row[1];
    }
}

__device__ __forceinline__ void flash_total_sums(float (&row_sum)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
        row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    }
}

template <int TILES, class VFragment>
__device__ __forceinline__ void flash_pv_tile(float (&acc)[TILES][4], const uint32_t (&pf)[8][2],
                                              VFragment&& v_fragment) {
#pragma unroll
    for (int kstep = 0; kstep < 4; ++kstep) {
#pragma unroll
        for (int dp = 0; dp < TILES / 2; ++dp) {
            uint32_t vf[4];
            v_fragment(kstep, dp, vf);
            mma_bf16_16816(acc[2 * dp], pf[2 * kstep][0], pf[2 * kstep][1], pf[2 * kstep + 1][0],
                           pf[2 * kstep + 1][1], vf[0], vf[1]);
            mma_bf16_16816(acc[2 * dp + 1], pf[2 * kstep][0], pf[2 * kstep][1], pf[2 * kstep + 1][0],
                           pf[2 * kstep + 1][1], vf[2], vf[3]);
        }
    }
}

} // namespace ninfer::kernels::detail
