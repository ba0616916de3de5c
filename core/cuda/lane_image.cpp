// ninfer::core - CUDA lane state <-> LaneImage (the CPU backend's byte layout).
#include "core/cuda/lane_image.h"

#include <cuda_bf16.h>

#include <cstring>

namespace ninfer::core::cuda {

namespace {

// Calls fn(layer, value, page index, host page buffer offset of (position, head) rows) for every
// KV row of positions [0, n): page buffers are [n_kv_heads][64][head_dim] bf16.
struct KvGeometry {
    uint32_t n_full, nkv;
    uint64_t row_bytes, page_bytes;
    uint32_t n;
    uint64_t image_offset(uint32_t fl, bool value, uint32_t pos, uint32_t h) const {
        return ((uint64_t(2 * fl + value) * n + pos) * nkv + h) * row_bytes;
    }
    uint64_t page_offset(uint32_t pos, uint32_t h) const {
        return (uint64_t(h) * kKvPageTokens + pos % kKvPageTokens) * row_bytes;
    }
};

KvGeometry kv_geometry(const Runner& run, const MemoryPlan& plan, uint32_t n) {
    const ModelConfig& c = run.config();
    return {c.n_full_attention_layers(), c.num_key_value_heads, plan.kv_row_bytes, run.kv_page_elems() * 2, n};
}

} // namespace

LaneImage save_lane_image(const Runner& run, const MemoryPlan& plan, int lane, const std::vector<int32_t>& tokens,
                          const std::vector<uint32_t>& pages) {
    cuda_check(cudaStreamSynchronize(run.stream()), "saving a lane");
    const uint32_t n = uint32_t(tokens.size());
    LaneImage img;
    img.tokens = tokens;
    img.kv_dtype = plan.kv_dtype;
    img.kv.resize(plan.lane_image_kv_bytes(n));
    const KvGeometry g = kv_geometry(run, plan, n);
    std::vector<uint8_t> page(g.page_bytes);
    for (uint32_t fl = 0; fl < g.n_full; ++fl)
        for (int value = 0; value < 2; ++value)
            for (uint32_t p = 0; p * kKvPageTokens < n; ++p) {
                const __nv_bfloat16* src = (value ? run.kv_v(fl) : run.kv_k(fl)) + uint64_t(pages[p]) * run.kv_page_elems();
                cuda_check(cudaMemcpy(page.data(), src, g.page_bytes, cudaMemcpyDeviceToHost), "saving KV");
                for (uint32_t pos = p * kKvPageTokens; pos < std::min(n, (p + 1) * kKvPageTokens); ++pos)
                    for (uint32_t h = 0; h < g.nkv; ++h)
                        std::memcpy(img.kv.data() + g.image_offset(fl, value, pos, h), page.data() + g.page_offset(pos, h),
                                    g.row_bytes);
            }
    const ModelConfig& c = run.config();
    const uint32_t n_gdn = c.n_linear_attention_layers();
    const uint64_t ce = run.conv_elems_per_lane(), rf = run.recurrent_floats_per_lane();
    img.gdn.resize(plan.lane_image_gdn_bytes());
    std::vector<__nv_bfloat16> conv(ce);
    float* out = reinterpret_cast<float*>(img.gdn.data());
    for (uint32_t l = 0; l < n_gdn; ++l) {
        cuda_check(cudaMemcpy(conv.data(), run.conv_state(l) + lane * ce, ce * 2, cudaMemcpyDeviceToHost), "saving GDN");
        for (uint64_t i = 0; i < ce; ++i)
            out[l * ce + i] = __bfloat162float(conv[i]);
    }
    out += uint64_t(n_gdn) * ce;
    for (uint32_t l = 0; l < n_gdn; ++l)
        cuda_check(cudaMemcpy(out + l * rf, run.recurrent_state(l) + lane * rf, rf * 4, cudaMemcpyDeviceToHost),
                   "saving GDN");
    return img;
}

void restore_lane_image(Runner& run, const MemoryPlan& plan, int lane, const LaneImage& img,
                        const std::vector<uint32_t>& pages) {
    cuda_check(cudaStreamSynchronize(run.stream()), "restoring a lane");
    const uint32_t n = uint32_t(img.tokens.size());
    const KvGeometry g = kv_geometry(run, plan, n);
    std::vector<uint8_t> page(g.page_bytes);
    for (uint32_t fl = 0; fl < g.n_full; ++fl)
        for (int value = 0; value < 2; ++value)
            for (uint32_t p = 0; p * kKvPageTokens < n; ++p) {
                std::fill(page.begin(), page.end(), 0);
                for (uint32_t pos = p * kKvPageTokens; pos < std::min(n, (p + 1) * kKvPageTokens); ++pos)
                    for (uint32_t h = 0; h < g.nkv; ++h)
                        std::memcpy(page.data() + g.page_offset(pos, h), img.kv.data() + g.image_offset(fl, value, pos, h),
                                    g.row_bytes);
                __nv_bfloat16* dst = (value ? run.kv_v(fl) : run.kv_k(fl)) + uint64_t(pages[p]) * run.kv_page_elems();
                cuda_check(cudaMemcpy(dst, page.data(), g.page_bytes, cudaMemcpyHostToDevice), "restoring KV");
            }
    const ModelConfig& c = run.config();
    const uint32_t n_gdn = c.n_linear_attention_layers();
    const uint64_t ce = run.conv_elems_per_lane(), rf = run.recurrent_floats_per_lane();
    std::vector<__nv_bfloat16> conv(ce);
    const float* in = reinterpret_cast<const float*>(img.gdn.data());
    for (uint32_t l = 0; l < n_gdn; ++l) {
        for (uint64_t i = 0; i < ce; ++i)
            conv[i] = __float2bfloat16(in[l * ce + i]);
        cuda_check(cudaMemcpy(run.conv_state(l) + lane * ce, conv.data(), ce * 2, cudaMemcpyHostToDevice), "restoring GDN");
    }
    in += uint64_t(n_gdn) * ce;
    for (uint32_t l = 0; l < n_gdn; ++l)
        cuda_check(cudaMemcpy(run.recurrent_state(l) + lane * rf, in + l * rf, rf * 4, cudaMemcpyHostToDevice),
                   "restoring GDN");
}

} // namespace ninfer::core::cuda
