// ninfer::ctl - `ninferctl bench`: prefill and decode speed of the CUDA backend, with the fraction
// of the memory roofline it measures itself (core/cuda/decode_bench.h); with an image or a video,
// a multimodal request's first token stage by stage (ctl/bench_vision.h).
#include "ctl/bench_vision.h"
#include "ctl/command_list.h"
#include "ctl/model_session.h"

#include "core/backend/sampling.h"
#include "core/engine/generation.h"
#include "core/util/error.h"
#ifdef NINFER_HAVE_CUDA_BACKEND
#include "core/cuda/decode_bench.h"
#include "core/model/kv_codec.h"
#endif

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace ninfer::ctl {

namespace {

constexpr const char* kBenchUsage =
    "usage: ninferctl bench (ARTIFACT | --synthetic SHAPE --recipe bf16|fp8|q4|q5|q6|q8|nvfp4|mix)\n"
    "           [--prompt-len 512,8192] [--gen N] [--batch 1,2,4,8] [--prefill-chunk N]\n"
    "           [--kv-dtype bf16|fp8|int8] [--decode-only] [--json]\n"
    "           [--temperature T] [--top-p P] [--top-k K] [--speculative ngram:K|mtp:K]\n"
    "       ninferctl bench ARTIFACT (--media FILE | --image WxH | --video SECONDS [--frame WxH])\n"
    "                 [--device cpu|cuda] [--vision-device cpu|cuda] [--prefill-chunk N] [--repeat N]\n"
    "                 [--threads N] [--decode-threads N] [--vision-batch-patches N] [--json]\n"
    "  On the CUDA backend: prefill tok/s, TTFT, TFLOP/s and the fraction of the bf16 tensor-core\n"
    "  peak it measures (8192^3 GEMM, ours and cuBLASLt if present) per prompt length, prefilled in\n"
    "  chunks of --prefill-chunk tokens (default 2048); decode tok/s per batch size\n"
    "  at each prompt length as context depth, bytes read per step and the fraction of the copy\n"
    "  bandwidth it measures (device-to-device copy of 4 GiB, best of 10). --synthetic builds\n"
    "  seeded random weights of SHAPE (qwen3.6-27b, qwen3.6-35b-a3b, ...) without a file; mix is the\n"
    "  upstream groupwise-int assignment (q4/q5/q6/q8, the converter's q4 recipe). Decode is greedy\n"
    "  unless --temperature (> 0) samples every step as a request with those parameters would.\n"
    "  CUDA only. --speculative also times, after each decode row, speculative rounds at that batch\n"
    "  and depth with the acceptance forced (all drafts, then a fixed 75%: synthetic weights accept\n"
    "  nothing): a round is the drafts (mtp: the MTP head; ngram: fixed ids, prompt lookup being host\n"
    "  work), verify with its logits copied back, the host's acceptance pass and accept_verified\n"
    "  (round split), then again as one greedy round with one host synchronisation, its MTP drafts\n"
    "  the next round's, launched eagerly (round fused) and as one CUDA graph per shape (round\n"
    "  graph); reported: tokens per round, round time as a multiple of the plain step (and of a plain\n"
    "  batch x (K+1) step when --batch measures one), tok/s. Real acceptance: `ninferctl run\n"
    "  --speculative ... --stats`.\n"
    "  --media / --image / --video time a multimodal request's first token stage by stage (best and\n"
    "  mean of --repeat, default 3): --media FILE (an image or a video) is read, decoded and\n"
    "  preprocessed by ninferd's media path (FFmpeg, loaded at run time; a video's decoder with\n"
    "  --decode-threads frame threads, default 2 as ninferd's media-decode-threads); the tower encodes it\n"
    "  (on the CPU with --threads N, default every core, or the GPU's with --vision-device cuda, in\n"
    "  batches of --vision-batch-patches patches, default 16384 as ninferd's vision-batch-patches); the\n"
    "  language model prefills the prompt (the item's placeholder tokens and a short question) on\n"
    "  --device cpu (default) or cuda in chunks of --prefill-chunk tokens (default 2048). Reported:\n"
    "  each stage's ms, TTFT = their sum and each one's share. --image WxH / --video SECONDS skip the\n"
    "  decoding (random patches of that tower-input size: multiples of 32 px; a video takes 2\n"
    "  frames/s of --frame, default 832x480, a 30 s 720p\n"
    "  clip as the processor resizes it) and work without FFmpeg.\n";

std::vector<uint32_t> count_list(const char* flag, const std::string& text) {
    std::vector<uint32_t> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ','))
        out.push_back(uint32_t(parse_count(flag, item.c_str())));
    if (out.empty())
        throw Error(std::string("bench: ") + flag + " needs a comma-separated list of counts");
    return out;
}

