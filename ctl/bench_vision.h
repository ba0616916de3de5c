// ninfer::ctl - `ninferctl bench ARTIFACT --image WxH | --video SECONDS [--vision-device cuda]`: the
// vision tower's time on the CPU (core/vision/vision_tower.h) or the GPU (core/cuda/vision_tower_gpu.h)
// for one image or one video, on random patches of the grid that size gives (sizes are the
// tower's input, after the processor's resize: multiples of 32 px).
//
// Contract: run_vision_bench(artifact, args) opens the artifact (it must have a vision tower),
// encodes `repeat` times and prints patches, merged tokens, the workspace of one batch and the
// best and mean seconds (JSON with args.json); on the GPU a first, untimed encode warms it up.
// ninfer::Error("bench: ...") for a size that is not a positive multiple of 32, an artifact without
// a tower, or the GPU tower in a build without CUDA.
#pragma once

#include <string>

namespace ninfer::ctl {

struct VisionBenchArgs {
    int image_w = 0, image_h = 0;   // --image WxH (0: no image)
    double video_seconds = 0;       // --video SECONDS at 2 frames/s (0: no video)
    int frame_w = 832, frame_h = 480; // --frame WxH: a 30 s 720p clip as the processor resizes it
    int repeat = 3;
    unsigned threads = 0;
    bool gpu = false; // --vision-device cuda: the GPU tower (core/cuda/vision_tower_gpu.h)
    bool json = false;
};

// Parses "WxH" into w and h; false if it is not two positive integers.
bool parse_size(const std::string& text, int& w, int& h);
int run_vision_bench(const std::string& artifact, const VisionBenchArgs& args);

} // namespace ninfer::ctl
