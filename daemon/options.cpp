// ninfer::daemon - the option table and its validation, help and scdoc renderers.
#include "daemon/options.h"

#include "core/util/error.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

namespace ninfer::daemon {
namespace {

constexpr int64_t kNoLimit = INT64_MAX;
constexpr uint8_t kR = kOptionReloadable;

// name, kind, default, min, max, choices, value name, help, flags, field (option_fields.h).
// Adding an option: options.h says how (one row here, one DaemonConfig member, the code using it).
constexpr OptionSpec kOptions[] = {
    {"config", OptionKind::Text, "", 0, 0, "", "FILE",
     "configuration file (default /etc/ninfer/ninferd.conf, then FILE.d/*.conf)", kOptionCliOnly, {}},
    {"artifact", OptionKind::Text, "", 0, 0, "", "PATH", "the .ninfer model artifact to serve", 0,
     text_field<&DaemonConfig::artifact_path>()},
    {"host", OptionKind::Text, "127.0.0.1", 0, 0, "", "HOST", "address the HTTP API listens on", 0,
     text_field<&DaemonConfig::host>()},
    {"port", OptionKind::Integer, "8080", 0, 65535, "", "PORT", "TCP port of the HTTP API (0 = any free port)", 0,
     integer_field<&DaemonConfig::port>()},
    {"model-id", OptionKind::Text, "", 0, 0, "", "ID",
     "model id clients send and /v1/models lists (default: the artifact's name)", 0,
     text_field<&DaemonConfig::model_id>()},
    {"control-socket", OptionKind::Text, "/run/ninfer/ctl/control.sock", 0, 0, "", "PATH",
     "Unix socket of the control protocol (ninferctl)", 0,
     text_field<&DaemonConfig::control_socket>()},
    {"state-dir", OptionKind::Text, "/var/lib/ninfer", 0, 0, "", "DIR",
     "directory for slot files (slots/) and --persist-slots (lanes/)", 0,
     text_field<&DaemonConfig::state_dir>()},
    {"host-cache-mib", OptionKind::Integer, "4096", 0, 1048576, "", "MIB",
     "host memory for prefix-cache checkpoints, page-locked (0 = no prefix cache)", 0,
     integer_field<&DaemonConfig::host_cache_mib>()},
    {"persist-slots", OptionKind::Boolean, "false", 0, 0, "", "BOOL",
     "save every lane's sequence at stop and load it back at start (state-dir/lanes), so a restart keeps "
     "conversations' context",
     0, bool_field<&DaemonConfig::persist_slots>()},
    {"verify-artifact", OptionKind::Boolean, "false", 0, 0, "", "BOOL",
     "check every payload object of the artifact against the CRC-32C its writer recorded before serving "
     "(reads the whole artifact once; ninferctl inspect --verify does the same offline)",
     0, bool_field<&DaemonConfig::verify_artifact>()},
    {"device", OptionKind::Choice, "auto", 0, 0, "auto|cpu|cuda|script:*", "DEVICE",
     "compute backend: auto (cuda if a GPU is found, else cpu), cpu or cuda", 0,
     text_field<&DaemonConfig::device>()},
    {"threads", OptionKind::Integer, "0", 0, 1024, "", "N", "CPU backend threads (0 = one per core)", 0,
     integer_field<&DaemonConfig::threads>()},
    {"max-context", OptionKind::Choice, "auto", 16, 1048576, "auto|[0-9]*", "TOKENS|auto",
     "longest sequence (prompt + output) one request may use; auto = the model's max_position_embeddings "
     "if max-concurrency lanes of it fit the memory plan, else the most that fits (logged with the figures)", 0,
     auto_or_integer_field<&DaemonConfig::max_context>()},
    {"kv-capacity", OptionKind::Choice, "auto", 0, 0, "auto|[0-9]*", "TOKENS|auto",
     "tokens in the KV pool shared by all lanes (auto = max-context x max-concurrency)", 0,
     auto_or_integer_field<&DaemonConfig::kv_capacity_tokens>()},
    {"kv-dtype", OptionKind::Choice, "bf16", 0, 0, "bf16|fp8|int8", "TYPE", "KV cache element type", 0,
     text_field<&DaemonConfig::kv_dtype>()},
    {"speculative", OptionKind::Choice, "auto", 0, 0,
     "auto|off|mtp:1|mtp:2|mtp:3|mtp:4|mtp:5|ngram:1|ngram:2|ngram:3|ngram:4|ngram:5", "auto|off|mtp:K|ngram:K",
     "speculative decoding: K drafts per round from the artifact's MTP head or from n-gram prompt lookup, "
     "verified in one step (exact: greedy output is unchanged); requests may lower it; CPU and CUDA "
     "backends; auto = mtp:3 on the CUDA backend when the artifact has an MTP head, else off",
     0, text_field<&DaemonConfig::speculative>()},
    {"speculative-max-lanes", OptionKind::Integer, "4", 0, 8, "", "N",
     "speculate only while at most N lanes decode (0 = any number; vLLM's disable_by_batch_size): in larger "
     "batches a round costs more than its accepted drafts give",
     0, integer_field<&DaemonConfig::speculative_max_lanes>()},
    {"speculative-min-acceptance", OptionKind::Number, "0.5", 0, 1000, "", "F",
     "a speculating lane whose last 8 rounds accepted under this share of their drafts takes plain steps "
     "for a while (16 steps, doubling per failed retry up to 1024); 0 = never pause",
     0, number_field<&DaemonConfig::speculative_min_acceptance>()},
    {"max-concurrency", OptionKind::Integer, "4", 1, 8, "", "N", "lanes that decode together in one batch", 0,
     integer_field<&DaemonConfig::max_concurrency>()},
    {"prefill-chunk", OptionKind::Integer, "2048", 1, 65536, "", "TOKENS",
     "prompt tokens prefilled per step, interleaved with decode steps", 0,
     integer_field<&DaemonConfig::prefill_chunk>()},
    {"prefill-chunk-decoding", OptionKind::Integer, "1024", 0, 65536, "", "TOKENS",
     "prompt tokens prefilled per step while other requests decode (0 = prefill-chunk): smaller bounds "
     "their inter-token latency during a long prompt, larger gives that prompt its first token sooner", 0,
     integer_field<&DaemonConfig::prefill_chunk_decoding>()},
    {"prefill-slice-layers", OptionKind::Integer, "0", 0, 1024, "", "LAYERS",
     "while other requests decode, run a prompt chunk this many layers at a time with their decode step "
     "between slices (0 = the whole chunk between two steps): smaller bounds their inter-token latency "
     "to about one slice plus one step, and delays that prompt's first token by the steps in between "
     "(measured trade-offs: kernels/PERF_NOTES.md, session 19)", 0,
     integer_field<&DaemonConfig::prefill_slice_layers>()},
    {"default-max-tokens", OptionKind::Integer, "8192", 1, 1048576, "", "TOKENS",
     "output limit when a request sets none (capped by what fits in max-context)", kR,
     integer_field<&DaemonConfig::default_max_tokens>()},
    {"strict-max-tokens", OptionKind::Boolean, "false", 0, 0, "", "BOOL",
     "reject a max_tokens beyond the context left after the prompt (default: shorten it, as llama.cpp does)", kR,
     bool_field<&DaemonConfig::strict_max_tokens>()},
    {"grammar-cache", OptionKind::Integer, "64", 0, 100000, "", "N",
     "compiled grammars of constrained requests (JSON schemas, GBNF, tool calls) kept for reuse, least "
     "recently used dropped first (0 = compile every time)", 0,
     integer_field<&DaemonConfig::grammar_cache_entries>()},
    // Sampling defaults for requests that leave a field out; "" = the model's generation_config.json
    // (then OpenAI's neutral values). Bounds in thousandths, as the request fields allow.
    {"temperature", OptionKind::Number, "", 0, 2000, "", "T", "default temperature (0 = greedy)", kR,
     sampling_field<&core::SamplingDefaults::temperature>()},
    {"top-p", OptionKind::Number, "", 0, 1000, "", "P", "default nucleus sampling mass", kR,
     sampling_field<&core::SamplingDefaults::top_p>()},
    {"top-k", OptionKind::Number, "", 0, 1000000000, "", "K", "default top-k (0 = all tokens)", kR,
     sampling_field<&core::SamplingDefaults::top_k>()},
    {"min-p", OptionKind::Number, "", 0, 1000, "", "P", "default min-p", kR,
     sampling_field<&core::SamplingDefaults::min_p>()},
    {"presence-penalty", OptionKind::Number, "", -2000, 2000, "", "X", "default presence penalty", kR,
     sampling_field<&core::SamplingDefaults::presence_penalty>()},
    {"frequency-penalty", OptionKind::Number, "", -2000, 2000, "", "X", "default frequency penalty", kR,
     sampling_field<&core::SamplingDefaults::frequency_penalty>()},
    {"repetition-penalty", OptionKind::Number, "", 10, 10000, "", "X", "default repetition penalty (1 = none)", kR,
     sampling_field<&core::SamplingDefaults::repetition_penalty>()},
    {"seed", OptionKind::Number, "", 0, 9000000000000000000, "", "N",
     "default seed (unset: a random one per request)", kR, sampling_field<&core::SamplingDefaults::seed>()},
    {"max-pending", OptionKind::Integer, "64", 0, 100000, "", "N",
     "requests waiting for a lane before new ones get 429", 0,
     integer_field<&DaemonConfig::max_pending>()},
    {"pending-timeout-ms", OptionKind::Integer, "60000", 1, kNoLimit, "", "MS",
     "longest wait for a lane before 503 request_queue_timeout", 0,
     integer_field<&DaemonConfig::pending_timeout_ms>()},
    {"drain-timeout-s", OptionKind::Integer, "30", 0, 86400, "", "SECONDS",
     "on SIGTERM, how long in-flight requests may run before the daemon exits", kR,
     integer_field<&DaemonConfig::drain_timeout_s>()},
    {"api-key", OptionKind::Text, "", 0, 0, "", "KEY",
     "require this key (Authorization: Bearer or x-api-key) on every route but /health", kR | kOptionSecret,
     list_field<&DaemonConfig::api_keys>()},
    {"api-key-file", OptionKind::Text, "", 0, 0, "", "FILE",
     "file of accepted keys, one per line, # comments", kR,
     key_file_field<&DaemonConfig::api_keys>()},
    {"cors-origins", OptionKind::Text, "", 0, 0, "", "LIST",
     "comma-separated origins allowed by CORS (* = any); empty = CORS off", kR,
     list_field<&DaemonConfig::cors_origins>()},
    {"max-body-mib", OptionKind::Integer, "64", 1, 4096, "", "MIB", "largest request body (413 above it)", kR,
     integer_field<&DaemonConfig::max_body_bytes, 20>()},
    {"max-header-kib", OptionKind::Integer, "16", 1, 1024, "", "KIB",
     "largest request line + headers (431 above it)", kR,
     integer_field<&DaemonConfig::max_header_bytes, 10>()},
    {"max-connections", OptionKind::Integer, "1024", 1, 1000000, "", "N", "open HTTP connections at most", kR,
     integer_field<&DaemonConfig::max_connections>()},
    {"header-timeout-s", OptionKind::Integer, "60", 1, 3600, "", "SECONDS",
     "time from a request's first byte to the end of its headers (408 after it)", kR,
     integer_field<&DaemonConfig::header_timeout_s>()},
    {"body-timeout-s", OptionKind::Integer, "300", 1, 86400, "", "SECONDS",
     "time from the end of a request's headers to the end of its body (408 after it)", kR,
     integer_field<&DaemonConfig::body_timeout_s>()},
    {"max-inflight-body-mib", OptionKind::Integer, "1024", 1, 1048576, "", "MIB",
     "request body bytes held at once over all connections (being received or being served); 503 past it", kR,
     integer_field<&DaemonConfig::max_inflight_body_bytes, 20>()},
    {"output-buffer-kib", OptionKind::Integer, "1024", 16, 1048576, "", "KIB",
     "unsent output a connection (HTTP or control) may queue before its input is no longer read", kR,
     integer_field<&DaemonConfig::output_buffer_bytes, 10>()},
    {"write-timeout-s", OptionKind::Integer, "60", 1, 86400, "", "SECONDS",
     "a peer that reads none of its queued output this long is disconnected (its request cancelled)", kR,
     integer_field<&DaemonConfig::write_timeout_s>()},
    {"idle-timeout-s", OptionKind::Integer, "75", 1, 86400, "", "SECONDS",
     "keep-alive connections idle this long are closed", kR,
     integer_field<&DaemonConfig::idle_timeout_s>()},
    {"allowed-local-media-path", OptionKind::Text, "", 0, 0, "", "DIR",
     "serve file:// image and video URLs from under DIR (vLLM's name); empty = file:// refused", 0,
     text_field<&DaemonConfig::allowed_local_media_path>()},
    {"media-max-mib", OptionKind::Integer, "256", 1, 4096, "", "MIB",
     "encoded image and video bytes of one request at most (400 past it)", 0,
     integer_field<&DaemonConfig::media_max_bytes, 20>()},
    {"media-max-pixels", OptionKind::Integer, "67108864", 1024, 1073741824, "", "PIXELS",
     "largest decoded frame (width x height, read from the headers before decoding; 400 past it)", 0,
     integer_field<&DaemonConfig::media_max_pixels>()},
    {"media-max-frames", OptionKind::Integer, "768", 2, 768, "", "N",
     "frames sampled from one video at most (below the model's max_frames, fewer are sampled)", 0,
     integer_field<&DaemonConfig::media_max_frames>()},
    {"media-max-video-seconds", OptionKind::Integer, "600", 1, 86400, "", "SECONDS",
     "longest video a request may send (400 past it)", 0, integer_field<&DaemonConfig::media_max_video_seconds>()},
    {"media-max-items", OptionKind::Integer, "16", 1, 256, "", "N", "images and videos of one request at most", 0,
     integer_field<&DaemonConfig::media_max_items>()},
    {"media-max-vision-tokens", OptionKind::Integer, "16384", 4, 1048576, "", "TOKENS",
     "merged vision tokens of one request's images and videos at most (400 past it)", 0,
     integer_field<&DaemonConfig::media_max_vision_tokens>()},
    {"vision-device", OptionKind::Choice, "auto", 0, 0, "auto|cpu|cuda", "DEVICE",
     "where the vision tower runs: cpu, cuda (the GPU; needs --device cuda) or auto (cuda when the backend is)",
     0, text_field<&DaemonConfig::vision_device>()},
    {"vision-batch-patches", OptionKind::Integer, "16384", 4096, 65536, "", "N",
     "patches the GPU vision tower runs at once (a video's frame pairs packed up to N; at least a 1024x1024 "
     "image's 4096): more run video "
     "faster and take more GPU memory (planned) and pinned host memory", 0,
     integer_field<&DaemonConfig::vision_batch_patches>()},
    {"media-decode-threads", OptionKind::Integer, "2", 1, 64, "", "N",
     "threads decoding images and video (FFmpeg, loaded when the first media request comes); each video's "
     "decoder also runs up to N frame threads", 0,
     integer_field<&DaemonConfig::media_decode_threads>()},
    {"enable-thinking", OptionKind::Boolean, "true", 0, 0, "", "BOOL",
     "thinking on by default (a request's chat_template_kwargs or reasoning_effort overrides)", kR,
     bool_field<&DaemonConfig::enable_thinking>()},
    {"log-level", OptionKind::Choice, "info", 0, 0, "debug|info|warning|error", "LEVEL",
     "lowest level logged (journald when run by systemd, stderr otherwise)", kR,
     text_field<&DaemonConfig::log_level>()},
    {"check-config", OptionKind::Action, "", 0, 0, "", "",
     "validate the configuration and artifact, print the effective settings, exit", kOptionCliOnly, {}},
    {"version", OptionKind::Action, "", 0, 0, "", "", "print the version and exit", kOptionCliOnly, {}},
    {"help", OptionKind::Action, "", 0, 0, "", "", "print this help and exit", kOptionCliOnly, {}},
    {"help-scdoc", OptionKind::Action, "", 0, 0, "", "", "print the options as scdoc (man page build)",
     kOptionCliOnly | kOptionHidden, {}},
};

bool parse_int(std::string_view text, int64_t& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

int parse_bool_word(std::string_view v) { // 1 true, 0 false, -1 not a boolean
    for (std::string_view t : {"true", "yes", "on", "1"})
        if (v == t) return 1;
    for (std::string_view f : {"false", "no", "off", "0"})
        if (v == f) return 0;
    return -1;
}

bool matches_choice(std::string_view choices, std::string_view value) {
    size_t start = 0;
    while (start <= choices.size()) {
        size_t bar = choices.find('|', start);
        std::string_view c = choices.substr(start, bar == std::string_view::npos ? bar : bar - start);
        if (c == "[0-9]*") {
            int64_t n = 0;
            if (parse_int(value, n) && n > 0) return true;
        } else if (!c.empty() && c.back() == '*') {
            if (value.size() > c.size() - 1 && value.substr(0, c.size() - 1) == c.substr(0, c.size() - 1))
                return true;
        } else if (c == value) {
            return true;
        }
        if (bar == std::string_view::npos) break;
        start = bar + 1;
    }
    return false;
}

std::string fail_prefix(std::string_view where, std::string_view name) {
    return "config: " + std::string(where) + ": option '" + std::string(name) + "'";
}

} // namespace

std::span<const OptionSpec> option_table() { return kOptions; }

int64_t option_integer(std::string_view text) {
    int64_t n = 0;
    return parse_int(text, n) ? n : 0;
}

bool option_bool(std::string_view text) { return parse_bool_word(text) == 1; }

std::optional<double> option_number(std::string_view text) {
    if (text.empty()) return std::nullopt;
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

bool option_number_in(std::string_view text, int64_t min_thousandths, int64_t max_thousandths) {
    std::optional<double> v = option_number(text);
    return v && *v * 1000 >= double(min_thousandths) && *v * 1000 <= double(max_thousandths);
}

std::string option_number_range(const OptionSpec& o) {
    auto show = [](int64_t t) {
        std::string s = std::to_string(double(t) / 1000);
        while (s.back() == '0') s.pop_back();
        if (s.back() == '.') s.pop_back();
        return s;
    };
    return show(o.min_value) + ".." + show(o.max_value);
}

const OptionSpec* find_option(std::string_view name) {
    for (const OptionSpec& o : kOptions)
        if (o.name == name) return &o;
    return nullptr;
}

Settings::Settings() {
    for (const OptionSpec& o : kOptions)
        if (o.kind != OptionKind::Action) values_[std::string(o.name)] = std::string(o.default_value);
}

void Settings::set(std::string_view name, std::string_view value, std::string_view where) {
    const OptionSpec* o = find_option(name);
    if (!o || o->kind == OptionKind::Action)
        throw Error("config: " + std::string(where) + ": unknown option '" + std::string(name) + "'");
    switch (o->kind) {
    case OptionKind::Integer: {
        int64_t n = 0;
        if (!parse_int(value, n))
            throw Error(fail_prefix(where, name) + " wants an integer, got '" + std::string(value) + "'");
        if (n < o->min_value || n > o->max_value)
            throw Error(fail_prefix(where, name) + " must be in " + std::to_string(o->min_value) + ".." +
                        std::to_string(o->max_value) + ", got " + std::to_string(n));
        break;
    }
    case OptionKind::Boolean:
        if (parse_bool_word(value) < 0)
            throw Error(fail_prefix(where, name) + " wants true or false, got '" + std::string(value) + "'");
        value = parse_bool_word(value) ? "true" : "false";
        break;
    case OptionKind::Number:
        if (!value.empty() && !option_number_in(value, o->min_value, o->max_value))
            throw Error(fail_prefix(where, name) + " wants a number in " + option_number_range(*o) + ", got '" +
                        std::string(value) + "'");
        break;
    case OptionKind::Choice: {
        if (!matches_choice(o->choices, value))
            throw Error(fail_prefix(where, name) + " must be one of " + std::string(o->choices) + ", got '" +
                        std::string(value) + "'");
        int64_t n = 0; // a number a choice admits ("auto|[0-9]*") keeps the row's range, if it has one
        if (o->min_value < o->max_value && parse_int(value, n) && (n < o->min_value || n > o->max_value))
            throw Error(fail_prefix(where, name) + " must be auto or in " + std::to_string(o->min_value) + ".." +
                        std::to_string(o->max_value) + ", got " + std::to_string(n));
        break;
    }
    default:
        break;
    }
    values_[std::string(name)] = std::string(value);
}

const std::string& Settings::get(std::string_view name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw Error("config: no option named '" + std::string(name) + "'");
    return it->second;
}

int64_t Settings::get_int(std::string_view name) const { return option_integer(get(name)); }

bool Settings::get_bool(std::string_view name) const { return option_bool(get(name)); }

std::vector<Settings::Effective> Settings::effective() const {
    std::vector<Effective> out;
    for (const OptionSpec& o : kOptions) {
        if (o.flags & kOptionCliOnly) continue;
        const std::string& v = get(o.name);
        out.push_back({&o, (o.flags & kOptionSecret) && !v.empty() ? "<redacted>" : v, v == o.default_value});
    }
    return out;
}

std::string Settings::dump() const {
    std::ostringstream out;
    for (const Effective& e : effective()) out << e.option->name << " = " << e.value << "\n";
    return out.str();
}

std::string render_help(std::string_view program) {
    std::ostringstream out;
    out << "usage: " << program << " [OPTION...]\n\nninfer inference server: OpenAI-compatible HTTP API.\n"
        << "Every option except the CLI-only ones is also a key in /etc/ninfer/ninferd.conf\n"
        << "(key = value, the option's name without dashes). The command line wins.\n\n";
    for (const OptionSpec& o : kOptions) {
        if (o.flags & kOptionHidden) continue;
        std::string left = "--" + std::string(o.name);
        if (o.kind != OptionKind::Action && o.kind != OptionKind::Boolean) left += " " + std::string(o.value_name);
        out << "  " << left;
        out << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << o.help;
        if (!o.default_value.empty()) out << " [" << o.default_value << "]";
        if (o.kind == OptionKind::Integer && o.max_value != kNoLimit && o.min_value != o.max_value &&
            !(o.min_value == 0 && o.name == "port"))
            out << " (" << o.min_value << ".." << o.max_value << ")";
        if (o.flags & kOptionReloadable) out << " (SIGHUP)";
        out << "\n";
    }
    return out.str();
}

} // namespace ninfer::daemon
