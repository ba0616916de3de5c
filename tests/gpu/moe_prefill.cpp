// ninfer tests (GPU) - MoE prefill glue (kernels/moe_prefill.h): grouping (token, slot) pairs by
// expert, the row gather and the combine, against a host reference on random routes.
#include "ninfer/kernels/moe_prefill.h"
#include "tests/gpu/gpu_test_util.h"

#include <cmath>

using namespace ninfer::test;
namespace k = ninfer::kernels;

namespace {

// Random distinct top_k experts per token, skewed so that some experts get many pairs and some none.
std::vector<int32_t> random_routes(Rng& rng, int n_tokens, int top_k, int n_experts) {
    std::vector<int32_t> ids;
    for (int t = 0; t < n_tokens; ++t) {
        std::vector<int32_t> chosen;
        while (int(chosen.size()) < top_k) {
            const int e = rng.integer(0, 3) == 0 ? rng.integer(0, std::min(3, n_experts - 1))
                                                 : rng.integer(0, n_experts / 2);
            if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
        }
        ids.insert(ids.end(), chosen.begin(), chosen.end());
    }
    return ids;
}

} // namespace

TEST_CASE("moe prefill: pairs grouped by expert, stable, with offsets and inverse positions", "[moe_prefill]") {
    require_gpu();
    Rng rng(11);
    const struct { int tokens, top_k, experts; } shapes[] = {{1, 1, 4}, {1, 8, 256}, {37, 2, 8}, {300, 8, 256},
                                                            {2048, 8, 256}, {513, 4, 1024}};
    for (const auto& s : shapes) {
        INFO("tokens " << s.tokens << " top_k " << s.top_k << " experts " << s.experts);
        const int pairs = s.tokens * s.top_k;
        const std::vector<int32_t> ids = random_routes(rng, s.tokens, s.top_k, s.experts);
        DeviceBuffer<int32_t> d_ids(ids), counts(static_cast<size_t>(s.experts)), offsets(static_cast<size_t>(s.experts) + 1),
            order(static_cast<size_t>(pairs)), position(static_cast<size_t>(pairs));
        CUDA_OK(k::moe_group_by_expert(d_ids.get(), s.tokens, s.top_k, s.experts, counts.get(), offsets.get(),
                                       order.get(), position.get(), nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        // Host reference: a stable sort of pair indices by expert.
        std::vector<int32_t> ref_order(static_cast<size_t>(pairs)), ref_offsets(size_t(s.experts) + 1, 0);
        for (int p = 0; p < pairs; ++p) ref_order[size_t(p)] = p;
        std::stable_sort(ref_order.begin(), ref_order.end(), [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
        for (int32_t e : ids) ++ref_offsets[size_t(e) + 1];
        for (int e = 0; e < s.experts; ++e) ref_offsets[size_t(e) + 1] += ref_offsets[size_t(e)];
        CHECK(offsets.download() == ref_offsets);
        const std::vector<int32_t> got_order = order.download(), got_pos = position.download();
        CHECK(got_order == ref_order);
        bool inverse = true;
        for (int r = 0; r < pairs; ++r) inverse = inverse && got_pos[size_t(got_order[size_t(r)])] == r;
        CHECK(inverse);
        CHECK((d_ids.guards_intact() && offsets.guards_intact() && order.guards_intact() && position.guards_intact()));
    }
}

TEST_CASE("moe prefill: the gather equals the host bit for bit, the combine to rounding", "[moe_prefill]") {
    require_gpu();
    Rng rng(12);
    const int tokens = 77, top_k = 8, experts = 64, width = 264, stride = 272, pairs = tokens * top_k;
    const std::vector<int32_t> ids = random_routes(rng, tokens, top_k, experts);
    DeviceBuffer<int32_t> d_ids(ids), counts(experts), offsets(experts + 1), order(pairs), position(pairs);
    CUDA_OK(k::moe_group_by_expert(d_ids.get(), tokens, top_k, experts, counts.get(), offsets.get(), order.get(),
                                   position.get(), nullptr));
    const std::vector<bf16> x = rng.bf16s(size_t(tokens) * stride, -2.f, 2.f);
    DeviceBuffer<bf16> d_x(x), gathered(size_t(pairs) * stride);
    CUDA_OK(k::moe_gather_rows(d_x.get(), stride, order.get(), top_k, pairs, width, gathered.get(), stride, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<int32_t> ord = order.download(), pos = position.download();
    const std::vector<bf16> g = gathered.download();
    size_t mismatches = 0, unwritten_past_width = 0;
    for (int r = 0; r < pairs; ++r) {
        const int t = ord[size_t(r)] / top_k;
        for (int c = 0; c < width; ++c)
            mismatches += std::memcmp(&g[size_t(r) * stride + c], &x[size_t(t) * stride + c], 2) != 0;
        for (int c = width; c < stride; ++c) { // padding columns keep the 0xa5 poison
            uint16_t bits;
            std::memcpy(&bits, &g[size_t(r) * stride + c], 2);
            unwritten_past_width += bits == 0xa5a5;
        }
    }
    CHECK(mismatches == 0);
    CHECK(unwritten_past_width == size_t(pairs) * (stride - width));

    const int dim = 200;
    std::vector<float> y(size_t(pairs) * dim), w(static_cast<size_t>(pairs)), shared(size_t(tokens) * dim), score(size_t(tokens) * 8);
    for (auto& v : y) v = rng.uniform(-3.f, 3.f);
    for (auto& v : w) v = rng.uniform(0.f, 1.f);
    for (auto& v : shared) v = rng.uniform(-3.f, 3.f);
    for (auto& v : score) v = rng.uniform(-4.f, 4.f);
    DeviceBuffer<float> d_y(y), d_w(w), d_shared(shared), d_score(score), out(size_t(tokens) * dim);
    CUDA_OK(k::moe_combine_grouped(d_y.get(), dim, position.get(), d_w.get(), top_k, d_shared.get(), dim,
                                   d_score.get(), 8, out.get(), dim, dim, tokens, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> o = out.download();
    size_t combine_mismatches = 0;
    for (int t = 0; t < tokens; ++t) {
        const float sg = 1.f / (1.f + std::exp(-score[size_t(t) * 8]));
        for (int h = 0; h < dim; ++h) {
            float acc = 0.f;
            for (int j = 0; j < top_k; ++j)
                acc = std::fmaf(w[size_t(t) * top_k + j], y[size_t(pos[size_t(t) * top_k + j]) * dim + h], acc);
            const float ref = std::fmaf(sg, shared[size_t(t) * dim + h], acc);
            // expf on the device and std::exp on the host may differ by an ulp in sg.
            combine_mismatches += std::fabs(o[size_t(t) * dim + h] - ref) > 1e-5f * (1.f + std::fabs(ref));
        }
    }
    CHECK(combine_mismatches == 0);
    CHECK(out.guards_intact());
    // Bad arguments launch nothing.
    CHECK(k::moe_group_by_expert(d_ids.get(), tokens, top_k, 2000, counts.get(), offsets.get(), order.get(),
                                 position.get(), nullptr) == cudaErrorInvalidValue);
    CHECK(k::moe_gather_rows(d_x.get(), stride, order.get(), top_k, pairs, 7, gathered.get(), stride, nullptr) ==
          cudaErrorInvalidValue);
}
