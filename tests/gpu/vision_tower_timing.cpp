// ninfer GPU benchmark (no timed asserts) - the GPU vision tower of the real shape (27 blocks of 1152,
// core/convert/synthetic.h's qwen3.6-27b tower, random bf16 weights): a 1024x1024 image (4096
// patches, 1024 merged tokens) and a 30 s 720p video at 2 frames/s as the processor resizes it
// (60 frames of 832x480: 30 frame pairs of 30x52 patches), each at 4096 (the default), 8192 and
// 16384 rows per batch; the host's share of one batch (building its inputs, copying its rows out)
// on one thread and on four; and the flash attention kernel alone at those shapes. Prints "RESULT
// vision_tower_timing ...", "RESULT vision_host_timing ..." and "RESULT vision_flash_timing ...".
#include "core/convert/synthetic.h"
#include "core/cpu/thread_pool.h"
#include "core/cuda/vision_tower_gpu.h"
#include "core/vision/vision_batch_inputs.h"
#include "ninfer/kernels/vision.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("vision tower on the GPU: real-shape image and video times", "[vision_tower_timing]") {
    require_gpu();
    const VisionConfig vc = synthetic_shape_vision("qwen3.6-27b");
    InMemoryModel model;
    const VisionWeights w = random_vision_weights(model, vc, 3);
    struct Case {
        const char* name;
        VisionInput item;
        double copies_ms = 1e30;
    };
    Case cases[] = {{"image_1024x1024", random_vision_input(vc, VisionInput::Kind::Image, 1, 64, 64, 1)},
                    {"video_30s_832x480", random_vision_input(vc, VisionInput::Kind::Video, 30, 30, 52, 2)}};
    // What plain copies of the f32 patches up and the f32 rows down, pageable, take (transformers'
    // timing starts from bf16 pixels on the device and ends with rows on the device; the tower
    // now sends bf16 patches and takes its rows through pinned staging, overlapped with its work).
    for (Case& c : cases) {
        std::vector<float> rows(c.item.merged_tokens() * vc.out_hidden_size);
        DeviceBuffer<float> in(c.item.patches.size()), back(rows.size());
        for (int i = 0; i < 3; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            CUDA_OK(cudaMemcpy(in.get(), c.item.patches.data(), c.item.patches.size() * 4, cudaMemcpyHostToDevice));
            CUDA_OK(cudaMemcpy(rows.data(), back.get(), rows.size() * 4, cudaMemcpyDeviceToHost));
            c.copies_ms = std::min(c.copies_ms,
                                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
    }
    // Rows per batch: the serving default (4096: a 30 s clip's frame pairs of 1560 two a batch, 15
    // batches) and larger batches (bigger GEMMs, fewer batches: 5 and 10 frame pairs).
    for (const size_t batch_rows : {size_t(4096), size_t(8192), size_t(16384)}) {
        auto gpu = make_cuda_vision_encoder(w, -1, -1, batch_rows);
        for (const Case& c : cases) {
            std::vector<float> rows = gpu->encode(c.item); // warm-up
            REQUIRE(rows.size() == c.item.merged_tokens() * vc.out_hidden_size);
            double best = 1e30;
            for (int i = 0; i < 3; ++i) {
                const auto t0 = std::chrono::steady_clock::now();
                rows = gpu->encode(c.item);
                best = std::min(best,
                                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            }
            std::printf("RESULT vision_tower_timing %s rows_per_batch %zu patches %zu merged_tokens %zu best_ms %.2f "
                        "host_copies_ms %.2f device_mib %.1f pinned_mib %.1f\n",
                        c.name, batch_rows, c.item.n_patches(), c.item.merged_tokens(), best, c.copies_ms,
                        double(cuda_vision_bytes(vc, batch_rows)) / (1 << 20),
                        double(cuda_vision_pinned_bytes(vc, batch_rows)) / (1 << 20));
        }
    }
}

// What the host does per batch, timed alone on this machine: the patches rounded to bf16 plus the
// position taps and rotary tables (fill_vision_batch), and the rows copied out of the staging
// buffer, on the calling thread and over a pool of four (as the encoder runs them); best of 5.
TEST_CASE("vision tower host share: a batch's inputs and rows on one and four threads", "[vision_tower_timing]") {
    const VisionConfig vc = synthetic_shape_vision("qwen3.6-27b");
    ThreadPool pool(4);
    const auto best_ms = [](const auto& fn) {
        double best = 1e30;
        for (int i = 0; i < 5; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            fn();
            best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        return best;
    };
    struct Case {
        const char* name;
        VisionInput item;
    };
    const Case cases[] = {{"image_1024x1024", random_vision_input(vc, VisionInput::Kind::Image, 1, 64, 64, 1)},
                          {"video_frame_pairs_2x1560", random_vision_input(vc, VisionInput::Kind::Video, 2, 30, 52, 2)}};
    for (const Case& c : cases) {
        const VisionInput* item = &c.item;
        const auto batches = pack_vision_batches({&item, 1}, VisionTower::kMaxBatchRows);
        REQUIRE(batches.size() == 1);
        const size_t n = vision_batch_rows(batches[0]), hd2 = vc.head_dim() / 2, unit = vc.merge_unit();
        std::vector<uint16_t> patches(n * vc.patch_dim());
        std::vector<int32_t> taps(n * 4);
        std::vector<float> tap_w(n * 4), cos(n * hd2), sin(n * hd2);
        const VisionBatchInputs dst{patches.data(), taps.data(), tap_w.data(), cos.data(), sin.data()};
        const double fill1 = best_ms([&] { fill_vision_batch(vc, batches[0], {&item, 1}, dst); });
        const double fill4 = best_ms([&] { fill_vision_batch(vc, batches[0], {&item, 1}, dst, &pool); });
        const size_t row_floats = n / unit * vc.out_hidden_size;
        std::vector<float> staged(row_floats, 0.5f), rows(row_floats);
        const double copy1 = best_ms([&] { std::copy(staged.begin(), staged.end(), rows.begin()); });
        const double copy4 = best_ms([&] {
            pool.parallel_for(n / unit, [&](size_t g0, size_t g1) {
                std::copy(staged.begin() + long(g0 * vc.out_hidden_size), staged.begin() + long(g1 * vc.out_hidden_size),
                          rows.begin() + long(g0 * vc.out_hidden_size));
            });
        });
        std::printf("RESULT vision_host_timing %s rows %zu fill_ms_1_thread %.2f fill_ms_4_threads %.2f rows_out_mib %.1f "
                    "copy_ms_1_thread %.2f copy_ms_4_threads %.2f hardware_threads %u\n",
                    c.name, n, fill1, fill4, double(row_floats * 4) / (1 << 20), copy1, copy4,
                    std::thread::hardware_concurrency());
    }
}

// The flash attention alone at the real head (16 heads of 72): one 1024x1024 image's frame pair
// (4096 patches) and a 30 s clip's 30 frame pairs of 1560; FLOP counted as 4 x segment^2 x 72 x
// heads per segment (q kᵀ and P v, unpadded), for comparison with the bench's tensor-core peak.
TEST_CASE("vision flash attention: real-head times", "[vision_tower_timing]") {
    require_gpu();
    constexpr int kHeads = 16, kHeadDim = 72, kWidth = kHeads * kHeadDim;
    struct Case {
        const char* name;
        int segment, segments;
    };
    for (const Case c : {Case{"image_4096", 4096, 1}, Case{"video_30x1560", 1560, 30}}) {
        const size_t n = size_t(c.segment) * c.segments * kWidth;
        DeviceBuffer<__nv_bfloat16> q(n, 0x3c), k(n, 0x3c), v(n, 0x3c), out(n);
        cudaEvent_t t0, t1;
        CUDA_OK(cudaEventCreate(&t0));
        CUDA_OK(cudaEventCreate(&t1));
        float best = 1e30f;
        for (int i = 0; i < 6; ++i) {
            CUDA_OK(cudaEventRecord(t0));
            REQUIRE(ninfer::kernels::vision_flash_attention(q.get(), k.get(), v.get(), kWidth, c.segment * c.segments,
                                                            c.segment, kHeads, kHeadDim, out.get(), kWidth,
                                                            nullptr) == cudaSuccess);
            CUDA_OK(cudaEventRecord(t1));
            CUDA_OK(cudaEventSynchronize(t1));
            float ms = 0;
            CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
            if (i > 0) best = std::min(best, ms); // the first launch is a warm-up
        }
        const double flop = 4.0 * double(c.segment) * c.segment * kHeadDim * kHeads * c.segments;
        std::printf("RESULT vision_flash_timing %s best_ms %.3f tflops %.1f\n", c.name, best, flop / best / 1e9);
        CUDA_OK(cudaEventDestroy(t0));
        CUDA_OK(cudaEventDestroy(t1));
    }
}
