// ninfer::kernels - host side of the pipelined tiled GEMV: shared-memory attributes, occupancy, launch.
#include "gemv_launch.cuh"
#include "gemv_pipe.cuh"

namespace ninfer::kernels::detail {

namespace {

// gemv_set_tiled_pipeline's shared-memory carveout, percent (-1: left as it is, the driver's
// choice unless the hook set one before); once the bench has used the hook, attributes and
// occupancy are set and asked again on every call.
int g_carveout = -1;
bool g_hooked = false;

template <WeightFormat F, int S, bool XS> constexpr size_t smem_limit() {
    return gemv_pipe_smem_bytes(F, S) + (XS ? size_t(kXStageMaxBytes) : 0);
}

// The kernel may use more than the default 48 KB of dynamic shared memory; the carveout (when
// set) trades shared memory, and so resident blocks, for L1, which holds x unless it is staged.
template <WeightFormat F, int P, int S, bool XS, bool A8 = false, bool A8G = false, bool C = false> cudaError_t prepare() {
    auto* kernel = gemv_tiled_pipe_kernel<F, P, S, XS, A8, A8G, C>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_limit<F, S, XS>()));
    if (e == cudaSuccess && g_carveout >= 0)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, g_carveout);
    return e;
}

// The split count follows the one-pass kernel without staged x (it must not depend on n_tokens).
template <WeightFormat F, int S> int query_resident_blocks() {
    int b = 0;
    if (prepare<F, 1, S, false>() != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, gemv_tiled_pipe_kernel<F, 1, S, false>, kGemvWarps * 32,
                                                      gemv_pipe_smem_bytes(F, S)) != cudaSuccess ||
        b < 1)
        b = 2;
    return b;
}
// Cached (thread-safe static) unless the bench's hook was used.
template <WeightFormat F, int S> int resident_blocks() {
    if (g_hooked) return query_resident_blocks<F, S>();
    static const int blocks = query_resident_blocks<F, S>();
    return blocks;
}

template <WeightFormat F> int resident_blocks_of(int stages) {
    switch (stages) {
    case 2: return resident_blocks<F, 2>();
    case 3: return resident_blocks<F, 3>();
    default: return resident_blocks<F, 4>();
    }
}

template <WeightFormat F, int P, int S, bool XS, bool A8 = false, bool A8G = false, bool C = false>
cudaError_t launch_kernel(const GemvParams& p, dim3 grid, size_t smem, cudaStream_t stream) {
    // Attributes are set once per kernel (thread-safe static), again for each launch under the
    // bench's carveout hook. cudaFuncSetAttribute is not a stream operation: safe during capture.
    static const cudaError_t once = prepare<F, P, S, XS, A8, A8G, C>();
    const cudaError_t e = g_hooked ? prepare<F, P, S, XS, A8, A8G, C>() : once;
    if (e != cudaSuccess) return e;
    // C: launch_int8 takes this instance only once gemv_cluster_wanted said the cluster path runs.
    return launch_gemv_as(gemv_tiled_pipe_kernel<F, P, S, XS, A8, A8G, C>, grid, dim3(kGemvWarps * 32), smem, stream,
                          p, C);
}

template <WeightFormat F, int S>
cudaError_t launch_stages(bool stage_x, bool two_pass, const GemvParams& p, dim3 grid, cudaStream_t stream) {
    const size_t ring = gemv_pipe_smem_bytes(F, S);
    if (two_pass) return launch_kernel<F, 2, S, false>(p, grid, ring, stream);
    if constexpr (F != WeightFormat::Bf16) {
        const int64_t x_bytes = xstage_bytes(p.units_per_split, p.n_tokens, p.x_lo != nullptr);
        if (stage_x && x_bytes <= kXStageMaxBytes) return launch_kernel<F, 1, S, true>(p, grid, ring + x_bytes, stream);
    }
    return launch_kernel<F, 1, S, false>(p, grid, ring, stream);
}

template <WeightFormat F>
cudaError_t launch_format(int stages, bool stage_x, bool two_pass, const GemvParams& p, dim3 grid, cudaStream_t stream) {
    switch (stages) {
    case 2: return launch_stages<F, 2>(stage_x, two_pass, p, grid, stream);
    case 3: return launch_stages<F, 3>(stage_x, two_pass, p, grid, stream);
    case 4: return launch_stages<F, 4>(stage_x, two_pass, p, grid, stream);
    default: return cudaErrorInvalidValue;
    }
}

template <int S> cudaError_t launch_int8(const GemvParams& p, dim3 grid, cudaStream_t stream) {
    constexpr WeightFormat F = WeightFormat::Q4G64Fp16;
    if (p.x8.q) { // batch 2..8: the instance with the cluster reduction when it will run
        const size_t smem = gemv_pipe_smem_bytes(F, S);
        if (gemv_cluster_wanted(reinterpret_cast<const void*>(gemv_tiled_pipe_kernel<F, 1, S, true, true, true, true>),
                                grid, dim3(kGemvWarps * 32), smem, p))
            return launch_kernel<F, 1, S, true, true, true, true>(p, grid, smem, stream);
        return launch_kernel<F, 1, S, true, true, true>(p, grid, smem, stream);
    }
    const size_t smem = gemv_pipe_smem_bytes(F, S) + size_t(x8_stage_bytes(p.units_per_split, p.n_tokens));
    return launch_kernel<F, 1, S, true, true>(p, grid, smem, stream);
}

