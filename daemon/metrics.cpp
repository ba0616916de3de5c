// ninfer::daemon - Prometheus text rendering of engine and loop figures.
#include "daemon/metrics.h"

#include "core/engine/generation.h"
#include "daemon/serve_figures.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace ninfer::daemon {
namespace {

void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

void sample(std::ostringstream& out, const char* name, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    out << name << " " << buf << "\n";
}

void one(std::ostringstream& out, const char* name, const char* type, const char* help, double value) {
    family(out, name, type, help);
    sample(out, name, value);
}

void histogram(std::ostringstream& out, const std::string& name, const char* help, const Histogram& h) {
    family(out, name.c_str(), "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
        cumulative += h.counts[i];
        out << name << "_bucket{le=\"" << h.bounds[i] << "\"} " << cumulative << "\n";
    }
    out << name << "_bucket{le=\"+Inf\"} " << h.count << "\n";
    sample(out, (name + "_sum").c_str(), h.sum);
    out << name << "_count " << h.count << "\n";
}

} // namespace

ProcessMemory read_process_memory() {
    ProcessMemory m;
    FILE* f = std::fopen("/proc/self/status", "re");
    if (!f) return m;
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f)) {
        if (std::sscanf(line, "VmRSS: %llu kB", &kib) == 1) m.resident_bytes = kib * 1024;
        else if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1) m.resident_peak_bytes = kib * 1024;
    }
    std::fclose(f);
    return m;
}

void Histogram::observe(double value) {
    for (size_t i = 0; i < bounds.size(); ++i)
        if (value <= bounds[i]) {
            ++counts[i];
            break;
        }
    ++count;
    sum += value;
}

