// ninfer::daemon - build Settings from config files and the command line; the typed DaemonConfig.
//
// Contract:
// - parse_command_line(argc, argv) reads `--name value`, `--name=value`, a bare `--name` for
//   booleans (true) and `--no-name` (false), and records actions (--help, --version,
//   --check-config). Unknown options and missing values throw ninfer::Error("config: ...").
// - load_settings(cli) applies, in order: defaults, the main config file (cli's --config, else
//   /etc/ninfer/ninferd.conf if it exists), every FILE.d/*.conf in lexical order, then the CLI.
//   A file given with --config must exist. Files are `key = value` lines; `#`/`;` start comments;
//   `[section]` headers are accepted and ignored; keys are option names without dashes; an
//   unknown key is an error naming file:line.
// - to_daemon_config(settings) converts to typed fields and checks cross-option rules
//   (artifact required, api-key-file readable, kv-capacity >= max-context).
#pragma once

#include "daemon/options.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ninfer::daemon {

struct CommandLine {
    std::vector<std::pair<std::string, std::string>> values; // option name -> value, in order
    std::vector<std::string> actions;                        // "help", "version", "check-config"
    bool has_action(std::string_view name) const;
};

CommandLine parse_command_line(int argc, const char* const* argv);
// Applies one config file's text (exposed for tests and --check-config of a single file).
void apply_config_text(Settings& settings, std::string_view text, std::string_view file_name);
Settings load_settings(const CommandLine& cli, const std::string& default_config_path = "/etc/ninfer/ninferd.conf");

struct DaemonConfig {
    std::string artifact_path;
    std::string host;
    int port = 8080;
    std::string model_id;
    std::string control_socket;
    std::string state_dir;
    uint64_t host_cache_mib = 4096; // prefix-cache host store (0 = none)
    bool persist_slots = false;     // lanes saved at stop, restored at start (slot_persist.h)
    std::string device;      // "auto", "cpu", "cuda" or "script:FILE"
    int threads = 0;
    uint32_t max_context = 8192;
    uint64_t kv_capacity_tokens = 0; // 0 = auto
    std::string kv_dtype;
    int max_concurrency = 4;
    uint32_t prefill_chunk = 1024;
    uint32_t default_max_tokens = 8192;
    uint32_t max_pending = 64;
    uint64_t pending_timeout_ms = 60000;
    uint32_t drain_timeout_s = 30;
    std::vector<std::string> api_keys;
    std::vector<std::string> cors_origins;
    uint64_t max_body_bytes = 64ull << 20;
    uint32_t max_header_bytes = 16u << 10;
    uint32_t max_connections = 1024;
    uint32_t header_timeout_s = 60;
    uint32_t idle_timeout_s = 75;
    bool enable_thinking = true;
    std::string log_level;
};

DaemonConfig to_daemon_config(const Settings& settings);

} // namespace ninfer::daemon
