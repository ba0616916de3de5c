// ninfer::daemon - the one table of ninferd options and the settings parsed from it.
//
// Contract:
// - kOptions (options.cpp) is the single source of every fact about an option: its name (the
//   long CLI option and the config-file key), kind and range or choices, default, the
//   DaemonConfig field it sets and how (OptionField, option_fields.h), whether SIGHUP reloads it,
//   and its help. From it come: the CLI and config-file parsers and their validation (Settings),
//   the defaults, to_daemon_config and apply_reload (config_load.h), --help (render_help), the
//   man page (render_options_scdoc, via --help-scdoc), --check-config's and `ninferctl status
//   --settings`' effective settings (Settings::effective). Nothing else lists options.
// - Settings holds one validated text value per option (the table's default until a config file
//   or the CLI sets it). set() validates by kind (integer range, choice list, boolean words) and
//   throws ninfer::Error("config: <where>: ...") naming the option and the bad value.
// - Precedence: built-in default < /etc/ninfer/ninferd.conf (or --config FILE) < its .conf.d/*.conf
//   in lexical order < the CLI. See config_load.h.
// - Values of secret options (api-key) are never printed: effective() and dump() show "<redacted>".
// Thread affinity: built on the main thread; the running copy is the loop thread's.
//
// How to add an option: add ONE row to kOptions in options.cpp (name, kind, default, range or
// choices, value name, help, flags, field maker), add the DaemonConfig member it sets
// (daemon_config.h), and write the code that uses that member. The flag kOptionReloadable makes
// SIGHUP apply it: do so only if every reader looks at DaemonContext::config each time (or
// Daemon::reload pushes it to its consumer, like log-level and the HTTP limits). Help, man page,
// config files, --check-config, status --settings and the tests (tests/unit/daemon/options*.cpp,
// which walk the table) pick the row up without further edits. A cross-option rule goes in
// to_daemon_config.
#pragma once

#include "daemon/option_fields.h"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::daemon {

enum class OptionKind : uint8_t {
    Text,     // any string (paths, hosts, keys)
    Integer,  // decimal integer within [min_value, max_value]
    Boolean,  // true/false/yes/no/on/off/1/0; on the CLI `--name` alone means true
    Choice,   // one of `choices` ("a|b|c"); a trailing "*" on a choice accepts it as a prefix;
              // "[0-9]*" a positive integer, within [min_value, max_value] when min < max
    Action,   // CLI only, takes no value: --help, --version, --check-config
    Number,   // "" (unset) or a decimal number within [min_value, max_value] thousandths
};

enum OptionFlags : uint8_t {
    kOptionReloadable = 1, // SIGHUP may change it without a restart
    kOptionCliOnly = 2,    // not accepted in a config file
    kOptionSecret = 4,     // value redacted in dumps and logs
    kOptionHidden = 8,     // left out of --help (test-only values)
};

struct OptionSpec {
    std::string_view name;
    OptionKind kind;
    std::string_view default_value; // as written in a config file; "" = unset
    int64_t min_value;
    int64_t max_value;
    std::string_view choices;    // Choice: "cpu|cuda"
    std::string_view value_name; // shown in --help: FILE, N, HOST
    std::string_view help;
    uint8_t flags;
    OptionField field; // the DaemonConfig member it sets; empty for config and the actions
};

// "LO..HI" of a Number row (its bounds are thousandths).
std::string option_number_range(const OptionSpec& o);


std::span<const OptionSpec> option_table();
const OptionSpec* find_option(std::string_view name);

class Settings {
  public:
    Settings(); // every option at its default
    // Validates and stores; `where` names the source for messages ("command line", "file:12").
    void set(std::string_view name, std::string_view value, std::string_view where);
    const std::string& get(std::string_view name) const;
    int64_t get_int(std::string_view name) const;
    bool get_bool(std::string_view name) const;
    bool is_set(std::string_view name) const { return !get(name).empty(); }

    struct Effective {
        const OptionSpec* option;
        std::string value; // "<redacted>" for a secret that is set
        bool is_default;
    };
    // Every config-file option in table order, secrets redacted (--check-config, status --settings).
    std::vector<Effective> effective() const;
    // `key = value` lines of effective() (--check-config).
    std::string dump() const;

  private:
    std::map<std::string, std::string, std::less<>> values_;
};

std::string render_help(std::string_view program);
// The table as scdoc (options_doc.cpp): ninfer-docgen splices these into man/*.scd.
std::string render_options_scdoc();         // every CLI option: ninferd(8) and --help-scdoc
std::string render_config_keys_scdoc();     // every config-file key: ninferd.conf(5)
std::string render_reloadable_keys_scdoc(); // "*a*, *b*": the keys SIGHUP applies
bool is_config_key(const OptionSpec& o);    // accepted in a config file and documented there
std::string choices_in_words(std::string_view choices); // "auto|[0-9]*" -> "auto, a positive integer"
std::string scdoc_escape(std::string_view text);        // `*`, `_`, `\` escaped
std::string scdoc_sentence(std::string_view help);      // escaped, capitalised, with a full stop

} // namespace ninfer::daemon
