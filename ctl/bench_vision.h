// ninfer::ctl - `ninferctl bench ARTIFACT (--media FILE | --image WxH | --video SECONDS)`: a
// multimodal request's time to first token, stage by stage (issue 31).
//
// Contract:
// - measure_vision_bench(artifact, args) opens the artifact (it must have a vision tower, a text
//   model and a tokenizer with <|image_pad|> / <|video_pad|>), builds one request (a user message
//   holding the item and kPromptText, rendered by the chat template, its placeholder expanded as
//   transformers' processor does: core/media/placeholders.h) and times, `repeat` times each:
//   1. preprocess: --media only: the file decoded, sampled, resized, normalised and patchified by
//      the daemon's own path (core/media/media_request.h decode_request_media on a media pool,
//      a file:// source, the daemon's default limits);
//   2. tower: the vision tower over the item (CPU, or the GPU tower with gpu), as the engine runs
//      it (core/engine/vision_prefill.h prepare_vision_prefill, which also lays out the rows);
//   3. prefill: the language model's prefill of the whole prompt on lane 0 of the CPU or CUDA
//      backend (args.device), in prefill_chunk chunks through prefill_with, up to the last
//      position's logits on the host (so a GPU prefill is complete).
//   The synthetic form (--image WxH / --video SECONDS [--frame WxH]) skips stage 1: its item is
//   random patches of that tower-input size (multiples of the tower's 32 px unit; a video takes
//   2 frames/s, at least 4), with the timestamps a 2 fps source gives; preprocess_note then says
//   why preprocessing was not measured ("no FFmpeg: ..." where the libraries cannot be loaded).
//   GPU stages run once untimed first (kernel loading, graphs). Every stage's best and mean are
//   reported; ttft_best_ms / ttft_mean_ms are the sums of the measured stages' bests / means and
//   each stage's share is its best over ttft_best_ms (first-token sampling is not counted: one
//   pass over the vocabulary's logits).
// - vision_bench_text / vision_bench_json render a report (the JSON's keys are the struct's names).
// - Errors: ninfer::Error("bench: ...") for a size that is not a positive multiple of the unit, an
//   artifact without a tower or tokenizer, a GPU stage in a build without CUDA; --media errors are
//   the daemon's ("media item 1: ..."), FFmpeg missing adds how to measure without it.
#pragma once

#include <cstddef>
#include <string>

namespace ninfer::ctl {

inline constexpr const char* kPromptText = "Describe what you see in one sentence.";

struct VisionBenchArgs {
    std::string media_path;           // --media FILE (an image or a video, by its content)
    int image_w = 0, image_h = 0;     // --image WxH (0: no image)
    double video_seconds = 0;         // --video SECONDS at 2 frames/s (0: no video)
    int frame_w = 832, frame_h = 480; // --frame WxH: a 30 s 720p clip as the processor resizes it
    int repeat = 3;
    unsigned threads = 0;             // CPU tower and CPU backend threads (0 = every core)
    int decode_threads = 2;           // --decode-threads: a video decoder's frame threads (ninferd's media-decode-threads)
    size_t batch_patches = 16384;     // --vision-batch-patches: the GPU tower's patches a batch (ninferd's option)
    bool gpu = false;                 // --vision-device cuda: the GPU tower (core/cuda/vision_tower_gpu.h)
    std::string device = "cpu";       // --device cpu|cuda: the language model's backend
    unsigned prefill_chunk = 2048;    // tokens per prefill call (ninferd's --prefill-chunk default)
    bool json = false;
};

struct StageTime {
    bool measured = false;
    double best_ms = 0, mean_ms = 0, share_pct = 0;
};

struct VisionBenchReport {
    std::string kind;   // "image" or "video"
    std::string source; // the --media path, or "synthetic"
    int source_width = 0, source_height = 0; // --media: the decoded file's frame size
    int width = 0, height = 0;               // the tower's input frame (after the processor's resize)
    int frames = 0;                          // frames the tower takes: temporal patches x 2 (an image: 1)
    size_t patches = 0, merged_tokens = 0;
    size_t prompt_tokens = 0, vision_tokens = 0; // vision_tokens: the placeholder (pad) tokens
    std::string tower_device, prefill_device;
    unsigned threads = 0;
    int repeat = 0;
    std::string preprocess_note; // why preprocess was not measured ("" when it was)
    StageTime preprocess, tower, prefill;
    double ttft_best_ms = 0, ttft_mean_ms = 0;
};

// Parses "WxH" into w and h; false if it is not two positive integers.
bool parse_size(const std::string& text, int& w, int& h);
VisionBenchReport measure_vision_bench(const std::string& artifact, const VisionBenchArgs& args);
std::string vision_bench_text(const VisionBenchReport& report);
std::string vision_bench_json(const VisionBenchReport& report);
int run_vision_bench(const std::string& artifact, const VisionBenchArgs& args);

} // namespace ninfer::ctl
