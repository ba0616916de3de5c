// ninfer tests (GPU) - lane images carry the MTP head (the MtpKv section) between the CPU and CUDA
// backends, byte for byte, for bf16, fp8 and int8 KV, and the restored lanes draft as the saved
// ones (helpers: mtp_test_util.h).
#include "tests/gpu/mtp_test_util.h"

#include <cstdio>
#include <cstring>
#include <string>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("cuda mtp: lane images carry the head between the CPU and CUDA backends", "[cuda_mtp_images]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        INFO(fixture);
        const Mode& mode = kModes[1]; // serving, bf16 weights
        auto h = make_heads(fixture, mode.format, mode.f32, 85);
        const uint32_t V = h->weights.config.vocab_size;
        const auto prompt = random_tokens(90, V, 70);
        for (Backend* b : {h->cpu.get(), h->gpu.get()}) {
            b->prefill(0, prompt, LogitsOut::Last, nullptr);
            b->decode(std::vector<DecodeStep>{step(0, 21)});
            b->decode(std::vector<DecodeStep>{step(0, 22)}); // two positions pending
        }
        const LaneImage from_gpu = h->gpu->save_lane(0), from_cpu = h->cpu->save_lane(0);
        REQUIRE(from_gpu.find(LaneSectionTag::MtpKv));
        REQUIRE(from_cpu.find(LaneSectionTag::MtpKv));
        // The CPU head has taken every position but the last; the GPU's, lazy, holds three rows.
        uint32_t m_gpu = 0, m_cpu = 0;
        std::memcpy(&m_gpu, from_gpu.section(LaneSectionTag::MtpKv).data(), 4);
        std::memcpy(&m_cpu, from_cpu.section(LaneSectionTag::MtpKv).data(), 4);
        CHECK(m_cpu == prompt.size() + 1);
        CHECK(m_gpu == prompt.size() - 1);
        h->cpu->restore_lane(1, from_gpu);
        h->gpu->restore_lane(1, from_cpu);
        // One layout: what a backend restored it saves back byte for byte.
        CHECK(*h->cpu->save_lane(1).find(LaneSectionTag::MtpKv) == *from_gpu.find(LaneSectionTag::MtpKv));
        CHECK(*h->gpu->save_lane(1).find(LaneSectionTag::MtpKv) == *from_cpu.find(LaneSectionTag::MtpKv));
        const std::vector<DraftRequest> at0 = {{0, 23, 3}}, at1 = {{1, 23, 3}};
        const Drafts g0 = draft(*h->gpu, at0), c0 = draft(*h->cpu, at0);
        const Drafts c1 = draft(*h->cpu, at1), g1 = draft(*h->gpu, at1);
        Worst worst;
        check_close(g0, c0, 0, 3, V, mode.bounds(fixture), worst);
        check_close(g1, c0, 0, 3, V, mode.bounds(fixture), worst); // the GPU from the CPU's image
        check_close(g0, c1, 0, 3, V, mode.bounds(fixture), worst); // the CPU from the GPU's image
        worst.report("images " + fixture);
    }
}

TEST_CASE("cuda mtp: fp8 and int8 KV hold the head's K/V in the pool's dtype; images move both ways", "[cuda_mtp_images]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures)
        for (KvDtype kv : {KvDtype::Fp8, KvDtype::Int8}) {
            INFO(fixture << " kv " << kv_dtype_name(kv));
            auto h = make_heads(fixture, TensorFormat::Bf16, false, 86, kv);
            const uint32_t V = h->weights.config.vocab_size;
            const auto prompt = random_tokens(75, V, 90);
            for (Backend* b : {h->cpu.get(), h->gpu.get()}) {
                b->prefill(0, prompt, LogitsOut::Last, nullptr);
                b->decode(std::vector<DecodeStep>{step(0, 31)});
            }
            const std::vector<DraftRequest> req = {{0, 32, 3}};
            const Drafts g = draft(*h->gpu, req), c = draft(*h->cpu, req);
            // The GPU quantises the head's K/V from bf16 projections, the CPU from f32 ones, so a
            // code may differ by one step (formats_e2e's KV bound: mean KL 2e-2).
            double kl_sum = 0;
            for (int j = 0; j < 3; ++j)
                kl_sum += kl(c.logits[0], g.logits[0], size_t(j) * V, V) / 3;
            std::printf("RESULT cuda_mtp kv_%s %s mean_kl_vs_cpu %.3e\n", std::string(kv_dtype_name(kv)).c_str(),
                        fixture.c_str(), kl_sum);
            CHECK(kl_sum < 2e-2);
            // GPU -> CPU -> GPU: the same bytes back, and the GPU drafts as before (the draft row
            // now runs alone, not beside the catch-up row of position 74).
            const LaneImage img = h->gpu->save_lane(0);
            h->cpu->restore_lane(1, img);
            const LaneImage back = h->cpu->save_lane(1);
            CHECK(*back.find(LaneSectionTag::MtpKv) == *img.find(LaneSectionTag::MtpKv));
            h->gpu->restore_lane(2, back);
            const Drafts g2 = draft(*h->gpu, {{2, 32, 3}});
            CHECK(g2.ids[0] == g.ids[0]);
            CHECK(cosine(g2.logits[0], g.logits[0]) >= 0.99999);
        }
}
