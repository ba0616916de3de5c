// ninfer::ctl - the multimodal first-token bench's report as text and as JSON.
#include "ctl/bench_vision.h"

#include <cstdarg>
#include <cstdio>

namespace ninfer::ctl {
namespace {

void append(std::string& out, const char* format, ...) {
    va_list args, again;
    va_start(args, format);
    va_copy(again, args);
    const int n = std::vsnprintf(nullptr, 0, format, args);
    va_end(args);
    const size_t at = out.size();
    out.resize(at + size_t(n) + 1);
    std::vsnprintf(out.data() + at, size_t(n) + 1, format, again);
    va_end(again);
    out.resize(at + size_t(n));
}

// JSON string contents: quotes, backslashes and control bytes escaped.
std::string json_escaped(const std::string& s) {
    std::string out;
    for (unsigned char ch : s) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += char(ch);
        } else if (ch < 0x20) {
            append(out, "\\u%04x", ch);
        } else {
            out += char(ch);
        }
    }
    return out;
}

void stage_line(std::string& out, const char* name, const StageTime& t, const std::string& what) {
    if (!t.measured) return;
    append(out, "  %-10s best %10.2f ms  mean %10.2f ms  %5.1f %%  (%s)\n", name, t.best_ms, t.mean_ms, t.share_pct,
           what.c_str());
}

void stage_json(std::string& out, const char* name, const StageTime& t) {
    append(out, ",\"%s\":{\"measured\":%s,\"best_ms\":%.3f,\"mean_ms\":%.3f,\"share_pct\":%.2f}", name,
           t.measured ? "true" : "false", t.best_ms, t.mean_ms, t.share_pct);
}

} // namespace

std::string vision_bench_text(const VisionBenchReport& r) {
    std::string out;
    append(out, "multimodal first token: %s %s", r.kind.c_str(), r.source.c_str());
    if (r.source_width) append(out, " (%dx%d)", r.source_width, r.source_height);
    append(out, " -> tower input %dx%d", r.width, r.height);
    if (r.kind == "video") append(out, " x %d frames", r.frames);
    append(out, ": %zu patches, %zu merged tokens; prompt %zu tokens (%zu vision); best and mean of %d\n", r.patches,
           r.merged_tokens, r.prompt_tokens, r.vision_tokens, r.repeat);
    if (r.preprocess.measured)
        stage_line(out, "preprocess", r.preprocess, "read, decode, sample, resize, patchify: the daemon's media path");
    else
        append(out, "  preprocess not measured: %s\n", r.preprocess_note.c_str());
    const std::string tower = r.tower_device == "cpu" ? "CPU tower, " + std::to_string(r.threads) + " threads" : "GPU tower";
    stage_line(out, "tower", r.tower, tower);
    stage_line(out, "prefill", r.prefill, r.prefill_device + " backend, " + std::to_string(r.prompt_tokens) + " tokens");
    append(out, "  %-10s best %10.2f ms  mean %10.2f ms  100.0 %%  (%s)\n", "TTFT", r.ttft_best_ms, r.ttft_mean_ms,
           r.preprocess.measured ? "preprocess + tower + prefill" : "tower + prefill: preprocessing not included");
    return out;
}

std::string vision_bench_json(const VisionBenchReport& r) {
    std::string out;
    append(out, "{\"kind\":\"%s\",\"source\":\"%s\",\"source_width\":%d,\"source_height\":%d,\"width\":%d,\"height\":%d,"
                "\"frames\":%d,\"patches\":%zu,\"merged_tokens\":%zu,\"prompt_tokens\":%zu,\"vision_tokens\":%zu,"
                "\"tower_device\":\"%s\",\"prefill_device\":\"%s\",\"threads\":%u,\"repeat\":%d,\"preprocess_note\":\"%s\"",
           r.kind.c_str(), json_escaped(r.source).c_str(), r.source_width, r.source_height, r.width, r.height, r.frames,
           r.patches, r.merged_tokens, r.prompt_tokens, r.vision_tokens, r.tower_device.c_str(), r.prefill_device.c_str(),
           r.threads, r.repeat, json_escaped(r.preprocess_note).c_str());
    stage_json(out, "preprocess", r.preprocess);
    stage_json(out, "tower", r.tower);
    stage_json(out, "prefill", r.prefill);
    append(out, ",\"ttft_best_ms\":%.3f,\"ttft_mean_ms\":%.3f}\n", r.ttft_best_ms, r.ttft_mean_ms);
    return out;
}

} // namespace ninfer::ctl
