// ninfer tests - requests with media through the scheduler: the tower runs before the prefill, its
// rows go in at the placeholders with M-RoPE positions, chunked prefill across an image equals one
// direct prefill_with, and requests the engine cannot run are refused with a reason.
#include "core/engine/scheduler.h"
#include "core/vision/cpu_vision_encoder.h"
#include "tests/unit/cpu/tiny_models.h"
#include "tests/unit/engine/fake_backend.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {


struct MessageSink final : RecordingSink {
    std::string message;
    void on_rejected(RejectReason reason, const std::string& why) override {
        RecordingSink::on_rejected(reason, why);
        message = why;
    }
};

struct Rig : VisionRig {
    Rig() : VisionRig(2) {}
};

// text, an image of 4x6 patches (6 placeholders), text, a 2-frame-pair video of 4x4 (2 x 4
// placeholders with timestamp text between), text.
GenerationRequest media_request(const Rig& r, std::shared_ptr<RecordingSink> sink) {
    GenerationRequest g;
    g.id = 1;
    g.prompt = {1, 2, 3, 4, 5};
    g.prompt.insert(g.prompt.end(), 6, kImagePad);
    for (int32_t t : {6, 7, 8, 9})
        g.prompt.push_back(t);
    g.prompt.insert(g.prompt.end(), 4, kVideoPad);
    for (int32_t t : {10, 11})
        g.prompt.push_back(t);
    g.prompt.insert(g.prompt.end(), 4, kVideoPad);
    for (int32_t t : {12, 13, 14})
        g.prompt.push_back(t);
    g.media.push_back(random_vision_input(r.vc, VisionInput::Kind::Image, 1, 4, 6, 21));
    g.media.push_back(random_vision_input(r.vc, VisionInput::Kind::Video, 2, 4, 4, 22));
    g.max_tokens = 6;
    g.sink = std::move(sink);
    return g;
}

} // namespace

TEST_CASE("a request with an image and a video: chunked scheduler prefill equals one prefill_with", "[scheduler_vision]") {
    Rig r;
    EngineStats stats;
    Scheduler s(*r.backend, {.max_context = 256, .prefill_chunk = 4, .vision = r.encoder.get()}, stats);
    auto sink = std::make_shared<RecordingSink>();
    const GenerationRequest g = media_request(r, sink);
    s.submit(media_request(r, sink));
    for (int i = 0; i < 100 && !sink->finished; ++i)
        s.step();
    REQUIRE(sink->finished);
    REQUIRE(sink->tokens.size() == 6);

    // The same by hand on lane 1: the tower's rows, get_rope_index's positions, greedy decode.
    std::vector<MediaGrid> grids = {{false, 1, 4, 6}, {true, 2, 4, 4}};
    const MropeLayout layout = mrope_positions(g.prompt, kImagePad, kVideoPad, grids, 2);
    CHECK(layout.next < g.prompt.size()); // the vision spans compress the positions
    std::vector<float> rows = r.encoder->encode(g.media[0]);
    const std::vector<float> video = r.encoder->encode(g.media[1]);
    rows.insert(rows.end(), video.begin(), video.end());
    std::vector<int32_t> row_of(g.prompt.size(), -1);
    int32_t next = 0;
    for (size_t i = 0; i < g.prompt.size(); ++i)
        if (g.prompt[i] == kImagePad || g.prompt[i] == kVideoPad)
            row_of[i] = next++;
    REQUIRE(size_t(next) * r.c.hidden_size == rows.size());
    std::vector<float> logits;
    r.backend->prefill_with(1, g.prompt, {layout.positions, row_of, rows}, LogitsOut::Last, &logits);
    std::vector<int32_t> want;
    for (int step = 0; step < 6; ++step) {
        if (step > 0) {
            DecodeStep d;
            d.lane = 1;
            d.token = want.back();
            r.backend->decode(std::span(&d, 1));
            logits = r.backend->last_logits(1);
        }
        want.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
    CHECK(sink->tokens == want);
}

TEST_CASE("requests with media the engine cannot run are refused with the reason", "[scheduler_vision]") {
    Rig r;
    EngineStats stats;
    {
        Scheduler s(*r.backend, {.max_context = 256}, stats);
        auto sink = std::make_shared<MessageSink>();
        s.submit(media_request(r, sink));
        CHECK(sink->rejected);
        CHECK_THAT(sink->message, Catch::Contains("runs no vision tower"));
    }
    Scheduler s(*r.backend, {.max_context = 256, .vision = r.encoder.get()}, stats);
    auto sink = std::make_shared<MessageSink>();
    GenerationRequest g = media_request(r, sink);
    g.prompt.erase(std::find(g.prompt.begin(), g.prompt.end(), kImagePad)); // 5 placeholders for 6 rows
    s.submit(std::move(g));
    CHECK(sink->rejected);
    CHECK_THAT(sink->message, Catch::Contains("mrope: a run of 5 image placeholders for a grid of 6"));
    CHECK(stats.n_requests_rejected_total == 2);
}
