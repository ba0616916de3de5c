// ninfer tests - `convert --synthetic SHAPE --components vision`: the tiny random tower converts,
// binds from the artifact (ModelWeights::vision) and runs on a real-sized patch input.
#include "core/artifact/artifact.h"
#include "core/convert/synthetic.h"
#include "core/cpu/thread_pool.h"
#include "core/model/vision_weights.h"
#include "core/vision/vision_tower.h"
#include "tests/unit/vision/tiny_vision.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("synthetic tiny shape with a vision tower binds and runs", "[synthetic_tower]") {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("ninfer_synthetic_tower_" + std::to_string(getpid()) + ".ninfer")).string();
    SyntheticRequest r;
    r.shape = "tiny";
    r.out_path = path;
    r.force = true;
    r.with_vision = true;
    r.seed = 3;
    write_synthetic(r);
    auto artifact = Artifact::open(path);
    REQUIRE(artifact->has_component("vision"));
    CHECK(artifact->resource("vision", "preprocessor_config.json"));
    CHECK(artifact->resource("vision", "video_preprocessor_config.json"));
    const ModelWeights w = ModelWeights::from_artifact(*artifact);
    REQUIRE(w.vision);
    const VisionConfig& c = w.vision->config;
    CHECK(c.depth == 2);
    CHECK(c.patch_size == 16);
    CHECK(c.out_hidden_size == w.config.hidden_size);
    CHECK(c.position_grid_side() == 4);

    ThreadPool pool(2);
    VisionTower tower(*w.vision, pool);
    const VisionInput in = random_vision_input(c, VisionInput::Kind::Image, 1, 6, 4, 2);
    const std::vector<float> rows = tower.encode(in);
    REQUIRE(rows.size() == 6 * size_t(c.out_hidden_size));
    double sum_sq = 0;
    for (float x : rows) {
        REQUIRE(std::isfinite(x));
        sum_sq += double(x) * x;
    }
    CHECK(sum_sq > 0);

    // Without --components vision there is no tower.
    r.with_vision = false;
    write_synthetic(r);
    CHECK_FALSE(ModelWeights::from_artifact(*Artifact::open(path)).vision);
    std::filesystem::remove(path);
}
