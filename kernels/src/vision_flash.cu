// ninfer::kernels - the vision tower's attention as one flash kernel: bidirectional within each
// segment (a frame pair's patches), mma.sync bf16 tensor cores, f32 online softmax.
#include "common.cuh"
#include "flash_softmax.cuh"
#include "ninfer/kernels/vision.h"
#include "prefill_async.cuh"

#include <cmath>

namespace ninfer::kernels {

namespace detail {

constexpr int kFlashWarps = 4;
constexpr int kFlashThreads = kFlashWarps * 32;
constexpr int kFlashRows = kFlashWarps * 16; // query rows per block: 16 per warp
constexpr int kFlashKeys = 64;               // keys per tile (as many as query rows: one tile shape)

// HDP: the head size rounded up to 16 (the mma's k step); dimensions past head_dim are zero in
// shared memory, so they add nothing to q kᵀ and give zero output columns that are not stored.
template <int HDP> struct FlashShape {
    // Shared rows of HDP + 8 bf16: a stride of 4 (mod 8) 32-bit words puts the 8 rows one ldmatrix
    // reads in 8 distinct groups of 4 banks.
    static constexpr int kStride = HDP + 8;
    static constexpr int kChunks = HDP / 8; // 16-byte chunks of a row
    static constexpr size_t kTile = size_t(kFlashKeys) * kStride;
    // Q, then two stages of K and V.
    static constexpr size_t kSmemBytes = 5 * kTile * sizeof(__nv_bfloat16);
    // Four resident blocks (16 warps) an SM up to the real head's 80: registers held to 128 a thread
    // (no spills at 80); larger heads fit two blocks' shared memory anyway.
    static constexpr int kMinBlocks = HDP <= 80 ? 4 : 2;
};

// Rows first .. first + 63 of a segment's q, k or v (src: the segment's row 0 at this head's
// column) into a shared tile; rows at or past `valid_rows` and chunks at or past head_dim are zero.
template <int HDP>
__device__ __forceinline__ void load_flash_tile(__nv_bfloat16* dst, const __nv_bfloat16* src, int64_t ld, int first,
                                                int valid_rows, int head_dim, int tid) {
    using Shape = FlashShape<HDP>;
    for (int i = tid; i < kFlashKeys * Shape::kChunks; i += kFlashThreads) {
        const int row = i / Shape::kChunks, c = i % Shape::kChunks;
        const bool valid = first + row < valid_rows && c * 8 < head_dim;
        cp_async16_or_zero(dst + row * Shape::kStride + c * 8, src + (valid ? int64_t(first + row) * ld + c * 8 : 0),
                           valid);
    }
}

// grid (query tiles of the segment, heads, segments), kFlashThreads threads, kSmemBytes of dynamic
// shared memory. Warp w owns query rows w*16 .. w*16+15 of the tile; its output stays in registers.
template <int HDP>
__global__ void __launch_bounds__(kFlashThreads, FlashShape<HDP>::kMinBlocks)
    vision_flash_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t ld,
                        int segment, int head_dim, float scale_log2, __nv_bfloat16* out, int64_t ld_out) {
    using Shape = FlashShape<HDP>;
    constexpr int kStride = Shape::kStride;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* ks = qs + Shape::kTile; // [2][64][kStride]
    __nv_bfloat16* vs = ks + 2 * Shape::kTile;
    const int64_t first_row = int64_t(blockIdx.z) * segment, col = int64_t(blockIdx.y) * head_dim;
    const __nv_bfloat16 *qh = q + first_row * ld + col, *kh = k + first_row * ld + col, *vh = v + first_row * ld + col;
    const int m0 = int(blockIdx.x) * kFlashRows;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n_tiles = (segment + kFlashKeys - 1) / kFlashKeys;

    load_flash_tile<HDP>(qs, qh, ld, m0, segment, head_dim, tid);
    load_flash_tile<HDP>(ks, kh, ld, 0, segment, head_dim, tid);
    load_flash_tile<HDP>(vs, vh, ld, 0, segment, head_dim, tid);
    cp_async_commit();

    const int g = lane >> 2, quad = lane & 3;
    uint32_t qf[HDP / 16][4]; // this warp's 16 query rows as A fragments, loaded once
    float acc[HDP / 8][4] = {};
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

    for (int tile = 0; tile < n_tiles; ++tile) {
        if (tile + 1 < n_tiles) { // the next tile loads while this one computes
            const size_t st = size_t((tile + 1) & 1) * Shape::kTile;
            load_flash_tile<HDP>(ks + st, kh, ld, (tile + 1) * kFlashKeys, segment, head_dim, tid);
            load_flash_tile<HDP>(vs + st, vh, ld, (tile + 1) * kFlashKeys, segment, head_dim, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (tile == 0) {
#pragma unroll
            for (int kstep = 0; kstep < HDP / 16; ++kstep)
                ldmatrix_x4(qf[kstep], qs + (warp * 16 + (lane & 15)) * kStride + (kstep * 2 + (lane >> 4)) * 8);
        }
        const __nv_bfloat16* kt = ks + size_t(tile & 1) * Shape::kTile;
        const __nv_bfloat16* vt = vs + size_t(tile & 1) * Shape::kTile;
        float s[8][4] = {};
#pragma unroll
        for (int kstep = 0; kstep < HDP / 16; ++kstep) {
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                uint32_t kf[4];
                ldmatrix_x4(kf, kt + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * kStride +
                                    (kstep * 2 + ((lane >> 3) & 1)) * 8);
                mma_bf16_16816(s[2 * np], qf[kstep][0], qf[kstep][1], qf[kstep][2], qf[kstep][3], kf[0], kf[1]);
                mma_bf16_16816(s[2 * np + 1], qf[kstep][0], qf[kstep][1], qf[kstep][2], qf[kstep][3], kf[2], kf[3]);
            }
        }
        if ((tile + 1) * kFlashKeys > segment) { // the last tile reaches past the segment
#pragma unroll
            for (int nt = 0; nt < 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (tile * kFlashKeys + nt * 8 + 2 * quad + (e & 1) >= segment) s[nt][e] = -INFINITY;
        }
        // Tile 0 holds key 0 of the segment, which every row sees: the maxima are finite.
        uint32_t pf[8][2];
        flash_rescale(acc, flash_softmax_tile(s, row_max, row_sum, scale_log2, pf));
        static_assert(kFlashKeys == 64, "flash_pv_tile takes 64-key tiles");
        flash_pv_tile(acc, pf, [&](int kstep, int dp, uint32_t(&vf)[4]) {
            ldmatrix_x4_trans(vf, vt + (kstep * 16 + (lane & 15)) * kStride + (dp * 2 + (lane >> 4)) * 8);
        });
        __syncthreads(); // the next iteration refills this stage
    }

    flash_total_sums(row_sum);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int t = m0 + warp * 16 + g + 8 * r;
        if (t >= segment) continue;
        const float inv = 1.f / row_sum[r];
        __nv_bfloat16* dst = out + (first_row + t) * ld_out + col;
#pragma unroll
        for (int dt = 0; dt < HDP / 8; ++dt) {
            const int d = dt * 8 + 2 * quad;
            if (d < head_dim) // head_dim is a multiple of 8: d + 1 is inside too
                *reinterpret_cast<__nv_bfloat162*>(dst + d) =
                    __floats2bfloat162_rn(acc[dt][2 * r] * inv, acc[dt][2 * r + 1] * inv);
        }
    }
}

template <int HDP>
cudaError_t launch_vision_flash(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t ld,
                                int rows, int segment, int heads, int head_dim, __nv_bfloat16* out, int64_t ld_out,
                                cudaStream_t stream) {
    using Shape = FlashShape<HDP>;
    // Past the 48 KiB default from HDP 80 on; setting it is a cheap host call, made on every launch
    // so no static state needs guarding.
    cudaError_t err = cudaFuncSetAttribute(vision_flash_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(Shape::kSmemBytes));
    if (err != cudaSuccess) return err;
    const dim3 grid(unsigned((segment + kFlashRows - 1) / kFlashRows), unsigned(heads), unsigned(rows / segment));
    const float scale_log2 = 1.4426950408889634f / std::sqrt(float(head_dim)); // log2(e) / sqrt(head_dim)
    vision_flash_kernel<HDP><<<grid, kFlashThreads, Shape::kSmemBytes, stream>>>(q, k, v, ld, segment, head_dim,
                                                                                 scale_log2, out, ld_out);
    return cudaGetLastError();
}

} // namespace detail

bool vision_flash_supported(int head_dim) { return head_dim >= 8 && head_dim <= 128 && head_dim % 8 == 0; }

cudaError_t vision_flash_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t ld,
                                   int rows, int segment, int heads, int head_dim, __nv_bfloat16* out, int64_t ld_out,
                                   cudaStream_t stream) {
    const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (!q || !k || !v || !out || !aligned(q) || !aligned(k) || !aligned(v) || rows < 1 || segment < 1 ||
        rows % segment || rows / segment > 65535 || heads < 1 || heads > 65535 || !vision_flash_supported(head_dim) ||
        ld % 8 || ld < int64_t(heads) * head_dim || ld_out < int64_t(heads) * head_dim || ld_out % 2 ||
        reinterpret_cast<uintptr_t>(out) % 4)
        return cudaErrorInvalidValue;
    switch ((head_dim + 15) / 16) {
    case 1: return detail::launch_vision_flash<16>(q, k, v, ld, rows, segment, heads, head_dim, out, ld_out, stream);
    case 2: return detail::launch_vision_flash<32>(q, k, v, ld, rows, segment, heads, head_dim, out, ld_out, stream);
    case 3: return detail::launch_vision_flash<48>(q, k, v, ld, rows, segment, heads, head_dim, out, ld_out, stream);
    case 4: return detail::launch_vision_flash<64>(q, k, v, ld, rows, segment, heads, head_dim, out, ld_out, stream);
    case 5: return detail::launch_vision_flash<80>(q, k, v, ld, rows, segment, heads, head_dim, out, ld_out, stream);
    case 6: return detail::launch_vision_flash<96>(q, k, v, ld, rows, segment, heads, head_dim, out, ld_out, stream);
    case 7: return detail::launch_vision_flash<112>(q, k, v, ld, rows, segment, heads, head_dim, out, ld_out, stream);
    default: return detail::launch_vision_flash<128>(q, k, v, ld, rows, segment, heads, head_dim, out, ld_out, stream);
    }
}

} // namespace ninfer::kernels
