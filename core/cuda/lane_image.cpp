// ninfer::core - CUDA lane state <-> LaneImage (the CPU backend's byte layout).
#include "core/cuda/lane_image.h"

#include "core/util/error.h"

#include <cuda_bf16.h>

#include <cstring>

namespace ninfer::core::cuda {

namespace {

// Image rows are kv_codec.h rows (codes, then their scales: row_bytes = code_bytes + scale_bytes);
// device pages keep [n_kv_heads][64] rows of codes, then (fp8/int8) the same rows' scales.
struct KvGeometry {
    uint32_t n_full, nkv;
    uint64_t row_bytes, code_bytes, scale_bytes, page_bytes;
    uint32_t n;
    uint64_t image_offset(uint32_t fl, bool value, uint32_t pos, uint32_t h) const {
        return ((uint64_t(2 * fl + value) * n + pos) * nkv + h) * row_bytes;
    }
    uint64_t page_row(uint32_t pos, uint32_t h) const { return uint64_t(h) * kKvPageTokens + pos % kKvPageTokens; }
    uint64_t code_offset(uint32_t pos, uint32_t h) const { return page_row(pos, h) * code_bytes; }
    uint64_t scale_offset(uint32_t pos, uint32_t h) const {
        return uint64_t(nkv) * kKvPageTokens * code_bytes + page_row(pos, h) * scale_bytes;
    }
};

KvGeometry kv_geometry(const Runner& run, const MemoryPlan& plan, uint32_t n) {
    const ModelConfig& c = run.config();
    const kernels::KvDtype d = kernel_kv_dtype(plan.kv_dtype);
    const uint64_t code = d == kernels::KvDtype::Bf16 ? 2ull * c.head_dim : c.head_dim;
    const uint64_t scale = 2ull * uint64_t(kernels::kv_scales_per_row(d, int(c.head_dim)));
    if (code + scale != plan.kv_row_bytes)
        throw Error("cuda: KV rows of " + std::to_string(plan.kv_row_bytes) + " bytes in the plan, " +
                    std::to_string(code + scale) + " on the GPU");
    return {c.n_full_attention_layers(), c.num_key_value_heads, plan.kv_row_bytes, code, scale, run.kv_page_bytes(), n};
}

} // namespace

LaneImage save_lane_image(const Runner& run, const MemoryPlan& plan, int lane, const std::vector<int32_t>& tokens,
                          const std::vector<uint32_t>& pages) {
    cuda_check(cudaStreamSynchronize(run.stream()), "saving a lane");
    const uint32_t n = uint32_t(tokens.size());
    LaneImage img;
    img.tokens = tokens;
    img.kv_dtype = plan.kv_dtype;
    std::span<uint8_t> kv = img.add_section(LaneSectionTag::Kv, plan.lane_image_kv_bytes(n));
    const KvGeometry g = kv_geometry(run, plan, n);
    std::vector<uint8_t> page(g.page_bytes);
    for (uint32_t fl = 0; fl < g.n_full; ++fl)
        for (int value = 0; value < 2; ++value)
            for (uint32_t p = 0; p * kKvPageTokens < n; ++p) {
                const uint8_t* src = (value ? run.kv_v(fl) : run.kv_k(fl)) + uint64_t(pages[p]) * g.page_bytes;
                cuda_check(cudaMemcpy(page.data(), src, g.page_bytes, cudaMemcpyDeviceToHost), "saving KV");
                for (uint32_t pos = p * kKvPageTokens; pos < std::min(n, (p + 1) * kKvPageTokens); ++pos)
                    for (uint32_t h = 0; h < g.nkv; ++h) {
                        uint8_t* row = kv.data() + g.image_offset(fl, value, pos, h);
                        std::memcpy(row, page.data() + g.code_offset(pos, h), g.code_bytes);
                        std::memcpy(row + g.code_bytes, page.data() + g.scale_offset(pos, h), g.scale_bytes);
                    }
            }
    const ModelConfig& c = run.config();
    const uint32_t n_gdn = c.n_linear_attention_layers();
    const uint64_t ce = run.conv_elems_per_lane(), rf = run.recurrent_floats_per_lane();
    std::span<uint8_t> gdn = img.add_section(LaneSectionTag::Gdn, plan.lane_image_gdn_bytes());
    std::vector<__nv_bfloat16> conv(ce);
    float* out = reinterpret_cast<float*>(gdn.data());
    for (uint32_t l = 0; l < n_gdn; ++l) {
        if (run.f32_activations()) { // the image's own layout
            cuda_check(cudaMemcpy(out + l * ce, run.conv_state_f32(l) + lane * ce, ce * 4, cudaMemcpyDeviceToHost),
                       "saving GDN");
            continue;
        }
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
                    for (uint32_t h = 0; h < g.nkv; ++h) {
                        const uint8_t* row = img.kv().data() + g.image_offset(fl, value, pos, h);
                        std::memcpy(page.data() + g.code_offset(pos, h), row, g.code_bytes);
                        std::memcpy(page.data() + g.scale_offset(pos, h), row + g.code_bytes, g.scale_bytes);
                    }
                uint8_t* dst = (value ? run.kv_v(fl) : run.kv_k(fl)) + uint64_t(pages[p]) * g.page_bytes;
                cuda_check(cudaMemcpy(dst, page.data(), g.page_bytes, cudaMemcpyHostToDevice), "restoring KV");
            }
    const ModelConfig& c = run.config();
    const uint32_t n_gdn = c.n_linear_attention_layers();
    const uint64_t ce = run.conv_elems_per_lane(), rf = run.recurrent_floats_per_lane();
    std::vector<__nv_bfloat16> conv(ce);
    const float* in = reinterpret_cast<const float*>(img.gdn().data());
    for (uint32_t l = 0; l < n_gdn; ++l) {
        if (run.f32_activations()) {
            cuda_check(cudaMemcpy(run.conv_state_f32(l) + lane * ce, in + l * ce, ce * 4, cudaMemcpyHostToDevice),
                       "restoring GDN");
            continue;
        }
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
