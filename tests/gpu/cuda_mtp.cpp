// ninfer tests (GPU) - the CUDA backend's MTP head (draft_mtp, docs/MODEL.md §8) against the CPU
// head on the same weights: random heads (InMemoryModel, with_mtp) on the kernel fixtures' dense and
// MoE shapes (the committed checkpoints carry no mtp.* tensors) and at the 27B's widths (4 layers of
// synthetic q4 weights, decode_bench.h), after prefills of several lengths (the decode kernels'
// blocks, the tensor-core chunks, several calls), after decode steps (pipelined, past the head's
// ring); drafts repeat and change no lane state; lane images with and without the head on the GPU
// (between the backends: cuda_mtp_images.cpp).
#include "core/cuda/decode_bench.h"
#include "tests/gpu/mtp_test_util.h"

#include <cstdio>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("cuda mtp: drafts follow the CPU head after prefills of several lengths", "[cuda_mtp]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures)
        for (const Mode& mode : kModes) {
            INFO(fixture << ", " << mode.name);
            auto h = make_heads(fixture, mode.format, mode.f32, 81);
            Worst worst;
            const uint32_t V = h->weights.config.vocab_size;
            // 1: no catch-up; 5, 8, 13: decode-kernel blocks (13 spans two); 150: tensor-core chunks of
            // 64 (block path in the f32 mode); 40 + 110: two prefill calls.
            const std::vector<std::vector<size_t>> shapes = {{1}, {5}, {8}, {13}, {150}, {40, 110}};
            uint64_t seed = 5;
            for (const auto& calls : shapes) {
                size_t total = 0;
                for (size_t c : calls)
                    total += c;
                INFO("prompt of " << total << " tokens in " << calls.size() << " call(s)");
                const auto prompt = random_tokens(total, V, seed++);
                if (mode.f32)
                    check_routes_hold(h->weights, h->plan, prompt, int32_t(seed % V), int(kDrafts));
                for (Backend* b : {h->cpu.get(), h->gpu.get()}) {
                    b->reset_lane(1);
                    size_t at = 0;
                    for (size_t c : calls) {
                        b->prefill(1, std::span(prompt).subspan(at, c), LogitsOut::Last, nullptr);
                        at += c;
                    }
                }
                const std::vector<DraftRequest> req = {{1, int32_t(seed % V), int(kDrafts)}};
                check_close(draft(*h->gpu, req), draft(*h->cpu, req), 0, int(kDrafts), V, mode.bounds(fixture),
                            worst);
            }
            worst.check_mean(mode.bounds(fixture));
            worst.report("prefills " + fixture + " (" + mode.name + ")");
        }
}

TEST_CASE("cuda mtp: after decode steps, a batch of lanes with different k drafts as the CPU", "[cuda_mtp]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures)
        for (const Mode& mode : kModes) {
            INFO(fixture << ", " << mode.name);
            auto h = make_heads(fixture, mode.format, mode.f32, 82);
            Worst worst;
            const uint32_t V = h->weights.config.vocab_size;
            const size_t lens[3] = {20, 70, 9};
            for (int lane = 0; lane < 3; ++lane) {
                const auto prompt = random_tokens(lens[lane], V, 30 + uint64_t(lane));
                h->cpu->prefill(lane, prompt, LogitsOut::Last, nullptr);
                h->gpu->prefill(lane, prompt, LogitsOut::Last, nullptr);
            }
            // Three batched decode steps of the same tokens on both (graph replay on the GPU), the
            // second after a draft (which consumes the pending rows), the others without.
            const auto fed = random_tokens(9, V, 40);
            for (int s = 0; s < 3; ++s) {
                std::vector<DecodeStep> steps;
                for (int lane = 0; lane < 3; ++lane)
                    steps.push_back(step(lane, fed[size_t(s * 3 + lane)]));
                h->cpu->decode(steps);
                h->gpu->decode(steps);
                if (s == 0) {
                    const std::vector<DraftRequest> one = {{2, 7, 2}};
                    check_close(draft(*h->gpu, one), draft(*h->cpu, one), 0, 2, V, mode.bounds(fixture), worst);
                }
            }
            // Lane 0 has 4 positions pending: a prefill chunk now takes the catch-up on the decode
            // kernels, its rows staged from the chunk's (the tensor-core chunk runs only the
            // head's first pending position).
            const auto more = random_tokens(20, V, 41);
            h->cpu->prefill(0, more, LogitsOut::Last, nullptr);
            h->gpu->prefill(0, more, LogitsOut::Last, nullptr);
            const std::vector<DraftRequest> req = {{0, 11, 1}, {1, 12, 3}, {2, 13, 4}};
            const Drafts g = draft(*h->gpu, req), c = draft(*h->cpu, req);
            for (size_t i = 0; i < req.size(); ++i) {
                INFO("lane " << req[i].lane);
                check_close(g, c, i, req[i].k, V, mode.bounds(fixture), worst);
                // In a batch as alone.
                const Drafts alone = draft(*h->gpu, {req[i]});
                CHECK(alone.ids[0] == g.ids[i]);
                CHECK(cosine(alone.logits[0], g.logits[i]) >= 0.99999);
            }
            worst.check_mean(mode.bounds(fixture));
            worst.report("decodes " + fixture + " (" + mode.name + ")");
        }
}

