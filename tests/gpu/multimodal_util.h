// ninfer tests (GPU) - multimodal prompts for the CUDA backend's tests (cuda_multimodal.cpp,
// cuda_mtp_multimodal.cpp): the kernel-shape dense fixture's perplexity ids as text with runs of
// placeholders spliced in, and a tiny random vision tower (the CPU encoder,
// tests/unit/vision/tiny_vision.h) whose rows replace them.
//
// Contract: prompts(vc) gives three prompts ("image": 7 text + 24 placeholders + 5 text; "two
// images"; "video": two temporal runs of 4 with text between), their media items in prompt order,
// placeholder ids kImage / kVideo (inside the fixtures' 2048-token vocabulary). Tower(hidden) is
// the tiny config's random tower (seed 9) with rows as wide as the text model's hidden size.
// No media decoding: the tower's inputs are random patch arrays.
#pragma once

#include "tests/gpu/fixture_models.h"
#include "tests/unit/vision/tiny_vision.h"

#include <memory>
#include <vector>

namespace ninfer::test {

using namespace ninfer::core;

// Placeholder ids inside the fixture's 2048-token vocabulary (the tower's rows replace them).
constexpr int32_t kImage = 1500, kVideo = 1501;

struct MmPrompt {
    const char* name;
    std::vector<int32_t> ids;
    std::vector<VisionInput> media;
};

// The fixture's perplexity ids as text, with placeholder runs spliced in: segments of text
// lengths and items, in prompt order (a video takes one run per temporal patch, text between).
struct Builder {
    std::vector<int32_t> text;
    size_t at = 0;
    MmPrompt p;
    void add_text(size_t n) {
        for (size_t i = 0; i < n; ++i, ++at) p.ids.push_back(text[at % text.size()]);
    }
    void add_item(const VisionInput& item, size_t text_between = 3) {
        const int32_t pad = item.kind == VisionInput::Kind::Video ? kVideo : kImage;
        const size_t per_run = item.merged_tokens() / size_t(item.grid_t);
        for (int t = 0; t < item.grid_t; ++t) {
            if (t > 0) add_text(text_between);
            p.ids.insert(p.ids.end(), per_run, pad);
        }
        p.media.push_back(item);
    }
};

inline std::vector<MmPrompt> prompts(const VisionConfig& vc) {
    std::vector<int32_t> text;
    for (int32_t id : read_refs("kernel/dense").ppl_ids)
        if (id != kImage && id != kVideo) text.push_back(id);
    const VisionInput big = random_vision_input(vc, VisionInput::Kind::Image, 1, 8, 12, 21);   // 24 tokens
    const VisionInput small = random_vision_input(vc, VisionInput::Kind::Image, 1, 4, 6, 22);  // 6 tokens
    const VisionInput video = random_vision_input(vc, VisionInput::Kind::Video, 2, 4, 4, 23);  // 2 x 4 tokens
    std::vector<MmPrompt> out;
    Builder a{text, 0, {}};
    a.p.name = "image";
    a.add_text(7), a.add_item(big), a.add_text(5);
    out.push_back(a.p);
    Builder b{text, 40, {}};
    b.p.name = "two images";
    b.add_text(3), b.add_item(big), b.add_text(4), b.add_item(small), b.add_text(6);
    out.push_back(b.p);
    Builder c{text, 90, {}};
    c.p.name = "video";
    c.add_text(4), c.add_item(video), c.add_text(5);
    out.push_back(c.p);
    return out;
}

// The CPU tower of the tiny config, its rows as wide as the text model's hidden size.
struct Tower {
    InMemoryModel model;
    VisionConfig vc;
    VisionWeights weights;
    std::unique_ptr<VisionEncoder> encoder;
    explicit Tower(uint32_t hidden)
        : vc(tiny_vision_config(hidden)), weights(random_vision_weights(model, vc, 9)),
          encoder(make_cpu_vision_encoder(weights, 2, kImage, kVideo)) {}
};

} // namespace ninfer::test