// quantise_int8_x: block b quantises units [8b, 8b + 8) of every row.
__global__ void __launch_bounds__(256) quantise_int8_x_kernel(const __nv_bfloat16* x, const __nv_bfloat16* lo,
                                                              int64_t ldx, int rows, int64_t k, Int8X out) {
    ninfer_grid_launch_dependents();
    ninfer_grid_wait();
    const int64_t u_begin = int64_t(blockIdx.x) * 8;
    const int units = int(min(int64_t(8), int8_x_units(k) - u_begin));
    quantise_rows_to<true>(x, lo, ldx, rows, 0, k, u_begin, units, out, threadIdx.x, blockDim.x);
    zero_int8_slots(out.d + u_begin * 8, rows, units, threadIdx.x, blockDim.x);
}

} // namespace

// Decided for kGemvMaxTokens, not p.n_tokens: the route (and so a token's bits) must not depend on
// the batch it came in.
bool gemv_pipe_int8_fits(const GemvParams& p) {
    return x8_stage_bytes(p.units_per_split, kGemvMaxTokens) <= kXStageMaxBytes;
}

cudaError_t gemv_pipe_launch_int8(int stages, const GemvParams& p, dim3 grid, cudaStream_t stream) {
    if (!gemv_pipe_int8_fits(p)) return cudaErrorInvalidValue;
    switch (stages) {
    case 2: return launch_int8<2>(p, grid, stream);
    case 3: return launch_int8<3>(p, grid, stream);
    case 4: return launch_int8<4>(p, grid, stream);
    default: return cudaErrorInvalidValue;
    }
}

void gemv_pipe_set_carveout(int percent) {
    g_carveout = percent;
    g_hooked = true;
}

int gemv_pipe_resident_blocks(WeightFormat f, int stages) {
    switch (f) {
    case WeightFormat::Bf16: return resident_blocks_of<WeightFormat::Bf16>(stages);
    case WeightFormat::Fp8E4m3RowBf16: return resident_blocks_of<WeightFormat::Fp8E4m3RowBf16>(stages);
    case WeightFormat::Q4G64Fp16: return resident_blocks_of<WeightFormat::Q4G64Fp16>(stages);
    case WeightFormat::Q5G64Fp16: return resident_blocks_of<WeightFormat::Q5G64Fp16>(stages);
    case WeightFormat::Q6G64Fp16: return resident_blocks_of<WeightFormat::Q6G64Fp16>(stages);
    case WeightFormat::Q8G32Fp16: return resident_blocks_of<WeightFormat::Q8G32Fp16>(stages);
    default: return 2;
    }
}

cudaError_t gemv_pipe_launch(WeightFormat f, int stages, bool stage_x, bool two_pass, const GemvParams& p,
                             dim3 grid, cudaStream_t stream) {
    switch (f) {
    case WeightFormat::Bf16: return launch_format<WeightFormat::Bf16>(stages, stage_x, two_pass, p, grid, stream);
    case WeightFormat::Fp8E4m3RowBf16:
        return launch_format<WeightFormat::Fp8E4m3RowBf16>(stages, stage_x, two_pass, p, grid, stream);
    case WeightFormat::Q4G64Fp16: return launch_format<WeightFormat::Q4G64Fp16>(stages, stage_x, two_pass, p, grid, stream);
    case WeightFormat::Q5G64Fp16: return launch_format<WeightFormat::Q5G64Fp16>(stages, stage_x, two_pass, p, grid, stream);
    case WeightFormat::Q6G64Fp16: return launch_format<WeightFormat::Q6G64Fp16>(stages, stage_x, two_pass, p, grid, stream);
    case WeightFormat::Q8G32Fp16: return launch_format<WeightFormat::Q8G32Fp16>(stages, stage_x, two_pass, p, grid, stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace ninfer::kernels::detail

namespace ninfer::kernels {

cudaError_t quantise_int8_x(const __nv_bfloat16* x, const __nv_bfloat16* x_lo, int64_t x_stride, int n_tokens,
                            int64_t k, const Int8X& out, cudaStream_t stream) {
    auto aligned = [](const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; };
    if (!x || !out.q || !out.d || n_tokens < 1 || n_tokens > kGemvMaxTokens || k < 16 || k % 16 != 0 ||
        (n_tokens > 1 && x_stride < k) || x_stride % 8 != 0 || !aligned(x, 16) || !aligned(x_lo, 16) ||
        !aligned(out.q, 16) || !aligned(out.d, 8) || out.row_bytes % 16 != 0 || out.row_bytes < int8_x_units(k) * 64)
        return cudaErrorInvalidValue;
    const dim3 grid(unsigned((int8_x_units(k) + 7) / 8));
    return launch_pdl(detail::quantise_int8_x_kernel, grid, dim3(256), 0, stream, x, x_lo, x_stride, n_tokens, k, out);
}

} // namespace ninfer::kernels
