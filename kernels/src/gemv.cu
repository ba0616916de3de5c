// ninfer::kernels - decode GEMV launcher: argument checks, split-K choice, format dispatch.
#include "gemv_launch.cuh"
#include "gemv_nvfp4.cuh"
#include "gemv_pipe.cuh"
#include "ninfer/kernels/device.h"
#include "ninfer/kernels/tuning.h"

#include <map>
#include <mutex>
#include <tuple>

namespace ninfer::kernels {

namespace {

constexpr int kMaxSplits = 16;
constexpr int kMinUnitsPerSplit = 8;
constexpr int kTargetBlocksPerSm = 8;

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
// row_split_k128_v1 (docs/ARTIFACT_FORMAT.md §3.2): group size, base and high-bit bytes per group.
int group_of(WeightFormat f) { return f == WeightFormat::Q8G32Fp16 ? 32 : 64; }
int high_bytes_of(WeightFormat f) { return f == WeightFormat::Q5G64Fp16 ? 8 : f == WeightFormat::Q6G64Fp16 ? 16 : 0; }
int64_t groups_per_row(WeightFormat f, int64_t k) { return align_up(k, 128) / group_of(f); }
int unit_of(WeightFormat f) { return f == WeightFormat::Bf16 || f == WeightFormat::Q8G32Fp16 ? 32 : 64; }
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
// Units per step of the tiled kernels (detail::TiledTraits).
int unroll_of(WeightFormat f) { return f == WeightFormat::Q4G64Fp16 ? 8 : 4; }
bool tiled_format(WeightFormat f) { return gemv_has_tiled_layout(f); }

// The launch settings kernel_tuning_apply installed (KernelTuning{} until then); the test and bench
// hooks below override them until gemv_restore_tiled_pipeline.
KernelTuning g_tuning;
// Blocks per SM the tiled split choice aims at on every route (0: the occupancy calculator's).
int g_tiled_target = g_tuning.gemv_target_blocks;
// Ring stages of every launch (0: the register kernel) unless the path is chosen per matrix (gemv.h).
int g_tiled_stages = kGemvTiledStages;
bool g_stage_x = kGemvStageX;
bool g_path_per_matrix = true;

// Ring stages of a one-pass launch over w (0: the register kernel); the split count follows it.
int stages_of(const WeightView& w) {
    return g_path_per_matrix && w.k <= kGemvRegisterMaxK && w.n < kGemvRingMinRows ? 0 : g_tiled_stages;
}

// The one-pass kernel's occupancy sets the split for every n_tokens (the split must not depend on it).
template <WeightFormat F> int tiled_resident_blocks() {
    static const int blocks = [] {
        int b = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, detail::gemv_tiled_kernel<F, 1>, detail::kGemvWarps * 32, 0) !=
                cudaSuccess || b < 1)
            b = 4;
        return b;
    }();
    return blocks;
}
int tiled_resident_blocks(WeightFormat f, int stages) {
    if (stages > 0) return detail::gemv_pipe_resident_blocks(f, stages);
    switch (f) {
    case WeightFormat::Bf16: return tiled_resident_blocks<WeightFormat::Bf16>();
    case WeightFormat::Fp8E4m3RowBf16: return tiled_resident_blocks<WeightFormat::Fp8E4m3RowBf16>();
    case WeightFormat::Q4G64Fp16: return tiled_resident_blocks<WeightFormat::Q4G64Fp16>();
    case WeightFormat::Q5G64Fp16: return tiled_resident_blocks<WeightFormat::Q5G64Fp16>();
    case WeightFormat::Q6G64Fp16: return tiled_resident_blocks<WeightFormat::Q6G64Fp16>();
    case WeightFormat::Q8G32Fp16: return tiled_resident_blocks<WeightFormat::Q8G32Fp16>();
    default: break;
    }
    return 4;
}

