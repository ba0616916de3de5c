// ninfer tests - the media seam: a PNG and an MP4 decoded by core/media with the processor configs a
// synthetic artifact carries go through the vision tower of that artifact (patch sizes, grid and
// patch order as vision_input.h states), and a prompt with them runs through the scheduler.
#include "core/artifact/artifact.h"
#include "core/convert/synthetic.h"
#include "core/cpu/cpu_backend.h"
#include "core/engine/scheduler.h"
#include "core/vision/cpu_vision_encoder.h"
#include "tests/unit/engine/fake_backend.h"
#ifdef NINFER_HAVE_MEDIA
#include "core/media/media_decode.h"
#include "tests/unit/media/media_fixtures.h"
#endif

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <unistd.h>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("decoded media go through a synthetic artifact's tower and the scheduler", "[media_seam]") {
#ifndef NINFER_HAVE_MEDIA
    WARN("SKIPPED: this build has no core/media (FFmpeg headers were not found)");
#else
    const std::string path =
        (std::filesystem::temp_directory_path() / ("ninfer_media_seam_" + std::to_string(getpid()) + ".ninfer")).string();
    SyntheticRequest r;
    r.shape = "tiny";
    r.out_path = path;
    r.force = true;
    r.with_vision = true;
    write_synthetic(r);
    auto artifact = Artifact::open(path);
    const ModelWeights w = ModelWeights::from_artifact(*artifact);
    REQUIRE(w.vision);
    auto text = [&](const char* role) {
        const ArtifactResource* res = artifact->resource("vision", role);
        REQUIRE(res);
        return std::string(reinterpret_cast<const char*>(res->data), res->bytes);
    };
    const MediaConfig config = media_config_from_json(text("preprocessor_config.json"), text("video_preprocessor_config.json"));
    std::vector<VisionInput> media;
    try {
        media.push_back(decode_media(VisionInput::Kind::Image, media_fixture("grad.png"), config, MediaLimits{}));
        media.push_back(decode_media(VisionInput::Kind::Video, media_fixture("clip.mp4"), config, MediaLimits{}));
    } catch (const ninfer::Error& e) {
        if (e.kind() != ninfer::Errc::Unavailable)
            throw;
        WARN("SKIPPED: FFmpeg's libraries are not installed: " << e.what());
        return;
    }
    auto encoder = make_cpu_vision_encoder(*w.vision, 2, 200, 201); // ids of the tiny prompt below
    for (const VisionInput& in : media) {
        const std::vector<float> rows = encoder->encode(in);
        REQUIRE(rows.size() == in.merged_tokens() * w.config.hidden_size);
        for (float x : rows)
            REQUIRE(std::isfinite(x));
    }

    // text, the image's placeholders, text, per frame pair "timestamp" text and its placeholders.
    GenerationRequest g;
    g.prompt = {1, 2, 3};
    g.prompt.insert(g.prompt.end(), media[0].merged_tokens(), 200);
    for (int t = 0; t < media[1].grid_t; ++t) {
        g.prompt.push_back(7 + t);
        g.prompt.insert(g.prompt.end(), media[1].merged_tokens() / size_t(media[1].grid_t), 201);
    }
    g.prompt.push_back(9);
    g.media = media;
    g.max_tokens = 3;
    auto sink = std::make_shared<RecordingSink>();
    g.sink = sink;
    MemoryRequest req;
    req.max_context = 4096;
    req.available_bytes = 1ull << 32;
    const MemoryPlan plan = MemoryPlan::make(w.config, req);
    auto backend = make_cpu_backend(w, plan);
    EngineStats stats;
    Scheduler s(*backend, {.max_context = 4096, .prefill_chunk = 256, .vision = encoder.get()}, stats);
    s.submit(std::move(g));
    for (int i = 0; i < 200 && !sink->finished && !sink->rejected; ++i)
        s.step();
    CHECK_FALSE(sink->rejected);
    CHECK(sink->finished);
    CHECK(sink->tokens.size() == 3);
    std::filesystem::remove(path);
#endif
}
