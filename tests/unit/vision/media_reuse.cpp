// ninfer tests - the scheduler reuses a lane or a prefix-cache checkpoint for a multimodal prompt
// only when the media digests agree (the same tokens with other pixels are another state), and a
// scheduler without a tower refuses media Unsupported.
#include "core/engine/prefix_cache.h"
#include "core/engine/scheduler.h"
#include "core/vision/cpu_vision_encoder.h"
#include "tests/unit/cpu/tiny_models.h"
#include "tests/unit/engine/fake_backend.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {


struct Rig : VisionRig {
    Rig() : VisionRig(1) {}
};

// Text, an image of 4x6 patches (6 placeholders at 5..10), text; then `extra` tokens.
GenerationRequest image_request(const Rig& r, uint64_t id, uint64_t pixels_seed, std::vector<int32_t> extra,
                                std::shared_ptr<RecordingSink> sink) {
    GenerationRequest g;
    g.id = id;
    g.prompt = {1, 2, 3, 4, 5};
    g.prompt.insert(g.prompt.end(), 6, kImagePad);
    for (int32_t t : {6, 7, 8, 9, 10, 11, 12, 13, 14, 15}) g.prompt.push_back(t);
    g.prompt.insert(g.prompt.end(), extra.begin(), extra.end());
    VisionInput item = random_vision_input(r.vc, VisionInput::Kind::Image, 1, 4, 6, pixels_seed);
    item.digest.fill(uint8_t(pixels_seed)); // what core/media computes from the pixels
    MediaSpan span;
    span.position = 5, span.n_tokens = 6, span.digest = item.digest;
    g.media.push_back(std::move(item));
    g.media_spans.push_back(span);
    g.max_tokens = 3;
    g.sink = std::move(sink);
    return g;
}

std::shared_ptr<RecordingSink> run(Scheduler& s, GenerationRequest g) {
    auto sink = std::static_pointer_cast<RecordingSink>(g.sink);
    s.submit(std::move(g));
    for (int guard = 0; s.has_requests() && guard < 1000; ++guard) s.step();
    REQUIRE((sink->finished || sink->rejected));
    return sink;
}

SnapshotStoreOptions cache_options() {
    SnapshotStoreOptions o;
    o.host_budget_bytes = 64 << 20;
    o.lock_memory = false;
    return o;
}

} // namespace

TEST_CASE("lanes and checkpoints are reused for a multimodal prompt only with the same pixels", "[media_reuse]") {
    Rig r;
    PrefixCache cache(cache_options());
    EngineStats stats;
    Scheduler s(*r.backend, {.max_context = 256, .prefill_chunk = 8, .prefix_cache = &cache, .vision = r.encoder.get()}, stats);
    auto first = run(s, image_request(r, 1, 7, {}, std::make_shared<RecordingSink>()));
    REQUIRE(first->finished);
    std::vector<int32_t> more = first->tokens;
    more.push_back(16);
    // The same image, the conversation continued: the lane's sequence is reused.
    auto same = run(s, image_request(r, 2, 7, more, std::make_shared<RecordingSink>()));
    REQUIRE(same->finished);
    CHECK(same->cached >= 21);
    // The same tokens with other pixels: neither the lane nor any checkpoint may serve it.
    auto other = run(s, image_request(r, 3, 8, more, std::make_shared<RecordingSink>()));
    REQUIRE(other->finished);
    CHECK(other->cached == 0);
    // And the first image again, now from the prefix cache (the lane holds the other pixels).
    auto again = run(s, image_request(r, 4, 7, more, std::make_shared<RecordingSink>()));
    REQUIRE(again->finished);
    CHECK(again->cached >= 21);
    CHECK(again->tokens == same->tokens); // reused state gives what the first reuse gave
}

TEST_CASE("a scheduler without a vision tower refuses media Unsupported", "[media_reuse]") {
    Rig r;
    EngineStats stats;
    Scheduler s(*r.backend, {.max_context = 256, .prefill_chunk = 8}, stats);
    auto refused = run(s, image_request(r, 1, 7, {}, std::make_shared<RecordingSink>()));
    CHECK(refused->rejected);
    CHECK(refused->reject_reason == RejectReason::Unsupported);
}