// Tiled layout: splits of a whole number of unrolled steps (one step may be a whole split: the
// shared-memory pipeline requests all of a short split at once, which small-k shapes such as the
// 35B-A3B's 2048 x 4096 need for parallelism). Each block's warps stream at a latency-bound rate, so a launch
// takes about (waves of resident blocks) x (steps per block + one step of first-load latency):
// the split count minimises that (a grid of 1.03 waves costs two), ties to fewer splits.
// x8_cap > 0 (the int8 route): only splits whose int8 copy of 8 tokens' x (x8_stage_bytes) is within
// x8_cap bytes count; -1 when none is.
int choose_tiled_split(const WeightView& w, const GemvScratch& scratch, int per_sm, int64_t x8_cap) {
    const int64_t blocks = (w.n + detail::kGemvRowsPerBlock - 1) / detail::kGemvRowsPerBlock;
    const int unroll = unroll_of(w.format);
    const int64_t steps = tiled_units(w.format, w.n, w.k) / unroll;
    const auto allowed = [&](int64_t per) {
        return x8_cap <= 0 || detail::x8_stage_bytes(per * unroll, kGemvMaxTokens) <= x8_cap;
    };
    if (!scratch.partials || !scratch.counters || size_t(blocks) > scratch.n_counters) return allowed(steps) ? 1 : -1;
    const int64_t slots = int64_t(per_sm) * (sm_count() > 0 ? sm_count() : 132);
    int64_t max_splits = std::min<int64_t>(kMaxSplits, steps);
    max_splits = std::min<int64_t>(max_splits, int64_t(scratch.n_floats / (size_t(kGemvMaxTokens) * size_t(w.n))));
    int best = -1;
    int64_t best_cost = 0;
    for (int64_t s = 1; s <= std::max<int64_t>(max_splits, 1); ++s) {
        const int64_t per = (steps + s - 1) / s, used = (steps + per - 1) / per; // drop empty splits
        const int64_t cost = (blocks * used + slots - 1) / slots * (per + 1);
        if (allowed(per) && (best < 0 || cost < best_cost)) {
            best_cost = cost;
            best = int(used);
        }
    }
    return best;
}
int tiled_split_count(const WeightView& w, const GemvScratch& scratch) {
    const int per_sm = g_tiled_target > 0 ? g_tiled_target : tiled_resident_blocks(w.format, stages_of(w));
    return choose_tiled_split(w, scratch, per_sm, 0);
}

// The register double-buffer kernel, one pass (x and, with x_lo, its low halves of <= 4 tokens) or two.
template <WeightFormat F>
cudaError_t launch_tiled_registers(bool two_pass, const detail::GemvParams& p, dim3 grid, cudaStream_t stream) {
    const dim3 block(detail::kGemvWarps * 32);
    return two_pass ? detail::launch_gemv(detail::gemv_tiled_kernel<F, 2>, grid, block, 0, stream, p)
                    : detail::launch_gemv(detail::gemv_tiled_kernel<F, 1>, grid, block, 0, stream, p);
}

// Units per split of the tiled kernels: whole steps, the same for every split but the last.
int64_t tiled_units_per_split(const WeightView& w, int splits) {
    const int64_t steps = tiled_units(w.format, w.n, w.k) / unroll_of(w.format);
    return (steps + splits - 1) / splits * unroll_of(w.format);
}

// The int8 route's split when it runs (GemvArgs::x_int8 on q4, tiled, on the ring, and a split within
// the x cap), else -1. It aims at KernelTuning::gemv_int8_target_blocks blocks per SM (the hook's
// figure when set) among the splits whose int8 x of 8 tokens fits the shared-memory stage
// (kXStageMaxBytes), so neither depends on n_tokens.
int int8_split(const GemvArgs& a) {
    if (!a.x_int8 || a.w.format != WeightFormat::Q4G64Fp16 || a.w.layout != WeightLayout::Tiled || stages_of(a.w) <= 0)
        return -1;
    return choose_tiled_split(a.w, a.scratch, g_tiled_target > 0 ? g_tiled_target : g_tuning.gemv_int8_target_blocks,
                              int64_t(detail::kXStageMaxBytes));
}

} // namespace

