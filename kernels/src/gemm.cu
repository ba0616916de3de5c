// ninfer::kernels - prefill GEMM launcher: argument checks, tensor maps, tile choice, launch.
#include "gemm_kernel.cuh"
#include "ninfer/kernels/device.h"
#include "ninfer/kernels/gemm.h"

#include <cudaTypedefs.h>

#include <algorithm>

namespace ninfer::kernels {

namespace {

using detail::GemmEpi;
using detail::GemmParams;
using detail::GemmTile;

int g_forced_tile_n = 0;

// The encoder lives in the driver (libcuda); reaching it through the runtime keeps our binaries
// free of a link dependency on it, so they still start (and fall back) on machines without one.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            p = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }();
    return fn;
}

// bf16 matrix [outer][rows][cols] (rank 2: outer ignored), row stride ld elements, outer
// stride outer_stride elements; box = 64 columns x box_rows rows, 128-byte swizzle, zero fill.
bool encode_map(CUtensorMap* map, const void* base, int rank, int64_t cols, int64_t rows, int64_t ld, int64_t outer,
                int64_t outer_stride, int box_rows) {
    const auto encode = tensor_map_encoder();
    if (!encode) return false;
    const cuuint64_t dims[3] = {cuuint64_t(cols), cuuint64_t(rows), cuuint64_t(outer)};
    const cuuint64_t strides[2] = {cuuint64_t(ld) * 2, cuuint64_t(outer_stride) * 2};
    const cuuint32_t box[3] = {cuuint32_t(detail::kGemmTileK), cuuint32_t(box_rows), 1};
    const cuuint32_t elem_strides[3] = {1, 1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, cuuint32_t(rank), const_cast<void*>(base), dims, strides,
                  box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

bool valid_args(const GemmArgs& a) {
    return a.m >= 1 && a.n >= 1 && a.k >= 8 && a.k % 8 == 0 && a.a && a.b && a.c && aligned16(a.a) &&
           aligned16(a.b) && aligned16(a.c) && a.lda % 8 == 0 && a.ldb % 8 == 0 && a.ldc % 8 == 0 && a.lda >= a.k &&
           a.ldb >= a.k && a.ldc >= a.n;
}

bool has_epilogue(const GemmArgs& a) { return a.bias || a.act != GemmAct::None || a.accumulate; }

// The epilogue's own requirements (gemm.h): accumulate is fp32 C without an activation.
bool valid_epilogue(const GemmArgs& a) {
    if (a.bias && !aligned16(a.bias)) return false;
    if (a.act != GemmAct::None && a.act != GemmAct::GeluTanh && a.act != GemmAct::GeluErf) return false;
    return !a.accumulate || (a.c_fp32 && a.act == GemmAct::None);
}

GemmEpi epilogue_of(const GemmArgs& a) {
    if (a.accumulate) return GemmEpi::Accumulate;
    if (a.act == GemmAct::GeluTanh) return GemmEpi::BiasGeluTanh;
    if (a.act == GemmAct::GeluErf) return GemmEpi::BiasGeluErf;
    return a.bias ? GemmEpi::Bias : GemmEpi::Plain;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int n_sms() { return sm_count() > 0 ? sm_count() : 132; }

template <int BN, bool GROUPED, GemmEpi EPI>
cudaError_t launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const GemmParams& p, cudaStream_t stream) {
    static const cudaError_t attr = cudaFuncSetAttribute(detail::gemm_bf16_kernel<BN, GROUPED, EPI>,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                         GemmTile<BN>::kSmemBytes);
    if (attr != cudaSuccess) return attr;
    const int64_t grid = std::min<int64_t>(p.n_tiles, n_sms());
    detail::gemm_bf16_kernel<BN, GROUPED, EPI>
        <<<unsigned(grid), detail::kGemmThreads, GemmTile<BN>::kSmemBytes, stream>>>(map_a, map_b, p);
    return cudaGetLastError();
}

template <bool GROUPED, GemmEpi EPI>
cudaError_t launch_tile(int tile_n, const CUtensorMap& map_a, const CUtensorMap& map_b, const GemmParams& p,
                        cudaStream_t stream) {
    return tile_n == 256 ? launch<256, GROUPED, EPI>(map_a, map_b, p, stream)
                         : launch<128, GROUPED, EPI>(map_a, map_b, p, stream);
}

template <bool GROUPED>
cudaError_t run(const GemmArgs& a, int tile_n, int tiles_m, int64_t n_groups, int64_t b_group_stride,
                const int32_t* group_offsets, cudaStream_t stream) {
    CUtensorMap map_a, map_b;
    if (!encode_map(&map_a, a.a, 2, a.k, a.m, a.lda, 1, 0, detail::kGemmTileM) ||
        !encode_map(&map_b, a.b, GROUPED ? 3 : 2, a.k, a.n, a.ldb, n_groups, b_group_stride, tile_n))
        return cudaErrorInvalidValue;
    GemmParams p{};
    p.c = a.c;
    p.ldc = a.ldc;
    p.c_fp32 = a.c_fp32;
    p.m = a.m;
    p.n = a.n;
    p.k = a.k;
    p.tiles_m = tiles_m;
    p.tiles_n = int(ceil_div(a.n, tile_n));
    // Grouped: an upper bound of the tiles that exist (each group rounds up at most one m-tile);
    // it only sizes the grid, the kernel walks the real ones (gemm_next_tile).
    p.n_tiles = GROUPED ? std::min<int64_t>(n_groups * p.tiles_m, ceil_div(a.m, detail::kGemmTileM) + n_groups) * p.tiles_n
                        : int64_t(p.tiles_m) * p.tiles_n;
    p.n_groups = int(n_groups);
    p.group_offsets = group_offsets;
    p.bias = a.bias;
    if constexpr (GROUPED) {
        return launch_tile<true, GemmEpi::Plain>(tile_n, map_a, map_b, p, stream);
    } else {
        using E = GemmEpi;
        switch (epilogue_of(a)) {
        case E::Plain: return launch_tile<false, E::Plain>(tile_n, map_a, map_b, p, stream);
        case E::Bias: return launch_tile<false, E::Bias>(tile_n, map_a, map_b, p, stream);
        case E::BiasGeluTanh: return launch_tile<false, E::BiasGeluTanh>(tile_n, map_a, map_b, p, stream);
        case E::BiasGeluErf: return launch_tile<false, E::BiasGeluErf>(tile_n, map_a, map_b, p, stream);
        case E::Accumulate: return launch_tile<false, E::Accumulate>(tile_n, map_a, map_b, p, stream);
        }
        return cudaErrorInvalidValue;
    }
}

} // namespace

void gemm_force_tile_n(int tile_n) { g_forced_tile_n = tile_n == 128 || tile_n == 256 ? tile_n : 0; }

int gemm_tile_n(int m, int n) {
    if (g_forced_tile_n) return g_forced_tile_n;
    // A 128-wide tile does about half the work of a 256-wide one at ~10% lower efficiency (B is
    // re-read per 128 rows of A, twice the barrier traffic): take it when its waves come out
    // shorter, i.e. when the 256-wide tiling leaves much of its last wave idle.
    const int64_t tiles_m = ceil_div(m, detail::kGemmTileM), sms = n_sms();
    const double waves256 = double(ceil_div(tiles_m * ceil_div(n, 256), sms)) * 2.0;
    const double waves128 = double(ceil_div(tiles_m * ceil_div(n, 128), sms)) * 1.1;
    return waves128 < waves256 ? 128 : 256;
}

cudaError_t gemm_bf16(const GemmArgs& a, cudaStream_t stream) {
    if (!valid_args(a) || !valid_epilogue(a)) return cudaErrorInvalidValue;
    const int tile_n = gemm_tile_n(a.m, a.n);
    return run<false>(a, tile_n, int(ceil_div(a.m, detail::kGemmTileM)), 1, 0, nullptr, stream);
}

cudaError_t gemm_bf16_grouped(const GroupedGemmArgs& a, cudaStream_t stream) {
    if (!valid_args(a) || has_epilogue(a) || !a.group_offsets || a.n_groups < 1 || a.max_group_rows < 0 || a.b_group_stride % 8 != 0 ||
        a.b_group_stride < int64_t(a.n) * a.ldb)
        return cudaErrorInvalidValue;
    if (a.max_group_rows == 0) return cudaSuccess; // every group is empty
    const int tiles_m = int(ceil_div(std::min(a.max_group_rows, a.m), detail::kGemmTileM));
    const int tile_n = gemm_tile_n(int(std::min<int64_t>(int64_t(a.max_group_rows) * a.n_groups, a.m)), a.n);
    return run<true>(a, tile_n, tiles_m, a.n_groups, a.b_group_stride, a.group_offsets, stream);
}

} // namespace ninfer::kernels
