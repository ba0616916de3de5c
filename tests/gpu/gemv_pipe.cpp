// ninfer tests - the tiled GEMV's weight paths (register double buffer, 2..4 shared-memory stages,
// x staged in shared memory or not) give the same bits for the same split count, with and without
// split-K, x low halves, tails; the split-K reduction in a cluster gives the counter path's bits.
//
// The default path is checked against an fp64 reference by tests/gpu/gemv.cpp; here every other
// path must reproduce the register-buffer kernel's output byte for byte (same mma sequence per
// column), so a wrong stage index, barrier phase or slot reuse shows up as a mismatch.
#include "ninfer/kernels/gemv.h"
#include "weights_util.h"

using namespace ninfer;
using namespace ninfer::test;
using kernels::WeightFormat;

namespace {

struct PathCase {
    WeightFormat f;
    int64_t n, k;
    int tokens;
    bool split, lo, fp32_out, residual, tail;
};

// y (bf16 or f32 bytes) followed by the f32 tail, for one weight path. partials_written (when
// given): whether the call wrote into the split-K scratch's partials (the counter path does, a
// reduction within a cluster does not).
std::vector<uint8_t> run_path(const PathCase& c, const kernels::WeightView& w, int stages, bool stage_x,
                              int carveout = -1, bool* partials_written = nullptr) {
    kernels::gemv_set_tiled_pipeline(stages, carveout, stage_x);
    Rng rng(uint64_t(c.n * 31 + c.k));
    const int64_t ldx = c.k + 8, tail0 = c.tail ? c.n / 2 : c.n, ldy = (tail0 + 7) / 8 * 8 + 8, ldt = c.n - tail0 + 3;
    DeviceBuffer<bf16> x(rng.bf16s(size_t(c.tokens * ldx), -2.f, 2.f));
    DeviceBuffer<bf16> x_lo(rng.bf16s(size_t(c.tokens * ldx), -0.01f, 0.01f));
    DeviceBuffer<bf16> res(rng.bf16s(size_t(c.tokens * ldy), -4.f, 4.f));
    DeviceBuffer<uint8_t> y(size_t(c.tokens * ldy * 4), 0);
    DeviceBuffer<float> yt(size_t(c.tokens * ldt), 0);
    DeviceGemvScratch scratch(c.n);
    kernels::GemvArgs a;
    a.w = w;
    a.x = x.get();
    a.x_lo = c.lo ? x_lo.get() : nullptr;
    a.n_tokens = c.tokens;
    a.x_stride = ldx;
    a.residual = c.residual ? res.get() : nullptr;
    a.residual_stride = ldy;
    a.y = y.get();
    a.y_fp32 = c.fp32_out;
    a.y_stride = ldy;
    if (c.tail) {
        a.y_tail = yt.get();
        a.tail_row0 = tail0;
        a.y_tail_stride = ldt;
    }
    if (c.split) a.scratch = scratch.view();
    CUDA_OK(kernels::gemv(a, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(y.guards_intact());
    CHECK(yt.guards_intact());
    if (partials_written) { // DeviceBuffer fills new memory with 0xa5 bytes
        const std::vector<float> partials = scratch.partials.download();
        *partials_written = std::any_of(partials.begin(), partials.end(), [](float v) {
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            return bits != 0xa5a5a5a5u;
        });
    }
    auto out = y.download();
    const auto tail = yt.download();
    out.insert(out.end(), reinterpret_cast<const uint8_t*>(tail.data()),
               reinterpret_cast<const uint8_t*>(tail.data() + tail.size()));
    return out;
}

// Every path against the register kernel for these formats at the usual shapes.
void check_paths(std::initializer_list<WeightFormat> formats, uint64_t seed) {
    // One split target for every path, so the split count (and the summation order) is the same.
    kernels::gemv_set_tiled_target_blocks_per_sm(4);
    const std::vector<std::pair<int64_t, int64_t>> shapes = {{17, 48}, {100, 1040}, {129, 4112}, {5120, 6144}, {2048, 4096}};
    for (WeightFormat f : formats)
        for (auto [n, k] : shapes) {
            const auto bytes = random_weight(f, n, k, seed++);
            DeviceBuffer<uint8_t> artifact(bytes), tiled(kernels::tiled_weight_bytes(f, n, k));
            CUDA_OK(kernels::gemv_pack_tiled({f, artifact.get(), n, k}, tiled.get(), nullptr));
            const kernels::WeightView w{f, tiled.get(), n, k, kernels::WeightLayout::Tiled};
            for (int tokens : {1, 3, 5, 8})
                for (int variant = 0; variant < 4; ++variant) {
                    const PathCase c{f, n, k, tokens, variant != 1, variant >= 2, variant == 1, variant == 3, variant == 2};
                    const auto want = run_path(c, w, 0, false);
                    for (int stages : {2, 3, 4})
                        for (bool stage_x : {false, true}) {
                            INFO("format " << int(f) << " n=" << n << " k=" << k << " tokens=" << tokens << " variant "
                                           << variant << " stages " << stages << " stage_x " << stage_x);
                            const auto got = run_path(c, w, stages, stage_x);
                            CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
                        }
                }
        }
    kernels::gemv_set_tiled_target_blocks_per_sm(0);
    kernels::gemv_restore_tiled_pipeline();
}

} // namespace

TEST_CASE("gemv_pipe: every tiled weight path gives the register kernel's bits", "[gemv_pipe]") {
    require_gpu();
    check_paths({WeightFormat::Bf16, WeightFormat::Fp8E4m3RowBf16, WeightFormat::Q4G64Fp16}, 40);
}

TEST_CASE("gemv_pipe: q5/q6/q8 tiled paths give the register kernel's bits", "[gemv_pipe]") {
    require_gpu();
    check_paths({WeightFormat::Q5G64Fp16, WeightFormat::Q6G64Fp16, WeightFormat::Q8G32Fp16}, 60);
}

TEST_CASE("gemv_pipe: a smaller shared-memory carveout changes occupancy, not results", "[gemv_pipe]") {
    require_gpu();
    const int64_t n = 5120, k = 6144;
    const auto bytes = random_weight(WeightFormat::Q4G64Fp16, n, k, 9);
    DeviceBuffer<uint8_t> artifact(bytes), tiled(kernels::tiled_weight_bytes(WeightFormat::Q4G64Fp16, n, k));
    CUDA_OK(kernels::gemv_pack_tiled({WeightFormat::Q4G64Fp16, artifact.get(), n, k}, tiled.get(), nullptr));
    const kernels::WeightView w{WeightFormat::Q4G64Fp16, tiled.get(), n, k, kernels::WeightLayout::Tiled};
    const PathCase c{WeightFormat::Q4G64Fp16, n, k, 8, false, true, false, true, false}; // no split: one order
    const auto want = run_path(c, w, 0, false);
    for (int carveout : {50, 70, 100}) {
        INFO("carveout " << carveout);
        const auto got = run_path(c, w, 3, false, carveout);
        CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    }
    kernels::gemv_restore_tiled_pipeline();
}

// Split-K partials summed in a cluster through distributed shared memory (the default for the
// register kernels) against the last block's sum through L2: the same bits for the tiled register
// kernel, the artifact-layout kernel and nvfp4, split counts 2..16 (above 8 the cluster size is
// non-portable), 1..8 tokens, with residual, f32 output and a tail; the cluster runs leave the L2
// scratch untouched, so the cluster path did run at every size. (The ring's batch-2..8 int8
// launches, the only ring launches with clusters, are compared with the counter path by
// [int8_x]; the other ring launches keep the counter path: gemv_pipe.cuh.)
TEST_CASE("gemv_pipe: split-K reduced in a cluster gives the counter path's bits", "[gemv_pipe]") {
    require_gpu();
    struct Shape {
        WeightFormat f;
        int64_t n, k;
        int target; // blocks per SM the split choice aims at: more blocks, more splits
    };
    const Shape shapes[] = {{WeightFormat::Q4G64Fp16, 2048, 4096, 0},  {WeightFormat::Q4G64Fp16, 129, 17408, 16},
                            {WeightFormat::Q4G64Fp16, 5120, 6144, 4},  {WeightFormat::Bf16, 100, 1040, 8},
                            {WeightFormat::Fp8E4m3RowBf16, 200, 4096, 16}, {WeightFormat::Q8G32Fp16, 300, 5120, 8},
                            {WeightFormat::Nvfp4, 256, 4096, 8}};
    uint64_t seed = 700;
    int max_splits = 0;
    for (const Shape& sh : shapes) {
        kernels::gemv_set_tiled_target_blocks_per_sm(sh.target);
        const auto bytes = random_weight(sh.f, sh.n, sh.k, seed++);
        DeviceBuffer<uint8_t> artifact(bytes);
        std::vector<kernels::WeightView> views = {{sh.f, artifact.get(), sh.n, sh.k}};
        std::unique_ptr<DeviceBuffer<uint8_t>> tiled;
        if (kernels::gemv_has_tiled_layout(sh.f)) {
            tiled = std::make_unique<DeviceBuffer<uint8_t>>(kernels::tiled_weight_bytes(sh.f, sh.n, sh.k));
            CUDA_OK(kernels::gemv_pack_tiled(views[0], tiled->get(), nullptr));
            views.push_back({sh.f, tiled->get(), sh.n, sh.k, kernels::WeightLayout::Tiled});
        }
        for (const kernels::WeightView& w : views) {
            kernels::gemv_set_tiled_pipeline(0, -1, false); // the register kernel for every tiled shape
            DeviceGemvScratch scratch(sh.n);
            const int splits = kernels::gemv_split_count(w, scratch.view());
            max_splits = std::max(max_splits, splits);
            for (int tokens : {1, 3, 8})
                for (int variant = 0; variant < 3; ++variant) {
                    INFO("format " << int(sh.f) << " n=" << sh.n << " k=" << sh.k << " layout " << int(w.layout)
                                   << " splits " << splits << " tokens " << tokens << " variant " << variant);
                    const PathCase c{sh.f, sh.n, sh.k, tokens, true, false, variant == 1, variant == 2, variant == 1};
                    bool counter_wrote = false, cluster_wrote = true;
                    kernels::gemv_set_cluster_reduce(false);
                    const auto want = run_path(c, w, 0, false, -1, &counter_wrote);
                    kernels::gemv_set_cluster_reduce(true);
                    const auto got = run_path(c, w, 0, false, -1, &cluster_wrote);
                    CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
                    CHECK(counter_wrote == (splits > 1));
                    CHECK(!cluster_wrote);
                }
        }
    }
    CHECK(max_splits > 8); // a non-portable cluster size was among them
    kernels::gemv_set_tiled_target_blocks_per_sm(0);
    kernels::gemv_restore_tiled_pipeline();
    kernels::gemv_set_cluster_reduce(true);
}