bool gemv_runs_int8_x(const GemvArgs& a) {
    if (a.w.n < 1 || a.w.k < 16 || a.n_tokens < 1 || a.n_tokens > kGemvMaxTokens) return false;
    return int8_split(a) > 0;
}

int gemv_split_count(const GemvArgs& a) {
    const int s = int8_split(a);
    return s > 0 ? s : gemv_split_count(a.w, a.scratch);
}

size_t weight_bytes(WeightFormat format, int64_t n, int64_t k) {
    switch (format) {
    case WeightFormat::Bf16: return size_t(n * k * 2);
    case WeightFormat::Fp8E4m3RowBf16: return size_t(align_up(n * k, 256) + 2 * n);
    case WeightFormat::Nvfp4: return size_t(align_up(n * k / 2, 256) + n * k / 16 + 4 * n);
    default: { // grouped: base | zeros | high | zeros | scales
        const int64_t g = groups_per_row(format, k);
        return size_t(align_up(n * g * 32, 256) + align_up(n * g * high_bytes_of(format), 256) + n * g * 2);
    }
    }
}

size_t gemv_scratch_floats(int64_t n_max) { return size_t(kMaxSplits) * kGemvMaxTokens * size_t(n_max); }
size_t gemv_scratch_counters(int64_t n_max) {
    return size_t((n_max + detail::kGemvRowsPerBlock - 1) / detail::kGemvRowsPerBlock);
}

namespace {
// Split-K sums within a cluster (the measured best). gemv_set_cluster_reduce(false), the tests'
// same-bits check, forces the counter path, which a launch whose cluster cannot be resident takes anyway.
bool g_cluster_reduce = true;
} // namespace

void gemv_set_cluster_reduce(bool on) { g_cluster_reduce = on; }

namespace detail {
bool gemv_cluster_reduce_on() { return g_cluster_reduce; }

bool gemv_cluster_fits(const void* kernel, dim3 grid, dim3 block, size_t smem) {
    static std::mutex mutex;
    static std::map<std::tuple<const void*, unsigned, unsigned, size_t>, bool> known;
    const std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_tuple(kernel, grid.y, block.x, smem);
    if (const auto it = known.find(key); it != known.end()) return it->second;
    // Neither call is a stream operation: safe during graph capture.
    bool fits = grid.y <= 8 || cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
    if (fits) {
        cudaLaunchAttribute attr[2];
        const cudaLaunchConfig_t cfg = pdl_config(grid, block, smem, nullptr, int(grid.y), attr);
        int clusters = 0;
        fits = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) == cudaSuccess && clusters > 0;
    }
    (void)cudaGetLastError(); // a refused size is an answer, not an error for the next launch
    known.emplace(key, fits);
    return fits;
}
} // namespace detail

void gemv_set_tiled_target_blocks_per_sm(int blocks) { g_tiled_target = blocks; }
void gemv_set_tiled_pipeline(int stages, int carveout_percent, bool stage_x) {
    g_tiled_stages = stages;
    g_stage_x = stage_x;
    g_path_per_matrix = false;
    detail::gemv_pipe_set_carveout(carveout_percent);
}

void gemv_restore_tiled_pipeline() {
    const int stages = g_tuning.gemv_stages;
    gemv_set_tiled_pipeline(stages >= 0 ? stages : kGemvTiledStages, -1, kGemvStageX);
    g_path_per_matrix = stages < 0;
}

namespace detail {
bool g_pdl = true; // common.cuh pdl_enabled()
} // namespace detail

// The launch settings of every kernel live here: PDL for all launches (common.cuh), the rest the
// GEMV's.
void kernel_tuning_apply(const KernelTuning& t) {
    g_tuning = t;
    detail::g_pdl = t.pdl;
    g_tiled_target = t.gemv_target_blocks;
    gemv_restore_tiled_pipeline();
}

