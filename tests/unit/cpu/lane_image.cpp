// ninfer tests - saving a lane and restoring it (into another lane) continues identically; image
// sections are zero when added (huge-page backed, util/zeroed_pages.h) and survive moves.
#include "tests/unit/cpu/tiny_models.h"

#include "core/util/zeroed_pages.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("lane_image: save and restore round trip for every KV dtype", "[lane_image]") {
    for (KvDtype dtype : {KvDtype::Bf16, KvDtype::Fp8, KvDtype::Int8}) {
        const ModelConfig c = tiny_config(false);
        auto model = InMemoryModel::random(c, {.seed = 31});
        const ModelWeights w = model->weights();
        const MemoryPlan plan = tiny_plan(c, 3, dtype);
        auto backend = make_cpu_backend(w, plan);
        const auto prompt = random_tokens(90, c.vocab_size, 5);
        backend->prefill(0, prompt, LogitsOut::Last, nullptr);
        const LaneImage image = backend->save_lane(0);
        CHECK(image.tokens == prompt);
        CHECK(image.kv().size() == plan.lane_image_kv_bytes(90));
        CHECK(image.gdn().size() == plan.lane_image_gdn_bytes());

        // Occupy lane 2 first so the restored lane gets different physical pages.
        backend->prefill(2, random_tokens(70, c.vocab_size, 6), LogitsOut::None, nullptr);
        backend->restore_lane(1, image);
        CHECK(backend->lane_length(1) == 90);
        for (int step = 0; step < 5; ++step) {
            DecodeStep a, b;
            a.lane = 0;
            b.lane = 1;
            a.token = b.token = int32_t(7 + step);
            backend->decode(std::span(&a, 1));
            backend->decode(std::span(&b, 1));
            CHECK(backend->last_logits(0) == backend->last_logits(1)); // bit-identical
        }
        // A second save of the restored lane reproduces its state bytes.
        const LaneImage again = backend->save_lane(1);
        CHECK(again.tokens.size() == 95);
        CHECK(again.sections == backend->save_lane(0).sections); // kv and gdn
    }
}

TEST_CASE("lane_image: a mismatched image is refused", "[lane_image]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c);
    const ModelWeights w = model->weights();
    auto backend = make_cpu_backend(w, tiny_plan(c, 1));
    backend->prefill(0, random_tokens(10, c.vocab_size, 1), LogitsOut::None, nullptr);
    LaneImage image = backend->save_lane(0);
    for (LaneSection& sec : image.sections)
        if (sec.tag == LaneSectionTag::Kv) sec.bytes.pop_back();
    CHECK_THROWS_WITH(backend->restore_lane(0, image), Catch::Contains("sizes do not match"));
    image = backend->save_lane(0);
    image.kv_dtype = KvDtype::Int8;
    CHECK_THROWS_WITH(backend->restore_lane(0, image), Catch::Contains("KV dtype"));
    image = backend->save_lane(0);
    image.sections.erase(image.sections.begin() + 1); // no gdn section
    CHECK_THROWS_WITH(backend->restore_lane(0, image), Catch::Contains("sizes do not match"));
    // A section this backend does not restore: refused when required, ignored when optional.
    image = backend->save_lane(0);
    image.add_section(LaneSectionTag::MtpKv, 16);
    CHECK_THROWS_WITH(backend->restore_lane(0, image), Catch::Contains("mtp_kv section this backend cannot restore"));
    image.sections.back().required = false;
    CHECK_NOTHROW(backend->restore_lane(0, image));
    CHECK_THROWS_WITH(image.add_section(LaneSectionTag::Kv, 1), Catch::Contains("a second kv section"));
}

TEST_CASE("zeroed pages: lane-image sections are zero when added and survive moves of the image", "[lane_image]") {
    LaneImage image;
    std::span<uint8_t> kv = image.add_section(LaneSectionTag::Kv, 5 * kHugeRegionBytes);
    CHECK(std::all_of(kv.begin(), kv.end(), [](uint8_t x) { return x == 0; }));
    kv[123] = 9;
    std::span<uint8_t> gdn = image.add_section(LaneSectionTag::Gdn, 1000);
    gdn[5] = 4;
    LaneImage moved = std::move(image);
    CHECK(moved.kv().data() == kv.data()); // the spans handed out stay valid (lane_image.h)
    CHECK(moved.kv()[123] == 9);
    CHECK(moved.gdn()[5] == 4);
    LaneImage copy = moved;
    CHECK(copy == moved);
}
