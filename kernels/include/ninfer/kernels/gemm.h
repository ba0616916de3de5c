// ninfer::kernels - prefill linear layers on the tensor cores: C = A · Bᵀ in bf16, fp32 accumulate.
//
// Contract:
// - A is [m, k] row-major bf16 (activations, row stride lda elements), B is [n, k] row-major bf16
//   (weights as the model stores them, row stride ldb), C is [m, n] row-major (row stride ldc):
//   C[i][j] = sum_k A[i][k] * B[j][k], products exact, sums in fp32 (order unspecified). With
//   c_fp32 C holds the fp32 sum, else bf16(sum) (round to nearest even).
// - Requirements (else cudaErrorInvalidValue, nothing launched): m, n >= 1, k >= 8, k % 8 == 0;
//   a, b, c 16-byte aligned; lda, ldb, ldc multiples of 8 elements, lda >= k, ldb >= k, ldc >= n;
//   C does not overlap A or B. Any m (1..8192 and beyond), n and k otherwise: ragged tiles are
//   handled by the copy engine's zero fill (reads) and predicated stores (writes).
// - Epilogue (gemm_bf16 only; all off by default, and then the kernel is the plain one): with any of
//   bias, act or accumulate set, each sum becomes v = sum + (bias ? bias[j] : 0.0f) (the + 0.0f is
//   done too, so a -0 sum leaves as +0 as the element-wise kernels give), then act(v):
//   GemmAct::GeluTanh = gelu_pytorch_tanh, 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))),
//   GemmAct::GeluErf = exact GELU, 0.5 v (1 + erf(v / sqrt 2)), in the same f32 code as
//   vision_bias_act (vision.h; kernels/src/activation.cuh holds both). C receives act(v) (fp32), or
//   bf16(act(v)) (round to nearest even); with accumulate (fp32 C only, act None) C[i][j] =
//   C[i][j] + v, each element read and rewritten by the thread that stores it, so C must hold
//   the values to add to. Since the sums are those of the plain call (same tile choice for the
//   same m and n, same k order), the results are bit-equal to the plain fp32 GEMM followed by
//   vision_bias_act(C, bias, act[, out]) or vision_residual(x = C, y = GEMM, bias). bias is a
//   device f32 array of n values, 16-byte aligned. Refused (cudaErrorInvalidValue): accumulate
//   with bf16 C or with an act; any epilogue field in gemm_bf16_grouped. Columns [n, ldc) are
//   never read nor written.
// - gemm_bf16_grouped: the MoE variant. Rows of A are sorted by group (expert): group g owns rows
//   [group_offsets[g], group_offsets[g+1]) of A and of C and multiplies them by
//   B_g = b + g * b_group_stride ([n, k], row stride ldb). group_offsets is a device int32 array of
//   n_groups + 1 non-decreasing entries with group_offsets[0] >= 0 and group_offsets[n_groups] <= m
//   (m = rows allocated for A and C); it is read on the device only, so the call is graph-safe.
//   max_group_rows is a host upper bound of every group's row count: it only sizes the grid (a
//   low bound costs speed, never rows), and 0 means every group is empty (nothing is launched).
//   Empty groups are allowed; rows outside every group are not written. The CTAs walk only the
//   tiles that exist, so skewed routing does not idle them. Extra requirements: n_groups >= 1,
//   b_group_stride % 8 == 0, b_group_stride >= n * ldb.
// - Implementation (sm_90a): persistent warp-specialised kernel, one producer warp issuing
//   cp.async.bulk.tensor (128-byte swizzle) into a multi-stage shared-memory ring guarded by
//   mbarriers, two consumer warpgroups issuing wgmma 64xNx16 (tile 128 x 256 or 128 x 128 x 64)
//   and storing C through shared memory as 16-byte vectors. The epilogue is a template argument of
//   the kernel (bias, bias + GELU tanh, bias + GELU erf, accumulate): a plain call runs the
//   kernel without it. The bias is added to the fragments as they are staged; the GELU variants
//   stage the biased sums in fp32 and apply the activation to the staged vectors (then bf16
//   rounding, 8-byte stores); accumulate adds at the 16-byte store, its C tile prefetched to L2.
//   Tensor maps are encoded on the host per call through cuTensorMapEncodeTiled, reached with
//   cudaGetDriverEntryPointByVersion (no link dependency on libcuda). Graph capture works: the
//   maps are kernel parameters, so a replay uses the pointers of the captured call.
// - Weight formats other than bf16 are expanded first with dequant_bf16 (dequant.h, included).
// Thread safety: stateless apart from the once-resolved driver entry point; any thread, any stream.
#pragma once

#include "ninfer/kernels/dequant.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

// The activation of the GEMM epilogue (the same forms as vision.h's VisionAct).
enum class GemmAct : uint8_t { None, GeluTanh, GeluErf };

struct GemmArgs {
    const __nv_bfloat16* a = nullptr; // [m, k] row-major activations
    int64_t lda = 0;
    const __nv_bfloat16* b = nullptr; // [n, k] row-major weights
    int64_t ldb = 0;
    void* c = nullptr; // [m, n] row-major: bf16, or fp32 when c_fp32
    int64_t ldc = 0;
    bool c_fp32 = false;
    int m = 0, n = 0, k = 0;
    // Epilogue (see the contract; gemm_bf16 only):
    const float* bias = nullptr;  // [n] f32 per output column, added to the fp32 sum
    GemmAct act = GemmAct::None;  // applied after the bias, before the bf16 rounding
    bool accumulate = false;      // fp32 C only: C += sum + bias
};

struct GroupedGemmArgs : GemmArgs {
    const int32_t* group_offsets = nullptr; // device, n_groups + 1 entries
    int n_groups = 0;
    int64_t b_group_stride = 0; // elements between B_g and B_{g+1}
    int max_group_rows = 0;     // host upper bound of any group's rows
};

cudaError_t gemm_bf16(const GemmArgs& args, cudaStream_t stream);
cudaError_t gemm_bf16_grouped(const GroupedGemmArgs& args, cudaStream_t stream);

// Test and bench hook: force the tile width (128 or 256 columns of C per tile); 0 restores the
// heuristic (256 unless the 128-wide tiling fills the machine's waves better).
void gemm_force_tile_n(int tile_n);
// The tile width gemm_bf16 would use for this shape (exposed for tests and the bench).
int gemm_tile_n(int m, int n);

} // namespace ninfer::kernels
