// ninfer's resize and patchify against transformers 5.17's default processors themselves: the
// vision references of the dense_vl fixture (tests/oracle/make_vision_reference.py, run on the GPU
// machine) hold each item's source RGB and the pixel_values that Qwen2VLImageProcessor (the
// torchvision backend: a 32x64 image as it is, a 40x100 image resized to 32x96) and
// Qwen3VLVideoProcessor (4 frames of 32x64) gave. resize_bicubic_u8 + patchify_frames must give
// the same rows up to float32 rounding (measured: equal; one 8-bit level is 7.8e-3).
// PIL's resize is a level off on 24 of b's values and the float resize of Debian's torchvision
// 0.14 up to 11 levels on 2220 (make_resize_reference.py says why), so this tells the kernels apart.
#include "core/media/bicubic_resize.h"
#include "core/media/patchify.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace ninfer::core;

namespace {

const std::string kDir = std::string(NINFER_SOURCE_DIR) + "/tests/fixtures/model/generality/dense_vl/vision/";

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

} // namespace

TEST_CASE("resize and patchify equal transformers' default processors' pixel_values", "[media_transformers]") {
    if (!std::filesystem::exists(kDir + "vision_ref.json")) {
        WARN("SKIPPED: no " << kDir << "vision_ref.json (tests/oracle/README.md, 'Vision reference')");
        return;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element root = parser.load(kDir + "vision_ref.json");
    int resized = 0;
    for (auto [key, e] : root["media"].get_object()) {
        INFO("media " << key);
        const MediaPreprocess p; // the references' processors: patch 16, temporal 2, merge 2, mean = std = 0.5
        const int frames = int(int64_t(e["frames"])), h = int(int64_t(e["height"])), w = int(int64_t(e["width"]));
        std::vector<int64_t> grid;
        for (simdjson::dom::element g : e["grid_thw"].get_array()) grid.push_back(int64_t(g));
        REQUIRE(grid.size() == 3);
        const int H = int(grid[1]) * p.patch_size, W = int(grid[2]) * p.patch_size;
        resized += H != h || W != w;
        const std::vector<uint8_t> rgb = read_bytes(kDir + std::string(std::string_view(e["rgb_file"])));
        REQUIRE(rgb.size() == size_t(frames) * size_t(h) * size_t(w) * 3);

        std::vector<std::vector<uint8_t>> out(size_t(frames), std::vector<uint8_t>(size_t(H) * size_t(W) * 3));
        for (int f = 0; f < frames; ++f) {
            const uint8_t* s = rgb.data() + size_t(f) * size_t(h) * size_t(w) * 3;
            const ptrdiff_t stride = ptrdiff_t(w) * 3;
            resize_bicubic_u8(rgb24_view(s, w, h, stride), W, H, out[size_t(f)].data());
        }
        const size_t dim = size_t(3 * p.temporal_patch_size * p.patch_size * p.patch_size);
        std::vector<float> rows(size_t(grid[0] * grid[1] * grid[2]) * dim, 0.0f);
        for (int64_t t = 0; t < grid[0]; ++t) {
            std::vector<const uint8_t*> group; // the last frame repeats up to a whole temporal patch
            for (int k = 0; k < p.temporal_patch_size; ++k)
                group.push_back(out[size_t(std::min<int64_t>(t * p.temporal_patch_size + k, frames - 1))].data());
            patchify_frames(group, H, W, t, p, rows);
        }

        const std::vector<uint8_t> raw = read_bytes(kDir + std::string(std::string_view(e["pixels_file"])));
        REQUIRE(raw.size() == rows.size() * sizeof(float));
        double max_diff = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            float want;
            std::memcpy(&want, raw.data() + i * sizeof(float), sizeof(float));
            max_diff = std::max(max_diff, std::fabs(double(rows[i]) - double(want)));
        }
        INFO(w << "x" << h << " -> " << W << "x" << H << ", max |d| " << max_diff);
        CHECK(max_diff <= 1e-6);
    }
    CHECK(resized > 0); // at least one item went through the resize
}
