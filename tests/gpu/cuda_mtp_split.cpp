// ninfer tests (GPU) - the CUDA MTP head's state after a short prompt, piece by piece against the
// CPU head, in the f32 check mode (bf16 weights): where [cuda_mtp]'s "prefills" case lost the f32
// mode's precision on the MoE fixture (GPU runs of 63d070f and 6fa6480: an 8-token prompt in one
// call, draft cosines 0.99872 / 0.99935 / 0.99958 / 0.99970 against 0.9999; 5, 13 and 150 tokens
// held, so did every decode case).
//
// The cause (session 20): the main model's last row departed in every split alike (last logits
// 0.99821, pending hidden row 0.99824; the head's K/V rows 0.99999) because the f32 mode took the
// q/k norms, the GDN gated norm and the conv taps in bf16, values these random weights do not hold,
// and that rounding turns the last token's layer-2 route (8th and 9th router logits 0.119695 /
// 0.117404, gap 2.3e-3; the CPU with those vectors rounded gives 0.99821 / 0.99824 exactly,
// tests/unit/cpu/moe_routes.cpp, cuda_mtp_diag.cpp). The f32 kernels now take them in f32. This
// case checks, for that prompt split several ways (one call with the last row's logits, no logits,
// every row's logits; 7 + 1; 4 + 4): the lane image's MtpKv section (the head's K/V rows of the
// prompt's positions and its pending hidden row, the same layout on both backends), the main
// model's last logits and the drafts, each against the CPU.
#include "tests/gpu/mtp_test_util.h"

#include <cstdio>
#include <cstring>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

struct Split {
    const char* name;
    std::vector<size_t> calls;
    LogitsOut out;
};

// bf16 row bytes as f32 values.
std::vector<float> bf16_values(std::span<const uint8_t> bytes) {
    std::vector<float> v(bytes.size() / 2);
    for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        const uint32_t u = uint32_t(h) << 16;
        std::memcpy(&v[i], &u, 4);
    }
    return v;
}

// The MtpKv sections of the two backends' images of a lane: the same positions and pending rows;
// returns the worst cosine of a K/V position's rows and of a pending hidden row.
std::pair<double, double> compare_heads(const LaneImage& gpu, const LaneImage& cpu, const MemoryPlan& plan,
                                        uint32_t H) {
    const std::span<const uint8_t> g = gpu.section(LaneSectionTag::MtpKv), c = cpu.section(LaneSectionTag::MtpKv);
    REQUIRE(g.size() >= 8);
    REQUIRE(g.size() == c.size());
    uint32_t m = 0, r = 0, mc = 0, rc = 0;
    std::memcpy(&m, g.data(), 4);
    std::memcpy(&r, g.data() + 4, 4);
    std::memcpy(&mc, c.data(), 4);
    std::memcpy(&rc, c.data() + 4, 4);
    CHECK(m == mc);
    CHECK(r == rc);
    const uint64_t per = plan.kv_mtp_bytes_per_token;
    double kv_worst = 1;
    for (uint32_t p = 0; p < m; ++p) { // K rows of every position, then V rows: per / 2 bytes a position each
        for (int value = 0; value < 2; ++value) {
            const size_t at = 8 + size_t(value) * m * (per / 2) + size_t(p) * (per / 2);
            const auto a = bf16_values(g.subspan(at, per / 2)), b = bf16_values(c.subspan(at, per / 2));
            const double cs = cosine(a, b);
            INFO("position " << p << (value ? " V" : " K"));
            CHECK(cs >= 0.9999);
            kv_worst = std::min(kv_worst, cs);
        }
    }
    double h_worst = 1;
    const size_t rows_at = 8 + size_t(m) * per;
    for (uint32_t j = 0; j < r; ++j) {
        std::vector<float> a(H), b(H);
        std::memcpy(a.data(), g.data() + rows_at + size_t(j) * H * 4, H * 4);
        std::memcpy(b.data(), c.data() + rows_at + size_t(j) * H * 4, H * 4);
        const double cs = cosine(a, b);
        INFO("pending hidden row " << j << " (position " << m + j << ")");
        CHECK(cs >= 0.99999); // the main model's final-normed row: the text path holds 1.0000000
        h_worst = std::min(h_worst, cs);
    }
    return {kv_worst, h_worst};
}

} // namespace

TEST_CASE("cuda mtp: an 8-token prompt prefilled whole or split leaves the head as the CPU's (f32 check mode)",
          "[cuda_mtp]") {
    require_gpu();
    const std::vector<Split> splits = {{"8 last", {8}, LogitsOut::Last},
                                       {"8 none", {8}, LogitsOut::None},
                                       {"8 all", {8}, LogitsOut::All},
                                       {"7+1 last", {7, 1}, LogitsOut::Last},
                                       {"4+4 last", {4, 4}, LogitsOut::Last}};
    for (const std::string& fixture : kKernelFixtures) {
        INFO(fixture);
        auto h = make_heads(fixture, TensorFormat::Bf16, true, 81); // the prefills case's weights
        const uint32_t V = h->weights.config.vocab_size, H = h->weights.config.hidden_size;
        const auto prompt = random_tokens(8, V, 7); // the prefills case's 8-token prompt and next token
        check_routes_hold(h->weights, h->plan, prompt, int32_t(8 % V), int(kDrafts));
        const std::vector<DraftRequest> req = {{1, int32_t(8 % V), int(kDrafts)}};
        h->cpu->reset_lane(1);
        std::vector<float> cpu_last;
        h->cpu->prefill(1, prompt, LogitsOut::Last, &cpu_last);
        const LaneImage cpu_img = h->cpu->save_lane(1);
        const Drafts c = draft(*h->cpu, req);
        for (const Split& s : splits) {
            INFO("split " << s.name);
            h->gpu->reset_lane(1);
            size_t at = 0;
            for (size_t n : s.calls) {
                h->gpu->prefill(1, std::span(prompt).subspan(at, n), s.out, nullptr);
                at += n;
            }
            double logits_cos = 1;
            if (s.out != LogitsOut::None) { // the main model's last row (the text path: 1.0000000)
                logits_cos = cosine(h->gpu->last_logits(1), cpu_last);
                CHECK(logits_cos >= 0.9999);
            }
            const auto [kv_cos, hidden_cos] = compare_heads(h->gpu->save_lane(1), cpu_img, h->plan, H);
            Worst worst;
            check_close(draft(*h->gpu, req), c, 0, int(kDrafts), V, kModes[0].bounds(fixture), worst);
            std::printf("RESULT cuda_mtp split %s '%s' last_logits_cosine %.7f head_kv_worst_cosine %.7f "
                        "pending_hidden_cosine %.7f drafts_worst_cosine %.7f max_kl %.3e\n",
                        fixture.c_str(), s.name, logits_cos, kv_cos, hidden_cos, worst.cos, worst.kl);
        }
    }
}
