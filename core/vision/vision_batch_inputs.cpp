// ninfer::core - the GPU tower's batches on the host: packing, bf16 patches, position taps, rotary tables.
#include "core/vision/vision_batch_inputs.h"

#include "core/util/error.h"
#include "core/vision/vision_tower.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ninfer::core {

std::vector<std::vector<VisionBatchPiece>> pack_vision_batches(std::span<const VisionInput* const> items, size_t rows) {
    std::vector<std::vector<VisionBatchPiece>> batches;
    std::vector<VisionBatchPiece> batch;
    size_t used = 0;
    for (size_t i = 0; i < items.size(); ++i) {
        const size_t frame = size_t(items[i]->grid_h) * size_t(items[i]->grid_w);
        if (frame > rows)
            throw Error("vision: a frame of " + std::to_string(frame) + " patches; the GPU tower takes at most " +
                        std::to_string(rows));
        for (size_t t0 = 0; t0 < size_t(items[i]->grid_t);) {
            if (used + frame > rows) {
                batches.push_back(std::move(batch));
                batch.clear();
                used = 0;
            }
            const size_t nt = std::min(size_t(items[i]->grid_t) - t0, (rows - used) / frame);
            batch.push_back({i, t0, nt, frame, used});
            used += nt * frame;
            t0 += nt;
        }
    }
    if (!batch.empty())
        batches.push_back(std::move(batch));
    return batches;
}

size_t vision_batch_rows(std::span<const VisionBatchPiece> batch) {
    return batch.empty() ? 0 : batch.back().row + batch.back().nt * batch.back().frame;
}

void for_batch_rows(std::span<const VisionBatchPiece> batch, size_t r0, size_t r1,
                    const std::function<void(const VisionBatchPiece&, size_t, size_t)>& fn) {
    for (const VisionBatchPiece& pc : batch) {
        const size_t begin = std::max(r0, pc.row), end = std::min(r1, pc.row + pc.nt * pc.frame);
        if (begin < end)
            fn(pc, begin - pc.row, end - pc.row);
    }
}

namespace {

uint16_t bf16_rne(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return 0x7fff;
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#if defined(__SSE2__)
// Four values: the scalar rule lane by lane, the 16-bit result sign-extended so that the signed
// saturating pack keeps its bits.
__m128i bf16_rne4(__m128i x) {
    const __m128i lsb = _mm_and_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(1));
    __m128i r = _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(x, _mm_set1_epi32(0x7fff)), lsb), 16);
    const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(x, _mm_set1_epi32(0x7fffffff)), _mm_set1_epi32(0x7f800000));
    r = _mm_or_si128(_mm_andnot_si128(nan, r), _mm_and_si128(nan, _mm_set1_epi32(0x7fff)));
    return _mm_srai_epi32(_mm_slli_epi32(r, 16), 16);
}
#endif

} // namespace

void to_bf16_rne(const float* src, size_t n, uint16_t* dst) {
    size_t i = 0;
#if defined(__SSE2__)
    // One core of the 2-core build machine: 6.3 M values (a 1024x1024 image) in 1.55 ms, as fast as
    // copying them in f32 (1.4-1.6 ms); GCC's -O2 leaves the scalar loop unvectorised (5.0 ms).
    for (; i + 8 <= n; i += 8) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 4));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_packs_epi32(bf16_rne4(a), bf16_rne4(b)));
    }
#endif
    for (; i < n; ++i)
        dst[i] = bf16_rne(src[i]);
}

void fill_vision_batch(const VisionConfig& c, std::span<const VisionBatchPiece> batch,
                       std::span<const VisionInput* const> items, const VisionBatchInputs& dst, ThreadPool* pool) {
    const size_t P = c.patch_dim(), hd2 = c.head_dim() / 2, hd4 = hd2 / 2;
    const auto round_rows = [&](size_t r0, size_t r1) {
        for_batch_rows(batch, r0, r1, [&](const VisionBatchPiece& pc, size_t k0, size_t k1) {
            to_bf16_rne(items[pc.item]->patches.data() + (pc.t0 * pc.frame + k0) * P, (k1 - k0) * P,
                        dst.patches + (pc.row + k0) * P);
        });
    };
    if (pool)
        pool->parallel_for(vision_batch_rows(batch), round_rows);
    else
        round_rows(0, vision_batch_rows(batch));
    std::vector<float> axis_cos, axis_sin;
    for (const VisionBatchPiece& pc : batch) {
        const VisionInput& item = *items[pc.item];
        // The rotary halves per row and column index: grid_h + grid_w evaluations of head_dim/4 cos
        // and sin, not one per patch (per patch, 4096 patches took 1.8 ms of host time on the
        // 2-core build machine, the same loop timed alone, session 20).
        const size_t axis = size_t(std::max(item.grid_h, item.grid_w));
        axis_cos.resize(axis * hd4);
        axis_sin.resize(axis * hd4);
        for (size_t i = 0; i < axis; ++i)
            vision_rope_axis(c, uint32_t(i), &axis_cos[i * hd4], &axis_sin[i * hd4]);
        for (size_t q = 0; q < pc.frame; ++q) {
            const size_t r = pc.row + q;
            const PatchCell cell = patch_cell(q, uint32_t(item.grid_w), c.spatial_merge_size);
            uint32_t t[4];
            position_taps(c, cell, uint32_t(item.grid_h), uint32_t(item.grid_w), t, &dst.tap_w[4 * r]);
            std::copy(t, t + 4, &dst.taps[4 * r]);
            for (const auto& [index, half] : {std::pair{size_t(cell.row), size_t(0)}, std::pair{size_t(cell.col), hd4}}) {
                std::copy_n(&axis_cos[index * hd4], hd4, &dst.cos[r * hd2 + half]);
                std::copy_n(&axis_sin[index * hd4], hd4, &dst.sin[r * hd2 + half]);
            }
        }
        const auto replicate = [&](auto* table, size_t width) {
            const auto* first = table + pc.row * width;
            for (size_t f = 1; f < pc.nt; ++f)
                std::copy(first, first + pc.frame * width, table + (pc.row + f * pc.frame) * width);
        };
        replicate(dst.taps, 4);
        replicate(dst.tap_w, 4);
        replicate(dst.cos, hd2);
        replicate(dst.sin, hd2);
    }
}

} // namespace ninfer::core
