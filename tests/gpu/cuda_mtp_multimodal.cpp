// ninfer tests (GPU) - the CUDA MTP head on multimodal lanes (backend.h prefill_with, issues 28 and
// 31) against the CPU head (core/cpu/mtp_head.h "Multimodal lanes", docs/MODEL.md §8): position t
// at the main model's M-RoPE position of token t, a placeholder x_{t+1}'s input the tower's row,
// text positions (+ the lane's RoPE offset) after the span. Random heads on the kernel fixtures'
// shapes (mtp_test_util.h) with the tiny random tower's rows (multimodal_util.h) at an image, two
// images and a video; prefilled whole and in chunks that split placeholder runs and take both
// prefill paths (decode-kernel blocks under 16 tokens, tensor-core chunks, the head's pending row
// keeping its position across calls); drafts after the prefill and after decode steps; lane images
// between the backends; greedy MTP speculation through the scheduler equal to plain decoding.
// The CUDA head of main before this test took text positions and the placeholder's own embedding:
// its drafts leave the CPU's far below the bounds below.
#include "core/engine/scheduler.h"
#include "core/engine/vision_prefill.h"
#include "tests/gpu/multimodal_util.h"
#include "tests/gpu/mtp_test_util.h"

#include <cstdio>
#include <cstring>
#include <map>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

// Prefills p on lane `lane` in calls of the given lengths (the rest in one; empty: whole), the
// last call with its logits, the others without.
void prefill_split(Backend& b, int lane, const MmPrompt& p, const VisionPrefill& vp, const std::vector<size_t>& split) {
    b.reset_lane(lane);
    const size_t n = p.ids.size();
    size_t at = 0;
    for (size_t i = 0; at < n; ++i) {
        const size_t len = i < split.size() ? std::min(split[i], n - at) : n - at;
        b.prefill_with(lane, std::span(p.ids).subspan(at, len), vp.chunk(at, len),
                       at + len == n ? LogitsOut::Last : LogitsOut::None, nullptr);
        at += len;
    }
}

int32_t argmax_of(const std::vector<float>& v) {
    return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

} // namespace

TEST_CASE("cuda mtp multimodal: drafts after images and a video follow the CPU head, whole and in chunks",
          "[cuda_mtp_multimodal]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures)
        for (const Mode& mode : kModes) {
            INFO(fixture << ", " << mode.name);
            auto h = make_heads(fixture, mode.format, mode.f32, 88);
            Tower tower(h->weights.config.hidden_size);
            const uint32_t V = h->weights.config.vocab_size;
            Worst worst;
            // Whole (tensor-core chunks; decode-kernel blocks in the f32 mode); 10 + 20 + rest: a
            // block ending inside the first image, a tensor-core chunk taking its pending row, a
            // block; 17 + rest: two tensor-core chunks split inside the image.
            const std::vector<std::vector<size_t>> splits = {{}, {10, 20}, {17}};
            for (const MmPrompt& p : prompts(tower.vc)) {
                INFO("prompt " << p.name << " (" << p.ids.size() << " tokens)");
                const VisionPrefill vp = prepare_vision_prefill(p.ids, p.media, *tower.encoder, 0);
                prefill_split(*h->cpu, 0, p, vp, {});
                const int32_t next = argmax_of(h->cpu->last_logits(0));
                const Drafts want = draft(*h->cpu, {{0, next, int(kDrafts)}});
                for (const auto& split : splits) {
                    INFO("split " << (split.empty() ? std::string("whole") : std::to_string(split[0]) + "+..."));
                    prefill_split(*h->gpu, 1, p, vp, split);
                    check_close(draft(*h->gpu, {{1, next, int(kDrafts)}}), want, 0, int(kDrafts), V,
                                mode.bounds(fixture), worst);
                }
                // Three decode steps after the span (text positions + the lane's offset; the GPU head,
                // lazy, leaves their positions pending), then drafts.
                for (int32_t t : {next, int32_t(next * 7 % V), int32_t(next * 13 % V)}) {
                    const DecodeStep st = step(0, t), sg = step(1, t);
                    h->cpu->decode(std::span(&st, 1));
                    h->gpu->decode(std::span(&sg, 1));
                }
                check_close(draft(*h->gpu, {{1, 5, 3}}), draft(*h->cpu, {{0, 5, 3}}), 0, 3, V, mode.bounds(fixture),
                            worst);
            }
            worst.check_mean(mode.bounds(fixture));
            worst.report("multimodal " + fixture + " (" + mode.name + ")");
        }
}