double parse_number(const char* flag, const char* text, double lo, double hi) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(v >= lo && v <= hi))
        throw Error(std::string("bench: ") + flag + " needs a number in " + std::to_string(lo) + ".." +
                    std::to_string(hi) + ", not '" + text + "'");
    return v;
}

} // namespace

int cmd_bench(int argc, char** argv) {
    std::string artifact, shape, recipe = "q4";
    std::vector<uint32_t> prompt_lens = {512, 8192}, batches = {1, 2, 4, 8};
    std::string kv_dtype = "bf16";
    int gen = 32;
    uint32_t prefill_chunk = 2048;
    bool json = false, decode_only = false;
    core::SamplingParams sampling; // greedy
    core::SpeculativeConfig speculative;
    VisionBenchArgs vision;
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        const bool has_value = i + 1 < argc;
        if ((arg == "--image" || arg == "--frame") && has_value) {
            int& w = arg == "--image" ? vision.image_w : vision.frame_w;
            int& h = arg == "--image" ? vision.image_h : vision.frame_h;
            if (!parse_size(argv[++i], w, h)) throw Error("bench: " + arg + " needs WxH");
        } else if (arg == "--video" && has_value) vision.video_seconds = parse_number("--video", argv[++i], 0.5, 600);
        else if (arg == "--media" && has_value) vision.media_path = argv[++i];
        else if (arg == "--threads" && has_value) vision.threads = unsigned(parse_count("--threads", argv[++i]));
        else if (arg == "--decode-threads" && has_value) vision.decode_threads = int(parse_count("--decode-threads", argv[++i]));
        else if (arg == "--vision-batch-patches" && has_value)
            vision.batch_patches = size_t(parse_count("--vision-batch-patches", argv[++i]));
        else if (arg == "--device" && has_value) vision.device = check_device(argv[++i]);
        else if (arg == "--repeat" && has_value) vision.repeat = std::max(1, int(parse_count("--repeat", argv[++i])));
        else if (arg == "--vision-device" && has_value) {
            const std::string d = argv[++i];
            if (d != "cpu" && d != "cuda") throw Error("bench: --vision-device takes cpu or cuda, not '" + d + "'");
            vision.gpu = d == "cuda";
        }
        else if (arg == "--synthetic" && has_value) shape = argv[++i];
        else if (arg == "--recipe" && has_value) recipe = argv[++i];
        else if (arg == "--prompt-len" && has_value) prompt_lens = count_list("--prompt-len", argv[++i]);
        else if (arg == "--batch" && has_value) batches = count_list("--batch", argv[++i]);
        else if (arg == "--kv-dtype" && has_value) kv_dtype = argv[++i];
        else if (arg == "--gen" && has_value) gen = int(parse_count("--gen", argv[++i]));
        else if (arg == "--prefill-chunk" && has_value) prefill_chunk = uint32_t(parse_count("--prefill-chunk", argv[++i]));
        else if (arg == "--temperature" && has_value) sampling.temperature = float(parse_number("--temperature", argv[++i], 0, 2));
        else if (arg == "--top-p" && has_value) sampling.top_p = float(parse_number("--top-p", argv[++i], 0, 1));
        else if (arg == "--top-k" && has_value) sampling.top_k = int32_t(parse_count("--top-k", argv[++i]));
        else if (arg == "--speculative" && has_value) speculative = core::parse_speculative(argv[++i]);
        else if (arg == "--json") json = true;
        else if (arg == "--decode-only") decode_only = true;
        else if (artifact.empty() && shape.empty() && !arg.empty() && arg[0] != '-') artifact = arg;
        else {
            std::fputs(kBenchUsage, stderr);
            return 2;
        }
    }
    const int n_items = int(!vision.media_path.empty()) + int(vision.image_w > 0) + int(vision.video_seconds > 0);
    if (n_items > 1)
        throw Error("bench: --media, --image and --video are alternatives: one item at a time");
    if (n_items == 1 && !artifact.empty()) {
        vision.json = json;
        vision.prefill_chunk = prefill_chunk;
        return run_vision_bench(artifact, vision);
    }
    if (artifact.empty() == shape.empty() || gen < 1) {
        std::fputs(kBenchUsage, stderr);
        return 2;
    }
    for (uint32_t b : batches)
        if (b < 1 || b > 8)
            throw Error("bench: --batch sizes must be 1..8");