TEST_CASE("cuda mtp: drafting repeats and changes no lane state; a restored lane waits for a decode",
          "[cuda_mtp]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        INFO(fixture);
        auto h = make_heads(fixture, TensorFormat::Bf16, false, 83);
        Backend& gpu = *h->gpu;
        const uint32_t V = h->weights.config.vocab_size;
        const auto prompt = random_tokens(100, V, 50);
        gpu.prefill(0, prompt, LogitsOut::Last, nullptr);
        gpu.decode(std::vector<DecodeStep>{step(0, 3)});
        const std::vector<float> before = gpu.last_logits(0);
        const std::vector<DraftRequest> req = {{0, 9, int(kDrafts)}};
        const Drafts a = draft(gpu, req), b = draft(gpu, req);
        REQUIRE(a.ids[0].size() == kDrafts);
        CHECK(a.ids[0] == b.ids[0]);
        CHECK(cosine(a.logits[0], b.logits[0]) >= 0.99999);
        CHECK(gpu.lane_length(0) == prompt.size() + 1);
        CHECK(gpu.last_logits(0) == before);
        // The lane goes on as if nothing was drafted: its next step equals a fresh lane's.
        gpu.decode(std::vector<DecodeStep>{step(0, 9)});
        gpu.prefill(1, prompt, LogitsOut::Last, nullptr);
        gpu.decode(std::vector<DecodeStep>{step(1, 3)});
        gpu.decode(std::vector<DecodeStep>{step(1, 9)});
        CHECK(cosine(gpu.last_logits(0), gpu.last_logits(1)) >= 0.99999);
        const std::vector<DraftRequest> both = {{0, 4, 2}, {1, 4, 2}};
        const Drafts d = draft(gpu, both);
        CHECK(d.ids[0] == d.ids[1]);
        // Images carry the head (MtpKv): a lane restored from one, synchronous or asynchronous,
        // drafts at once what the lane saved drafts.
        const LaneImage img = gpu.save_lane(0);
        REQUIRE(img.find(LaneSectionTag::MtpKv));
        LaneImage async_img;
        gpu.save_lane_async(0, [&](LaneImage i) { async_img = std::move(i); });
        gpu.poll_saves(true);
        CHECK(async_img == img);
        gpu.restore_lane(2, img);
        gpu.restore_lane(3, async_img);
        const Drafts o = draft(gpu, {{0, 5, 3}}), r2 = draft(gpu, {{2, 5, 3}}), r3 = draft(gpu, {{3, 5, 3}});
        CHECK(r2.ids[0] == o.ids[0]);
        CHECK(r3.ids[0] == o.ids[0]);
        CHECK(cosine(r2.logits[0], o.logits[0]) >= 0.99999);
        // Without the section: no drafts until its next decode.
        LaneImage bare = img;
        std::erase_if(bare.sections, [](const LaneSection& x) { return x.tag == LaneSectionTag::MtpKv; });
        gpu.restore_lane(2, bare);
        CHECK(draft(gpu, {{2, 4, 2}}).ids[0].empty());
        gpu.decode(std::vector<DecodeStep>{step(2, 4)});
        CHECK(draft(gpu, {{2, 5, 2}}).ids[0].size() == 2);
        // Bad requests.
        CHECK_THROWS_WITH(gpu.draft_mtp(std::vector<DraftRequest>{{0, 1, int(kDrafts) + 1}}, nullptr),
                          Catch::Contains("drafts asked"));
        CHECK_THROWS_WITH(gpu.draft_mtp(std::vector<DraftRequest>{{0, int32_t(V), 1}}, nullptr),
                          Catch::Contains("outside the vocabulary"));
        CHECK_THROWS_WITH(gpu.draft_mtp(std::vector<DraftRequest>{{0, 1, 1}, {0, 2, 1}}, nullptr),
                          Catch::Contains("twice"));
    }
}

