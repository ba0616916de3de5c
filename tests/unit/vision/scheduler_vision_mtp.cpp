// ninfer tests - MTP speculation on requests with media (issues 28 and 31), on the CPU backend: the
// head drafts over image and video lanes (the tower's rows and M-RoPE positions, core/cpu/mtp_head.h)
// and greedy output with mtp:1 and mtp:3 equals plain decoding, token for token, with several media
// requests decoding together (tests/gpu/cuda_mtp_multimodal.cpp holds the CUDA head to this one).
#include "core/engine/scheduler.h"
#include "core/vision/cpu_vision_encoder.h"
#include "tests/unit/cpu/tiny_models.h"
#include "tests/unit/engine/fake_backend.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

#include <map>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

// A tiny model with an MTP head and the tiny tower; 3 lanes.
struct MtpRig {
    ModelConfig c = tiny_config(false);
    std::unique_ptr<InMemoryModel> model = InMemoryModel::random(c, {.seed = 12, .with_mtp = true});
    ModelWeights w = model->weights();
    InMemoryModel vision_model;
    VisionConfig vc = tiny_vision_config(c.hidden_size);
    VisionWeights vw = random_vision_weights(vision_model, vc, 9);
    std::unique_ptr<VisionEncoder> encoder = make_cpu_vision_encoder(vw, 2, kImagePad, kVideoPad);
    MemoryPlan plan = tiny_speculative_plan(c, 3, 3, true, KvDtype::F32, 256);
};

// Request i: text, an image or a video (two frame pairs, text between), text.
GenerationRequest media_request(const MtpRig& r, uint64_t i, std::shared_ptr<RecordingSink> sink) {
    GenerationRequest g;
    g.id = i + 1;
    g.prompt = random_tokens(4 + i, 200, 60 + i);
    if (i % 2 == 0) {
        g.prompt.insert(g.prompt.end(), 6, kImagePad);
        g.media.push_back(random_vision_input(r.vc, VisionInput::Kind::Image, 1, 4, 6, 31 + i));
    } else {
        g.prompt.insert(g.prompt.end(), 4, kVideoPad);
        g.prompt.insert(g.prompt.end(), {7, 8});
        g.prompt.insert(g.prompt.end(), 4, kVideoPad);
        g.media.push_back(random_vision_input(r.vc, VisionInput::Kind::Video, 2, 4, 4, 31 + i));
    }
    const auto tail = random_tokens(5, 200, 70 + i);
    g.prompt.insert(g.prompt.end(), tail.begin(), tail.end());
    g.max_tokens = 24;
    g.sink = std::move(sink);
    return g;
}

std::map<uint64_t, std::shared_ptr<RecordingSink>> run(const MtpRig& r, SpeculativeConfig spec, EngineStats& stats) {
    auto backend = make_cpu_backend(r.w, r.plan);
    // Chunks of 5: placeholder runs split across prefill calls (the head's pending row keeps its
    // M-RoPE position across them).
    Scheduler s(*backend, {.max_context = 256, .prefill_chunk = 5, .speculative = spec, .vision = r.encoder.get()},
                stats);
    std::map<uint64_t, std::shared_ptr<RecordingSink>> sinks;
    for (uint64_t i = 0; i < 3; ++i)
        s.submit(media_request(r, i, sinks[i] = std::make_shared<RecordingSink>()));
    for (int guard = 0; guard < 100000 && s.has_work(); ++guard)
        s.step();
    REQUIRE_FALSE(s.has_requests());
    return sinks;
}

} // namespace

TEST_CASE("scheduler_vision_mtp: greedy MTP speculation over image and video requests equals plain decoding",
          "[scheduler_vision_mtp]") {
    MtpRig r;
    EngineStats plain_stats;
    const auto plain = run(r, {}, plain_stats);
    for (int k : {1, 3}) {
        INFO("mtp:" << k);
        EngineStats stats;
        const auto spec = run(r, {SpeculativeKind::Mtp, k}, stats);
        for (const auto& [i, sink] : plain) {
            INFO("request " << i);
            REQUIRE(sink->finished);
            REQUIRE(spec.at(i)->finished);
            CHECK(sink->tokens.size() == 24);
            CHECK(spec.at(i)->tokens == sink->tokens);
        }
        CHECK(stats.n_spec_draft_tokens_total > 0);
        CHECK(stats.n_spec_accepted_tokens_total <= stats.n_spec_draft_tokens_total);
    }
}
