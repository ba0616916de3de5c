// ninfer::daemon - build Settings from config files and the command line; the typed DaemonConfig.
//
// Contract:
// - parse_command_line(argc, argv) reads `--name value`, `--name=value`, a bare `--name` for
//   booleans (true) and `--no-name` (false), and records actions (--help, --version,
//   --check-config). Unknown options and missing values throw ninfer::Error("config: ...").
// - load_settings(cli) applies, in order: defaults, the main config file (cli's --config, else
//   /etc/ninfer/ninferd.conf if it exists), every FILE.d/*.conf in lexical order, then the CLI.
//   A file given with --config must exist. Every file read (config, drop-ins, key files) must be
//   a regular file: a directory or FIFO throws, so start-up and --check-config refuse it and
//   SIGHUP keeps the running settings (never defaults with api-key dropped). Files are `key = value` lines; `#`/`;` start comments;
//   `[section]` headers are accepted and ignored; keys are option names without dashes; an
//   unknown key is an error naming file:line.
// - to_daemon_config(settings) stores each table row's field (options.h) and checks the
//   cross-option rules (artifact required, api-key-file readable, kv-capacity >= max-context).
// - apply_reload is SIGHUP's work, also driven by the table (below).
#pragma once

#include "daemon/daemon_config.h"
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

// Every row's field stored from its text in table order, then the cross-option rules checked.
DaemonConfig to_daemon_config(const Settings& settings);

struct OptionChange {
    const OptionSpec* option;
    std::string was, now; // texts; describe() hides a secret's
    std::string describe() const; // "log-level changed from 'info' to 'debug'"; a secret: "api-key changed"
};
struct ReloadResult {
    std::vector<OptionChange> applied;       // reloadable rows whose text changed
    std::vector<OptionChange> needs_restart; // restart-only rows whose text changed: not applied
};
// SIGHUP: converts `next` (an invalid one throws ninfer::Error and changes nothing), then walks
// the table: every reloadable row's field is copied into `running` and its text into
// `running_settings` (a key file is re-read even if its name is unchanged); a restart-only row
// keeps its running value and text.
ReloadResult apply_reload(DaemonConfig& running, Settings& running_settings, const Settings& next);

} // namespace ninfer::daemon