TEST_CASE("cuda mtp multimodal: lane images of image lanes move the head between the backends",
          "[cuda_mtp_multimodal]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        INFO(fixture);
        const Mode& mode = kModes[1]; // serving, bf16 weights
        auto h = make_heads(fixture, mode.format, mode.f32, 89);
        Tower tower(h->weights.config.hidden_size);
        const uint32_t V = h->weights.config.vocab_size;
        const MmPrompt p = prompts(tower.vc)[1]; // two images
        const VisionPrefill vp = prepare_vision_prefill(p.ids, p.media, *tower.encoder, 0);
        prefill_split(*h->cpu, 0, p, vp, {});
        prefill_split(*h->gpu, 0, p, vp, {20});
        const LaneImage from_gpu = h->gpu->save_lane(0), from_cpu = h->cpu->save_lane(0);
        REQUIRE(from_gpu.find(LaneSectionTag::MtpKv));
        REQUIRE(from_gpu.find(LaneSectionTag::RopePosition));
        uint32_t m_gpu = 0, m_cpu = 0;
        std::memcpy(&m_gpu, from_gpu.section(LaneSectionTag::MtpKv).data(), 4);
        std::memcpy(&m_cpu, from_cpu.section(LaneSectionTag::MtpKv).data(), 4);
        CHECK(m_gpu == p.ids.size() - 1); // the prompt's last position pending on both
        CHECK(m_cpu == m_gpu);
        h->cpu->restore_lane(1, from_gpu);
        h->gpu->restore_lane(1, from_cpu);
        CHECK(*h->cpu->save_lane(1).find(LaneSectionTag::MtpKv) == *from_gpu.find(LaneSectionTag::MtpKv));
        CHECK(*h->gpu->save_lane(1).find(LaneSectionTag::MtpKv) == *from_cpu.find(LaneSectionTag::MtpKv));
        const Drafts c0 = draft(*h->cpu, {{0, 9, 3}});
        Worst worst;
        check_close(draft(*h->gpu, {{0, 9, 3}}), c0, 0, 3, V, mode.bounds(fixture), worst);
        check_close(draft(*h->gpu, {{1, 9, 3}}), c0, 0, 3, V, mode.bounds(fixture), worst); // from the CPU's image
        check_close(draft(*h->gpu, {{0, 9, 3}}), draft(*h->cpu, {{1, 9, 3}}), 0, 3, V, mode.bounds(fixture),
                    worst); // the CPU from the GPU's image
        worst.report("multimodal images " + fixture);
    }
}

namespace {

struct TopSink final : GenerationSink {
    std::vector<int32_t> tokens;
    std::vector<float> gaps; // top-2 logprob gap of each token's row (plain runs ask for 2)
    bool finished = false;
    TokenVerdict on_token(const DecodeResult& r) override {
        tokens.push_back(r.token);
        gaps.push_back(r.top_logprobs.size() >= 2 ? r.top_logprobs[0].second - r.top_logprobs[1].second : 1e9f);
        return TokenVerdict::Continue;
    }
    void on_finished(const GenerationSummary&) override { finished = true; }
    void on_rejected(RejectReason, const std::string& why) override { FAIL("rejected: " << why); }
};

// The three prompts at once through the scheduler on a fresh CUDA backend (prefill chunks of 16:
// tensor-core chunks and decode-kernel blocks), 20 tokens each.
std::map<size_t, std::shared_ptr<TopSink>> run_prompts(const Heads& h, VisionEncoder& tower,
                                                       const std::vector<MmPrompt>& ps, SpeculativeConfig spec,
                                                       EngineStats& stats) {
    auto gpu = make_cuda_backend(h.weights, h.plan);
    SchedulerOptions o;
    o.max_context = h.plan.max_context;
    o.prefill_chunk = 16;
    o.speculative = spec;
    o.vision = &tower;
    Scheduler s(*gpu, o, stats);
    std::map<size_t, std::shared_ptr<TopSink>> sinks;
    for (size_t i = 0; i < ps.size(); ++i) {
        GenerationRequest g;
        g.id = i + 1;
        g.prompt = ps[i].ids;
        g.media = ps[i].media;
        g.max_tokens = 20;
        g.n_top_logprobs = spec.on() ? 0 : 2;
        g.sink = sinks[i] = std::make_shared<TopSink>();
        s.submit(std::move(g));
    }
    for (int guard = 0; guard < 100000 && s.has_work(); ++guard)
        s.step();
    REQUIRE_FALSE(s.has_requests());
    return sinks;
}

} // namespace

TEST_CASE("cuda mtp multimodal: greedy MTP speculation after images and a video equals plain decoding",
          "[cuda_mtp_multimodal]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        auto h = make_heads(fixture, TensorFormat::Bf16, false, 90);
        Tower tower(h->weights.config.hidden_size);
        const std::vector<MmPrompt> ps = prompts(tower.vc);
        EngineStats plain_stats;
        const auto plain = run_prompts(*h, *tower.encoder, ps, {}, plain_stats);
        for (int k : {1, 3, int(kDrafts)}) {
            INFO(fixture << " mtp:" << k);
            EngineStats stats;
            const auto spec = run_prompts(*h, *tower.encoder, ps, {SpeculativeKind::Mtp, k}, stats);
            size_t near_ties = 0;
            for (const auto& [i, a] : plain) {
                INFO("prompt " << ps[i].name);
                const TopSink& b = *spec.at(i);
                REQUIRE(a->finished);
                REQUIRE(b.finished);
                size_t d = 0;
                while (d < a->tokens.size() && d < b.tokens.size() && a->tokens[d] == b.tokens[d]) ++d;
                if (d == a->tokens.size() && d == b.tokens.size()) continue;
                // Leaving the plain tokens is allowed only at a near tie of the plain run (issue 28).
                INFO("first differing token " << d);
                REQUIRE(d < a->tokens.size());
                CHECK(a->gaps[d] < 0.01f);
                ++near_ties;
            }
            CHECK(stats.n_spec_draft_tokens_total > 0);
            CHECK(stats.n_spec_accepted_tokens_total <= stats.n_spec_draft_tokens_total);
            std::printf("RESULT cuda_mtp multimodal %s mtp:%d drafted %llu accepted %llu near_tie_departures %zu\n",
                        fixture.c_str(), k, (unsigned long long)stats.n_spec_draft_tokens_total.load(),
                        (unsigned long long)stats.n_spec_accepted_tokens_total.load(), near_ties);
        }
    }
}
