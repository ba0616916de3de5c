// ninfer tests - `ninferctl bench --media / --image / --video` on a tiny synthetic artifact with a
// vision tower: every stage measured, TTFT the sum of the stages, the prompt's vision tokens the
// placeholder expansion of the processor's resize, the JSON report carrying the same fields.
#include "core/convert/synthetic.h"
#include "core/frontend/chat_template.h"
#include "core/frontend/tokenizer.h"
#include "ctl/bench_vision.h"
#include "ctl/model_session.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <filesystem>
#include <unistd.h>

using namespace ninfer;
using namespace ninfer::ctl;

namespace {

// A tiny text model with the tiny tower (patch 16, merge 2: the real processor arithmetic),
// written once and removed at exit.
struct TinyArtifact {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("ninfer_bench_vision_" + std::to_string(getpid()) + ".ninfer")).string();
    TinyArtifact() {
        core::SyntheticRequest r;
        r.shape = "tiny";
        r.out_path = path;
        r.force = true;
        r.with_vision = true;
        core::write_synthetic(r);
    }
    ~TinyArtifact() { std::filesystem::remove(path); }
};

const std::string& tiny_artifact() {
    static const TinyArtifact artifact;
    return artifact.path;
}

std::string fixture(const char* name) { return std::string(NINFER_SOURCE_DIR) + "/tests/fixtures/media/" + name; }

// Tokens of the bench's request with the item's placeholder left unexpanded (3 tokens:
// <|vision_start|><|image_pad|><|vision_end|>).
size_t unexpanded_prompt_tokens(core::ContentPart::Kind kind) {
    auto s = open_model_session(tiny_artifact());
    core::ChatConversation c;
    core::ChatMessage m;
    m.content = {{kind, {}, {}}, core::ContentPart::of_text(kPromptText)}; // a user message
    c.messages.push_back(m);
    return s->tokenizer->encode(core::render_chat_prompt(c, {})).size();
}

void check_sums(const VisionBenchReport& r) {
    double best = 0, mean = 0, share = 0;
    for (const StageTime* t : {&r.preprocess, &r.tower, &r.prefill}) {
        if (!t->measured) continue;
        CHECK(t->best_ms > 0);
        CHECK(t->mean_ms >= t->best_ms);
        best += t->best_ms, mean += t->mean_ms, share += t->share_pct;
    }
    CHECK(r.ttft_best_ms == Approx(best));
    CHECK(r.ttft_mean_ms == Approx(mean));
    CHECK(share == Approx(100.0));
    CHECK(r.tower.measured);
    CHECK(r.prefill.measured);
}

// The JSON report parsed back: the same figures, TTFT the sum of the measured stages.
void check_json(const VisionBenchReport& r) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    const std::string text = vision_bench_json(r);
    REQUIRE(parser.parse(text).get(doc) == simdjson::SUCCESS);
    CHECK(std::string(doc["kind"].get_string().value()) == r.kind);
    CHECK(uint64_t(doc["prompt_tokens"]) == r.prompt_tokens);
    CHECK(uint64_t(doc["vision_tokens"]) == r.vision_tokens);
    CHECK(uint64_t(doc["merged_tokens"]) == r.merged_tokens);
    double sum = 0;
    for (const char* stage : {"preprocess", "tower", "prefill"}) {
        simdjson::dom::element s = doc[stage];
        CHECK(bool(s["measured"]) == (stage == std::string("preprocess") ? r.preprocess.measured : true));
        if (bool(s["measured"])) sum += double(s["best_ms"]);
    }
    CHECK(double(doc["ttft_best_ms"]) == Approx(sum).epsilon(1e-3));
}

// A --media report's item facts, then its sums and JSON.
struct Expected {
    const char* kind;
    int source_w, source_h, w, h, frames;
    size_t patches, merged;
};

