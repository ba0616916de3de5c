// ninfer GPU tests - kernels::vision_flash_attention (the vision tower's flash attention) against a
// host reference in double over the same bf16 q, k and v: head sizes 8..128 (padded to 16 inside),
// segments of whole and ragged 64-key tiles, several segments and heads, output at cosine >= 0.9999
// and within bf16 rounding of P and of the output; no write outside the output columns; and the
// refusals of what it cannot take.
#include "ninfer/kernels/vision.h"
#include "tests/gpu/gpu_test_util.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace ninfer::test;

namespace {

float bf16_value(float x) { return __bfloat162float(__float2bfloat16(x)); }

struct FlashCase {
    int segment, segments, heads, head_dim;
};

// out[r][h*hd + d] = sum_j softmax_j(q_r . k_j / sqrt(hd)) v_j[d] over the row's segment.
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              const FlashCase& c, int64_t ld) {
    const int rows = c.segment * c.segments;
    std::vector<double> out(size_t(rows) * c.heads * c.head_dim, 0.0), p(size_t(c.segment));
    for (int r = 0; r < rows; ++r) {
        const int first = r / c.segment * c.segment;
        for (int h = 0; h < c.heads; ++h) {
            double m = -INFINITY, sum = 0;
            for (int j = 0; j < c.segment; ++j) {
                double dot = 0;
                for (int d = 0; d < c.head_dim; ++d)
                    dot += double(q[r * ld + h * c.head_dim + d]) * k[(first + j) * ld + h * c.head_dim + d];
                p[size_t(j)] = dot / std::sqrt(double(c.head_dim));
                m = std::max(m, p[size_t(j)]);
            }
            for (double& x : p) sum += (x = std::exp(x - m));
            for (int j = 0; j < c.segment; ++j)
                for (int d = 0; d < c.head_dim; ++d)
                    out[(size_t(r) * c.heads + h) * c.head_dim + d] +=
                        p[size_t(j)] / sum * v[(first + j) * ld + h * c.head_dim + d];
        }
    }
    return out;
}

} // namespace

TEST_CASE("vision flash attention equals the reference over bf16 inputs", "[vision_flash]") {
    require_gpu();
    const FlashCase cases[] = {{64, 1, 1, 72},  {300, 2, 2, 72}, {256, 3, 3, 72}, {97, 2, 2, 8},
                               {130, 1, 2, 16}, {200, 2, 1, 64}, {333, 1, 2, 128}, {1, 4, 2, 40}};
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.f, 1.f);
    double worst = 1;
    for (const FlashCase& c : cases) {
        INFO("segment " << c.segment << " x " << c.segments << ", heads " << c.heads << ", head_dim " << c.head_dim);
        const int rows = c.segment * c.segments, width = c.heads * c.head_dim;
        const int64_t ld = width + 8; // a row stride wider than the heads, as the tower's
        std::vector<float> q(size_t(rows) * ld), k(q.size()), v(q.size());
        // Scaled so scores spread over several units: a softmax far from uniform.
        for (auto* t : {&q, &k, &v})
            for (float& x : *t) x = bf16_value(normal(rng) * (t == &v ? 1.f : 1.6f));
        std::vector<__nv_bfloat16> q16(q.size()), k16(q.size()), v16(q.size());
        for (size_t i = 0; i < q.size(); ++i) {
            q16[i] = __float2bfloat16(q[i]);
            k16[i] = __float2bfloat16(k[i]);
            v16[i] = __float2bfloat16(v[i]);
        }
        DeviceBuffer<__nv_bfloat16> dq(q16), dk(k16), dv(v16), dout(size_t(rows) * ld);
        REQUIRE(ninfer::kernels::vision_flash_attention(dq.get(), dk.get(), dv.get(), ld, rows, c.segment, c.heads,
                                                        c.head_dim, dout.get(), ld, nullptr) == cudaSuccess);
        CUDA_OK(cudaDeviceSynchronize());
        CHECK(dout.guards_intact());
        const std::vector<__nv_bfloat16> got = dout.download();
        const std::vector<double> want = reference(q, k, v, c, ld);
        double dot = 0, gg = 0, ww = 0, max_err = 0;
        size_t untouched = 0;
        for (int r = 0; r < rows; ++r) {
            for (int i = 0; i < width; ++i) {
                const double g = __bfloat162float(got[size_t(r) * ld + i]), w = want[size_t(r) * width + i];
                dot += g * w, gg += g * g, ww += w * w;
                max_err = std::max(max_err, std::abs(g - w));
            }
            for (int64_t i = width; i < ld; ++i) // the padding columns keep the buffer's fill
                untouched += reinterpret_cast<const uint16_t&>(got[size_t(r) * ld + i]) == 0xa5a5;
        }
        const double cs = dot / std::sqrt(gg * ww);
        CHECK(untouched == size_t(rows) * (ld - width));
        CHECK(cs >= 0.9999);
        CHECK(max_err < 0.03); // |v| ~ 1: bf16 P (2^-9 relative) and the bf16 output's rounding
        worst = std::min(worst, cs);
    }
    std::printf("RESULT vision_flash worst_cosine %.7f\n", worst);
}

TEST_CASE("vision flash attention refuses what it cannot take", "[vision_flash]") {
    require_gpu();
    DeviceBuffer<__nv_bfloat16> b(4096);
    using ninfer::kernels::vision_flash_attention;
    CHECK(vision_flash_attention(b.get(), b.get(), b.get(), 72, 10, 3, 1, 72, b.get(), 72, nullptr) ==
          cudaErrorInvalidValue); // rows not whole segments
    CHECK(vision_flash_attention(b.get(), b.get(), b.get(), 36, 8, 8, 1, 36, b.get(), 36, nullptr) ==
          cudaErrorInvalidValue); // head size not a multiple of 8
    CHECK(vision_flash_attention(b.get(), b.get(), b.get(), 144, 8, 8, 1, 144, b.get(), 144, nullptr) ==
          cudaErrorInvalidValue); // head size past 128
    CHECK(vision_flash_attention(b.get(), b.get(), b.get(), 76, 8, 8, 1, 72, b.get(), 76, nullptr) ==
          cudaErrorInvalidValue); // row stride not a multiple of 8
    CHECK(vision_flash_attention(b.get() + 1, b.get(), b.get(), 72, 8, 8, 1, 72, b.get(), 72, nullptr) ==
          cudaErrorInvalidValue); // q not 16-byte aligned
    CHECK(!ninfer::kernels::vision_flash_supported(0));
    CHECK(ninfer::kernels::vision_flash_supported(72));
}