TEST_CASE("cuda mtp: a lane decoding 45 steps without drafts (pipelined) drafts as the CPU", "[cuda_mtp]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        INFO(fixture);
        const Mode& mode = kModes[1]; // serving, bf16 weights
        auto h = make_heads(fixture, mode.format, mode.f32, 87);
        const uint32_t V = h->weights.config.vocab_size;
        const auto prompt = random_tokens(30, V, 95);
        h->cpu->prefill(0, prompt, LogitsOut::Last, nullptr);
        h->gpu->prefill(0, prompt, LogitsOut::Last, nullptr);
        // Pipelined greedy steps on the GPU, each taking the previous step's sample on the device
        // (kTokenOfLastStep), so the lane's last token is unknown on the host when the head
        // catches up; 45 positions in all, more than the head's ring of 32 rows, which it would
        // skip without catching up. The CPU then decodes the same tokens.
        std::vector<int32_t> fed = {17};
        h->gpu->decode_begin(std::vector<DecodeStep>{step(0, fed[0])});
        for (int i = 1; i < 45; ++i) {
            h->gpu->decode_begin(std::vector<DecodeStep>{step(0, kTokenOfLastStep)});
            fed.push_back(h->gpu->decode_end().at(0).token);
        }
        h->gpu->decode_end();
        REQUIRE(h->gpu->lane_length(0) == prompt.size() + 45);
        for (int32_t t : fed)
            h->cpu->decode(std::vector<DecodeStep>{step(0, t)});
        const std::vector<DraftRequest> req = {{0, 5, 3}};
        Worst worst;
        check_close(draft(*h->gpu, req), draft(*h->cpu, req), 0, 3, V, mode.bounds(fixture), worst);
        worst.report("long decode " + fixture);
    }
}

TEST_CASE("cuda mtp: a plan without mtp has no head; a plan with mtp needs the weights' head", "[cuda_mtp]") {
    require_gpu();
    const ModelConfig config = fixture_config("kernel/dense");
    auto plain = InMemoryModel::random(config, {.seed = 84});
    const ModelWeights w = plain->weights();
    MemoryRequest r;
    r.max_context = 256;
    r.available_bytes = 1ull << 34;
    r.weight_bytes = w.stored_bytes();
    auto gpu = make_cuda_backend(w, MemoryPlan::make(config, r));
    CHECK_FALSE(gpu->has_mtp());
    CHECK_THROWS_WITH(gpu->draft_mtp(std::vector<DraftRequest>{{0, 1, 1}}, nullptr), Catch::Contains("no MTP head"));
    r.mtp = true;
    r.max_draft_tokens = 2;
    CHECK_THROWS_WITH(make_cuda_backend(w, MemoryPlan::make(config, r)), Catch::Contains("no MTP head"));
}

TEST_CASE("cuda mtp at the 27B's widths (4 layers + the head, q4): drafts follow the CPU head", "[cuda_mtp]") {
    require_gpu();
    const auto sw = synthetic_device_weights("qwen3.6-27b", "q4", 12, 4, true);
    const ModelWeights& w = sw->weights;
    REQUIRE(w.config.hidden_size == 5120);
    REQUIRE(w.mtp);
    MemoryRequest mr;
    mr.max_context = 256;
    mr.max_concurrency = 2;
    mr.kv_capacity_tokens = 2 * 256;
    mr.weight_bytes = w.stored_bytes();
    mr.available_bytes = cuda_free_bytes();
    mr.margin_bytes = 2ull << 30;
    mr.prefill_chunk = 64; // 70 tokens: one tensor-core chunk, then a decode-kernel block
    mr.mtp = true;
    mr.max_draft_tokens = 3;
    mr.backend_workspace_bytes = cuda_backend_workspace_bytes(w.config, mr);
    const MemoryPlan plan = MemoryPlan::make(w.config, mr);
    auto cpu = make_cpu_backend(w, plan);
    auto gpu = make_cuda_backend(w, plan);
    REQUIRE(gpu->has_mtp());
    const uint32_t V = w.config.vocab_size;
    for (int lane = 0; lane < 2; ++lane) {
        const auto prompt = random_tokens(lane == 0 ? 70 : 12, V, 60 + uint64_t(lane));
        cpu->prefill(lane, prompt, LogitsOut::Last, nullptr);
        gpu->prefill(lane, prompt, LogitsOut::Last, nullptr);
    }
    for (int s = 0; s < 2; ++s) {
        const std::vector<DecodeStep> steps = {step(0, 1000 + s), step(1, 2000 + s)};
        cpu->decode(steps);
        gpu->decode(steps);
    }
    const std::vector<DraftRequest> req = {{0, 3000, 3}, {1, 4000, 3}};
    const Drafts g = draft(*gpu, req), c = draft(*cpu, req);
    Worst worst;
    for (size_t i = 0; i < req.size(); ++i) {
        INFO("lane " << req[i].lane);
        check_close(g, c, i, 3, V, {0.99, 0, 1e-3}, worst); // q4: int8 activations (W4A8)
    }
    worst.report("27B widths q4");
}
