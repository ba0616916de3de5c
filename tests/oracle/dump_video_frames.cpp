// oracle_dump_video_frames - test-only tool for tests/oracle/compare_video_frames.py: a video's
// sampled frames as core/media decodes them, before and after the processor's resize.
//
// Contract:
//   oracle_dump_video_frames FILE OUT_DIR
// - Decodes FILE with decode_media (core/media/media_decode.h) twice, with the real Qwen3-VL video
//   processor settings (patch 16, temporal 2, merge 2, 2 fps, 4..768 frames, 4096..25165824 px x
//   frames, mean = std = 0.5: what `ninferctl convert --synthetic` stores):
//   1. as is, with the merge size 1 and no pixel bound, so the resize is the identity (the frame's
//      sides must be multiples of 16): OUT_DIR/source.rgb holds the colour conversion alone;
//   2. as the processor resizes it: OUT_DIR/resized.rgb.
//   Each .rgb is the sampled frames (not the pad to whole frame pairs) as uint8 [frames][H][W][3],
//   recovered exactly from the normalised patches. OUT_DIR/frames.json names the sampled frame
//   indices, the source fps and both sizes.
// - Exit 0 on success; 2 on bad usage or a frame size that is not a multiple of 16; 1 on any
//   other error (a message on stderr).
#include "core/media/media_decode.h"
#include "tests/unit/media/media_fixtures.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

using namespace ninfer::core;

namespace {

MediaConfig processor_config(bool identity) {
    MediaConfig c; // the video defaults are the processor's (media_config.h)
    c.video.min_pixels = 4096;
    c.video.max_pixels = 25165824;
    if (identity) {
        c.video.merge_size = 1;
        c.video.max_pixels = int64_t(1) << 40;
    }
    return c;
}

// The sampled frames of `v` as uint8 RGB: p = (x * std + mean) / rescale, exact after rounding.
std::vector<uint8_t> frames_u8(const VisionInput& v, const MediaPreprocess& p, size_t n_frames) {
    const std::vector<float> f = unpatchify(v);
    const size_t per_frame = size_t(v.grid_h) * size_t(v.patch_size) * size_t(v.grid_w) * size_t(v.patch_size) * 3;
    std::vector<uint8_t> out(n_frames * per_frame);
    for (size_t i = 0; i < out.size(); ++i) {
        const size_t c = i % 3;
        const double pixel = (double(f[i]) * p.std[c] + p.mean[c]) / p.rescale_factor;
        out[i] = uint8_t(std::lround(std::min(255.0, std::max(0.0, pixel))));
    }
    return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: oracle_dump_video_frames FILE OUT_DIR\n";
        return 2;
    }
    try {
        std::ifstream in(argv[1], std::ios::binary);
        const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (bytes.empty()) throw std::runtime_error(std::string("cannot read ") + argv[1]);
        const std::string dir = argv[2];
        MediaLimits limits;
        limits.max_vision_tokens = int64_t(1) << 40; // the identity decode's tokens are not a request's
        const MediaConfig as_is = processor_config(true), processor = processor_config(false);
        const MediaPlan plan = plan_media(VisionInput::Kind::Video, bytes, processor, limits);
        if (plan.source_width % 16 || plan.source_height % 16) {
            std::cerr << "oracle_dump_video_frames: the frame is " << plan.source_width << "x" << plan.source_height
                      << "; the identity resize needs multiples of 16\n";
            return 2;
        }
        const size_t n = plan.frame_indices.size();
        const VisionInput source = decode_media(VisionInput::Kind::Video, bytes, as_is, limits);
        const VisionInput resized = decode_media(VisionInput::Kind::Video, bytes, processor, limits);
        write_file(dir + "/source.rgb", frames_u8(source, as_is.video, n));
        write_file(dir + "/resized.rgb", frames_u8(resized, processor.video, n));
        std::ofstream meta(dir + "/frames.json");
        meta << "{\"indices\":[";
        for (size_t i = 0; i < n; ++i) meta << (i ? "," : "") << plan.frame_indices[i];
        meta << "],\"source_fps\":" << plan.source_fps << ",\"source\":[" << source.grid_w * source.patch_size << ","
             << source.grid_h * source.patch_size << "],\"resized\":[" << plan.size.width << "," << plan.size.height << "]}\n";
        if (!meta) throw std::runtime_error("cannot write " + dir + "/frames.json");
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "oracle_dump_video_frames: " << e.what() << "\n";
        return 1;
    }
}