std::string render_metrics(const DaemonContext& ctx) {
    const ServeFigures f = read_serve_figures(ctx);
    std::ostringstream out;
    double prompt_s = f.prefill_s, decode_s = f.decode_s;
    uint64_t prefill_n = f.prefill_tokens_total, gen_n = f.generation_tokens_total;
    uint64_t steps = f.decode_steps_total;

    family(out, "ninfer_build_info", "gauge", "This ninferd's version and whether it has the CUDA backend (value 1)");
#ifdef NINFER_HAVE_CUDA_BACKEND
    out << "ninfer_build_info{version=\"" NINFER_VERSION_STRING "\",cuda=\"on\"} 1\n";
#else
    out << "ninfer_build_info{version=\"" NINFER_VERSION_STRING "\",cuda=\"off\"} 1\n";
#endif
    family(out, "ninfer_model_info", "gauge", "Served model (value 1)");
    // The backend in use (cpu, cuda, script) once resolved, not the --device option ("auto").
    const std::string& device = ctx.device_in_use.empty() ? ctx.config.device : ctx.device_in_use;
    out << "ninfer_model_info{model=\"" << ctx.model_id << "\",device=\"" << device << "\"} 1\n";
    one(out, "ninfer_engine_ready", "gauge", "1 when the model is loaded and serving", ctx.state == ServeState::Ready);
    one(out, "ninfer_max_concurrency", "gauge", "Lanes decoding together", f.n_lanes);
    one(out, "ninfer_max_context_tokens", "gauge", "Longest sequence per request", ctx.config.max_context);
    one(out, "ninfer_requests_running", "gauge", "Requests holding a lane", f.n_requests_running);
    one(out, "ninfer_requests_waiting", "gauge", "Requests queued for a lane", f.n_requests_waiting);
    one(out, "ninfer_requests_prefilling", "gauge", "Requests prefilling their prompt", f.n_requests_prefilling);
    one(out, "ninfer_kv_reserved_tokens", "gauge", "KV tokens reserved by admitted requests", double(f.kv_reserved_tokens));
    one(out, "ninfer_kv_capacity_tokens", "gauge", "KV pool capacity in tokens", double(f.kv_capacity_tokens));
    one(out, "ninfer_prefix_cache_used_bytes", "gauge", "Host memory held by prefix-cache snapshots",
        double(f.host_cache_used_bytes));
    one(out, "ninfer_prefix_cache_budget_bytes", "gauge", "Host memory budget of the prefix cache (--host-cache-mib)",
        double(f.host_cache_budget_bytes));
    one(out, "ninfer_prefix_cache_entries", "gauge", "Prefix-cache snapshots held", double(f.host_cache_entries));
    one(out, "ninfer_prompt_tokens_total", "counter", "Prompt tokens of admitted requests", double(f.prompt_tokens_total));
    one(out, "ninfer_prompt_tokens_cached_total", "counter", "Prompt tokens reused from a lane",
        double(f.prompt_tokens_cached_total));
    one(out, "ninfer_prefill_tokens_total", "counter", "Prompt tokens computed", double(prefill_n));
    one(out, "ninfer_generation_tokens_total", "counter", "Tokens generated", double(gen_n));
    one(out, "ninfer_decode_steps_total", "counter", "Batched decode steps", double(steps));
    // The host's per-token work (issue 27.4): divide by ninfer_generation_tokens_total for a mean per token.
    one(out, "ninfer_token_report_cpu_seconds_total", "counter",
        "Engine thread CPU time reporting sampled tokens (detokenise, parse, hand to the loop)", f.token_report_cpu_s);
    one(out, "ninfer_loop_engine_event_cpu_seconds_total", "counter",
        "Loop thread CPU time running engine events (render, write)", f.loop_events_cpu_s);
    one(out, "ninfer_loop_engine_events_total", "counter", "Engine events run on the loop thread",
        double(f.loop_events_total));
    one(out, "ninfer_loop_engine_event_batches_total", "counter", "Loop wake-ups that ran engine events",
        double(f.loop_batches_total));
    one(out, "ninfer_http_socket_writes_total", "counter", "Writes issued on HTTP connections",
        double(f.socket_writes_total));
    one(out, "ninfer_http_socket_write_bytes_total", "counter", "Bytes written on HTTP connections",
        double(f.socket_write_bytes_total));
    one(out, "ninfer_prefix_cache_hits_total", "counter", "Admissions restored from the prefix cache",
        double(f.prefix_cache_hits_total));
    one(out, "ninfer_prefix_cache_misses_total", "counter", "Admissions the prefix cache could not serve",
        double(f.prefix_cache_misses_total));
    one(out, "ninfer_prefix_cache_checkpoints_total", "counter", "Lane images begun for the prefix cache",
        double(f.prefix_cache_checkpoints_total));
    one(out, "ninfer_prefix_cache_checkpoints_skipped_total", "counter",
        "Checkpoints skipped because every copy slot was busy (waiting would have stalled every lane)",
        double(f.prefix_cache_checkpoints_skipped_total));
    one(out, "ninfer_prefill_slices_total", "counter",
        "Layer slices of prompt chunks run with decode steps between them (--prefill-slice-layers)",
        double(f.prefill_slices_total));
    // Speculative decoding, under vLLM's spec_decode names; positions 0..K-1 of --speculative's K.
    one(out, "ninfer_spec_decode_num_drafts_total", "counter", "Speculative rounds (draft + verify, per lane)",
        double(f.spec_rounds_total));
    one(out, "ninfer_spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified",
        double(f.spec_draft_tokens_total));
    one(out, "ninfer_spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted",
        double(f.spec_accepted_tokens_total));
    one(out, "ninfer_spec_decode_num_draft_tokens_refused_total", "counter",
        "Draft tokens of constrained requests that their grammar refused before verification",
        double(f.spec_draft_tokens_refused_total));
    one(out, "ninfer_spec_decode_lane_pauses_total", "counter",
        "Times a speculating lane paused to plain steps after 8 rounds below --speculative-min-acceptance",
        double(f.spec_lane_pauses_total));
    one(out, "ninfer_cuda_graph_capture_failures_total", "counter",
        "CUDA graphs of speculative rounds that failed to capture or instantiate (those shapes run eagerly)",
        double(f.graph_capture_failures_total));
    one(out, "ninfer_media_items_decoded_total", "counter", "Images and videos decoded (media pool, FFmpeg)",
        double(f.media_items_decoded_total));
    one(out, "ninfer_media_decode_seconds_total", "counter",
        "Wall time of the requests' media decoding and resizing, seconds", f.media_decode_s_total);
    one(out, "ninfer_vision_items_encoded_total", "counter", "Images and videos run through the vision tower",
        double(f.vision_items_encoded_total));
    one(out, "ninfer_vision_encode_seconds_total", "counter", "Time the vision tower took, seconds",
        f.vision_encode_s_total);
    family(out, "ninfer_spec_decode_num_accepted_tokens_per_pos", "counter", "Draft tokens accepted by position in the round");
    const int spec_k = core::parse_speculative(ctx.config.speculative).k;
    for (int i = 0; i < spec_k && size_t(i) < f.spec_accepted_per_pos.size(); ++i)
        out << "ninfer_spec_decode_num_accepted_tokens_per_pos{position=\"" << i << "\"} " << f.spec_accepted_per_pos[size_t(i)]
            << "\n";
    family(out, "ninfer_requests_total", "counter", "Requests by outcome");
    out << "ninfer_requests_total{outcome=\"finished\"} " << f.requests_finished_total << "\n";
    out << "ninfer_requests_total{outcome=\"cancelled\"} " << f.requests_cancelled_total << "\n";
    out << "ninfer_requests_total{outcome=\"rejected\"} " << f.requests_rejected_total << "\n";
    family(out, "ninfer_http_responses_total", "counter", "HTTP responses by status code");
    for (const auto& [code, n] : ctx.counters.http_responses_by_status)
        out << "ninfer_http_responses_total{code=\"" << code << "\"} " << n << "\n";
    one(out, "ninfer_client_disconnects_total", "counter", "Chat requests whose client left before the end",
        double(ctx.counters.n_client_disconnects_total));
    histogram(out, "ninfer_time_to_first_token_seconds", "Request arrival to first token", ctx.counters.ttft_seconds);
    histogram(out, "ninfer_request_duration_seconds", "Request arrival to last token", ctx.counters.request_seconds);
    // vLLM's names (vllm:* there): queue time, the gaps between a reply's tokens, and the
    // prompt and output lengths of finished requests.
    histogram(out, "ninfer_request_queue_time_seconds", "Request arrival to a lane taking it", ctx.counters.queue_seconds);
    histogram(out, "ninfer_inter_token_latency_seconds", "Time between two tokens of one reply",
              ctx.counters.token_gap_seconds);
    histogram(out, "ninfer_request_prompt_tokens", "Prompt tokens of a finished request", ctx.counters.prompt_tokens);
    histogram(out, "ninfer_request_generation_tokens", "Generated tokens of a finished request",
              ctx.counters.generation_tokens);
    const ProcessMemory memory = read_process_memory();
    one(out, "ninfer_process_resident_bytes", "gauge", "Resident memory now (VmRSS)", double(memory.resident_bytes));
    one(out, "ninfer_process_resident_peak_bytes", "gauge", "Most resident memory since start (VmHWM)",
        double(memory.resident_peak_bytes));
    const HttpMemoryPeaks peaks = ctx.http ? ctx.http->memory_peaks() : HttpMemoryPeaks{};
    one(out, "ninfer_http_inflight_body_bytes", "gauge", "Request body bytes held now, all connections",
        double(ctx.http ? ctx.http->inflight_body_bytes() : 0));
    one(out, "ninfer_http_inflight_body_peak_bytes", "gauge", "Most request body bytes held at once since start",
        double(peaks.inflight_body_bytes));
    one(out, "ninfer_http_request_body_peak_bytes", "gauge", "Largest request body received since start",
        double(peaks.request_body_bytes));
    one(out, "ninfer_http_connection_output_peak_bytes", "gauge",
        "Most unsent response bytes queued on one connection since start", double(peaks.connection_output_bytes));

    one(out, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", double(prefill_n));
    one(out, "llamacpp:prompt_seconds_total", "counter", "Prompt process time", prompt_s);
    one(out, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.", double(gen_n));
    one(out, "llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time", decode_s);
    one(out, "llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls", double(steps));
    one(out, "llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
        f.prompt_tokens_per_s);
    one(out, "llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
        f.generated_tokens_per_s);
    one(out, "llamacpp:n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call",
        f.busy_lanes_per_decode_step);
    one(out, "llamacpp:requests_processing", "gauge", "Number of requests processing.", f.n_requests_running);
    one(out, "llamacpp:requests_deferred", "gauge", "Number of requests deferred.", f.n_requests_waiting);
    // llama.cpp's meaning: the largest sequence seen, finished requests and the lanes now running.
    uint64_t n_tokens_max = ctx.counters.n_tokens_max;
    if (ctx.engine)
        for (const auto& lane : ctx.engine->stats().lane_tokens) n_tokens_max = std::max<uint64_t>(n_tokens_max, lane.load());
    one(out, "llamacpp:n_tokens_max", "gauge", "Largest observed n_tokens.", double(n_tokens_max));
    return out.str();
}

} // namespace ninfer::daemon