void check_item(const VisionBenchReport& r, const Expected& e) {
    CHECK(r.kind == e.kind);
    CHECK(r.source_width == e.source_w);
    CHECK(r.source_height == e.source_h);
    CHECK(r.width == e.w);
    CHECK(r.height == e.h);
    CHECK(r.frames == e.frames);
    CHECK(r.patches == e.patches);
    CHECK(r.merged_tokens == e.merged);
    CHECK(r.vision_tokens == e.merged);
    CHECK(r.preprocess.measured);
    check_sums(r);
    check_json(r);
}

} // namespace

TEST_CASE("bench --media times preprocess, tower and prefill of a PNG and an MP4", "[bench_vision]") {
    VisionBenchArgs a;
    a.repeat = 2;
    a.threads = 2;
    a.media_path = fixture("grad.png");
    VisionBenchReport r;
    try {
        r = measure_vision_bench(tiny_artifact(), a);
    } catch (const Error& e) {
        if (e.kind() != Errc::Unavailable) throw;
        WARN("SKIPPED: FFmpeg's libraries are not installed: " << e.what());
        return;
    }
    // 64x64 is below the image processor's 65536 px: smart_resize scales it to 256x256 = 8 x 8
    // merged tokens of 32 px.
    check_item(r, {"image", 64, 64, 256, 256, 1, 256, 64});
    // The expansion turns the 3-token placeholder into <|vision_start|>, 64 pads, <|vision_end|>.
    CHECK(r.prompt_tokens == unexpanded_prompt_tokens(core::ContentPart::Kind::Image) + 64 - 1);
    CHECK(r.preprocess_note.empty());
    CHECK(r.tower_device == "cpu");
    CHECK(r.prefill_device == "cpu");
    CHECK(vision_bench_text(r).find("preprocess + tower + prefill") != std::string::npos);

    // 2 s of 64x64 at 10 fps sampled at 2 fps: 4 frames = 2 temporal patches of 4 x 4 patches,
    // 2 x 2 merged tokens each.
    a.media_path = fixture("clip.mp4");
    r = measure_vision_bench(tiny_artifact(), a);
    check_item(r, {"video", 64, 64, 64, 64, 4, 32, 8});
    // Each temporal patch: "<t seconds>" text, <|vision_start|>, 4 pads, <|vision_end|>.
    CHECK(r.prompt_tokens > unexpanded_prompt_tokens(core::ContentPart::Kind::Video) - 3 + 2 * (2 + 4));
}

TEST_CASE("bench --image / --video time tower and prefill of random patches without decoding", "[bench_vision]") {
    VisionBenchArgs a;
    a.repeat = 2;
    a.threads = 2;
    a.image_w = 64, a.image_h = 32; // 4 x 2 patches of 16 = 2 merged tokens
    VisionBenchReport r = measure_vision_bench(tiny_artifact(), a);
    CHECK(r.source == "synthetic");
    CHECK(r.merged_tokens == 2);
    CHECK(r.vision_tokens == 2);
    CHECK(r.prompt_tokens == unexpanded_prompt_tokens(core::ContentPart::Kind::Image) + 2 - 1);
    CHECK_FALSE(r.preprocess.measured);
    CHECK_FALSE(r.preprocess_note.empty());
    check_sums(r);
    check_json(r);
    CHECK(vision_bench_text(r).find("preprocess not measured") != std::string::npos);

    a.image_w = a.image_h = 0;
    a.video_seconds = 3; // 6 frames at 2 fps = 3 temporal patches of 2 x 2 patches: 3 merged tokens
    a.frame_w = a.frame_h = 32;
    r = measure_vision_bench(tiny_artifact(), a);
    CHECK(r.frames == 6);
    CHECK(r.merged_tokens == 3);
    CHECK(r.vision_tokens == 3);
    check_sums(r);

    a.frame_w = 48; // not a multiple of the tower's 32 px
    CHECK_THROWS_WITH(measure_vision_bench(tiny_artifact(), a), Catch::Contains("multiples of 32 px"));
    a.video_seconds = 0;
    a.media_path = "/nonexistent/clip.mp4";
    CHECK_THROWS_WITH(measure_vision_bench(tiny_artifact(), a), Catch::Contains("--media /nonexistent/clip.mp4"));
}