#ifdef NINFER_HAVE_CUDA_BACKEND
    core::DecodeBenchRequest r;
    r.shape = shape;
    r.recipe = recipe;
    r.kv_dtype = core::kv_dtype_from_name(kv_dtype);
    r.batches.assign(batches.begin(), batches.end());
    r.prompt_lens = prompt_lens;
    r.steps = gen;
    r.prefill_chunk = prefill_chunk;
    r.prefill = !decode_only;
    r.sampling = sampling;
    r.spec_k = speculative.k;
    r.spec_mtp = speculative.kind == core::SpeculativeKind::Mtp;
    std::unique_ptr<ModelSession> session;
    if (!artifact.empty()) {
        session = open_model_session(artifact);
        r.weights = &session->weights;
    }
    const core::DecodeBenchReport rep = core::run_decode_bench(r);
    if (!json) {
        std::printf("bench %s --kv-dtype %s\n%s",
                    artifact.empty() ? ("--synthetic " + shape + " --recipe " + recipe).c_str() : artifact.c_str(),
                    kv_dtype.c_str(), rep.text().c_str());
        return 0;
    }
    std::printf("{\"copy_gbps\":%.1f,\"tc_peak_tflops\":%.1f,\"tc_ours_tflops\":%.1f,\"tc_cublaslt_tflops\":%.1f,"
                "\"prefill_chunk\":%u,\"weight_bytes\":%llu,\"prefill\":[",
                rep.copy_gbps, rep.tc_peak.peak_tflops(), rep.tc_peak.ours_tflops, rep.tc_peak.cublaslt_tflops,
                rep.prefill_chunk, (unsigned long long)rep.weight_bytes);
    for (size_t i = 0; i < rep.prefill.size(); ++i)
        std::printf("%s{\"prompt_len\":%u,\"tokens_per_s\":%.2f,\"ttft_ms\":%.2f,\"tflops\":%.2f,"
                    "\"peak_fraction\":%.4f}",
                    i ? "," : "", rep.prefill[i].prompt_len, rep.prefill[i].tokens_per_s, rep.prefill[i].ttft_ms,
                    rep.prefill[i].tflops, rep.prefill[i].peak_fraction);
    std::printf("],\"decode\":[");
    for (size_t i = 0; i < rep.rows.size(); ++i) {
        const core::DecodeBenchRow& d = rep.rows[i];
        std::printf("%s{\"batch\":%d,\"depth\":%u,\"steps\":%d,\"step_ms\":%.4f,\"min_step_ms\":%.4f,"
                    "\"max_step_ms\":%.4f,\"tokens_per_s\":%.2f,\"bytes_per_step\":%.0f,\"roofline_fraction\":%.4f}",
                    i ? "," : "", d.batch, d.depth, d.steps, d.step_ms, d.min_step_ms, d.max_step_ms, d.tokens_per_s,
                    d.bytes_per_step, d.roofline_fraction);
    }
    std::printf("],\"speculative\":[");
    for (size_t i = 0; i < rep.spec_rows.size(); ++i) {
        const core::SpecBenchRow& s = rep.spec_rows[i];
        std::printf("%s{\"drafter\":\"%s\",\"k\":%d,\"batch\":%d,\"depth\":%u,\"accept\":\"%s\",\"round\":\"%s\","
                    "\"rounds\":%d,\"tokens_per_round\":%.3f,\"round_ms\":%.4f,\"min_round_ms\":%.4f,\"max_round_ms\":%.4f,"
                    "\"step_ms\":%.4f,\"cost_x\":%.3f,\"floor_ms\":%.4f,\"tokens_per_s\":%.2f,\"round_graphs\":%zu,"
                    "\"graph_mib\":%.3f}",
                    i ? "," : "", s.drafter.c_str(), s.k, s.batch, s.depth, s.accept.c_str(), s.round.c_str(), s.rounds,
                    s.tokens_per_round, s.round_ms, s.min_round_ms, s.max_round_ms, s.step_ms, s.cost_x, s.floor_ms,
                    s.tokens_per_s, s.round_graphs, s.graph_mib);
    }
    std::printf("]}\n");
    return 0;
#else
    (void)json;
    (void)prefill_chunk;
    (void)decode_only;
    (void)speculative;
    throw Error("bench: this ninferctl has no CUDA backend (configure with -DNINFER_CUDA=ON); --device cuda is unavailable");
#endif
}

} // namespace ninfer::ctl