int gemv_split_count(const WeightView& w, const GemvScratch& scratch) {
    if (w.layout == WeightLayout::Tiled) return tiled_split_count(w, scratch);
    const int64_t tiles = (w.n + detail::kGemvRowsPerBlock - 1) / detail::kGemvRowsPerBlock;
    const int64_t units = (w.k + unit_of(w.format) - 1) / unit_of(w.format);
    if (!scratch.partials || !scratch.counters || size_t(tiles) > scratch.n_counters) return 1;
    const int64_t target_blocks = int64_t(kTargetBlocksPerSm) * (sm_count() > 0 ? sm_count() : 132);
    int64_t splits = (target_blocks + tiles - 1) / tiles;
    splits = std::min<int64_t>(splits, kMaxSplits);
    splits = std::min<int64_t>(splits, units / kMinUnitsPerSplit);
    splits = std::min<int64_t>(splits, int64_t(scratch.n_floats / (size_t(kGemvMaxTokens) * size_t(w.n))));
    if (splits < 2) return 1;
    // Even out the units per split, then drop splits that the rounding left empty.
    const int64_t per = (units + splits - 1) / splits;
    return int((units + per - 1) / per);
}

cudaError_t gemv(const GemvArgs& a, cudaStream_t stream) {
    const WeightView& w = a.w;
    if (w.n < 1 || w.k < 16 || w.k % 16 != 0 || a.n_tokens < 1 || a.n_tokens > kGemvMaxTokens || !w.data ||
        !a.x || !a.y || !aligned16(w.data) || !aligned16(a.x) || !aligned16(a.y) ||
        (a.residual && !aligned16(a.residual)) || a.x_stride % 8 != 0 || a.y_stride % 8 != 0 ||
        (a.residual && a.residual_stride % 8 != 0) ||
        (a.n_tokens > 1 && (a.x_stride < w.k || a.y_stride < (a.y_tail ? a.tail_row0 : w.n))) ||
        (w.layout == WeightLayout::Tiled && !tiled_format(w.format)) ||
        (a.x_lo && (w.layout != WeightLayout::Tiled || !aligned16(a.x_lo))) ||
        (a.y_tail && (a.residual || a.tail_row0 < 0 || a.tail_row0 >= w.n ||
                      (a.n_tokens > 1 && a.y_tail_stride < w.n - a.tail_row0))) ||
        (w.format == WeightFormat::Nvfp4 && (w.n % 128 != 0 || w.k % 64 != 0)) ||
        (a.x8.q && (!aligned16(a.x8.q) || !a.x8.d || (reinterpret_cast<uintptr_t>(a.x8.d) & 7u) ||
                    a.x8.row_bytes % 16 != 0 || a.x8.row_bytes < int8_x_units(w.k) * 64)))
        return cudaErrorInvalidValue;

    detail::GemvParams p{};
    p.w = static_cast<const uint8_t*>(w.data);
    p.n = w.n;
    p.k = w.k;
    if (w.layout == WeightLayout::Tiled) {
        p.tiled_units = tiled_units(w.format, w.n, w.k);
        p.scales = p.w + align_up((w.n + 15) / 16 * p.tiled_units * detail::tiled_block_bytes(w.format), 256);
    } else switch (w.format) {
    case WeightFormat::Bf16: p.row_bytes = w.k * 2; break;
    case WeightFormat::Fp8E4m3RowBf16:
        p.row_bytes = w.k;
        p.scales = p.w + align_up(w.n * w.k, 256);
        break;
    case WeightFormat::Nvfp4:
        p.row_bytes = w.k / 2;
        p.scales = p.w + align_up(w.n * w.k / 2, 256);
        break;
    default:
        p.groups_per_row = groups_per_row(w.format, w.k);
        p.row_bytes = p.groups_per_row * 32;
        p.high_row_bytes = p.groups_per_row * high_bytes_of(w.format);
        p.high = p.w + align_up(w.n * p.row_bytes, 256);
        p.scales = p.high + align_up(w.n * p.high_row_bytes, 256);
        break;
    }
    p.x = a.x;
    p.x_lo = a.x_lo;
    p.ldx = a.x_stride;
    p.y_tail = a.y_tail;
    p.tail_row0 = a.tail_row0;
    p.ld_tail = a.y_tail_stride;
    p.n_tokens = a.n_tokens;
    p.residual = a.residual;
    p.ldr = a.residual_stride;
    p.y = a.y;
    p.ldy = a.y_stride;
    p.y_fp32 = a.y_fp32;
    p.partials = a.scratch.partials;
    p.counters = a.scratch.counters;
    const int int8_splits = int8_split(a); // the route's split is chosen once
    const bool int8 = int8_splits > 0;
    if (int8) p.x8 = a.x8;
    p.splits = int8 ? int8_splits : gemv_split_count(w, a.scratch);
    const dim3 grid(unsigned((w.n + detail::kGemvRowsPerBlock - 1) / detail::kGemvRowsPerBlock), unsigned(p.splits));
    const dim3 block(detail::kGemvWarps * 32);
    if (w.layout == WeightLayout::Tiled) {
        p.units_per_split = tiled_units_per_split(w, p.splits);
        const bool two_pass = a.x_lo && a.n_tokens > 4; // high and low halves of 8 tokens: 16 columns
        if (const int stages = stages_of(w); stages > 0)
            return int8 ? detail::gemv_pipe_launch_int8(stages, p, grid, stream)
                        : detail::gemv_pipe_launch(w.format, stages, g_stage_x, two_pass, p, grid, stream);
        switch (w.format) {
        case WeightFormat::Bf16: return launch_tiled_registers<WeightFormat::Bf16>(two_pass, p, grid, stream);
        case WeightFormat::Fp8E4m3RowBf16: return launch_tiled_registers<WeightFormat::Fp8E4m3RowBf16>(two_pass, p, grid, stream);
        case WeightFormat::Q4G64Fp16: return launch_tiled_registers<WeightFormat::Q4G64Fp16>(two_pass, p, grid, stream);
        case WeightFormat::Q5G64Fp16: return launch_tiled_registers<WeightFormat::Q5G64Fp16>(two_pass, p, grid, stream);
        case WeightFormat::Q6G64Fp16: return launch_tiled_registers<WeightFormat::Q6G64Fp16>(two_pass, p, grid, stream);
        case WeightFormat::Q8G32Fp16: return launch_tiled_registers<WeightFormat::Q8G32Fp16>(two_pass, p, grid, stream);
        default: return cudaErrorInvalidValue;
        }
    }
    const int64_t units = (w.k + unit_of(w.format) - 1) / unit_of(w.format);
    p.units_per_split = (units + p.splits - 1) / p.splits;
    switch (w.format) {
    case WeightFormat::Bf16: return detail::launch_gemv(detail::gemv_kernel<WeightFormat::Bf16>, grid, block, 0, stream, p);
    case WeightFormat::Fp8E4m3RowBf16:
        return detail::launch_gemv(detail::gemv_kernel<WeightFormat::Fp8E4m3RowBf16>, grid, block, 0, stream, p);
    case WeightFormat::Q4G64Fp16: return detail::launch_gemv(detail::gemv_kernel<WeightFormat::Q4G64Fp16>, grid, block, 0, stream, p);
    case WeightFormat::Q5G64Fp16: return detail::launch_gemv(detail::gemv_kernel<WeightFormat::Q5G64Fp16>, grid, block, 0, stream, p);
    case WeightFormat::Q6G64Fp16: return detail::launch_gemv(detail::gemv_kernel<WeightFormat::Q6G64Fp16>, grid, block, 0, stream, p);
    case WeightFormat::Q8G32Fp16: return detail::launch_gemv(detail::gemv_kernel<WeightFormat::Q8G32Fp16>, grid, block, 0, stream, p);
    case WeightFormat::Nvfp4: return detail::gemv_nvfp4_launch(p, grid, block, stream);
    }
    return cudaErrorInvalidValue;
}

} // namespace ninfer::kernels
