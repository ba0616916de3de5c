// ninfer::daemon - the one table of ninferd options and the settings parsed from it.
//
// Contract:
// - kOptions is the single source for the CLI parser, the config-file parser, --help,
//   --check-config, `ninferctl status` and the man page (render_options_scdoc). Every config key
//   is the long CLI option without its dashes.
// - Settings holds one validated text value per option (the table's default until a config file
//   or the CLI sets it). set() validates by kind (integer range, choice list, boolean words) and
//   throws ninfer::Error("config: <where>: ...") naming the option and the bad value.
// - Precedence: built-in default < /etc/ninfer/ninferd.conf (or --config FILE) < its .conf.d/*.conf
//   in lexical order < the CLI. See config_load.h.
// - Values of secret options (api-key) are never printed: dump() writes "<redacted>".
// Thread affinity: built on the main thread before the loop starts; read-only afterwards.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

namespace ninfer::daemon {

enum class OptionKind : uint8_t {
    Text,     // any string (paths, hosts, keys)
    Integer,  // decimal integer within [min_value, max_value]
    Boolean,  // true/false/yes/no/on/off/1/0; on the CLI `--name` alone means true
    Choice,   // one of `choices` ("a|b|c"); a trailing "*" on a choice accepts it as a prefix
    Action,   // CLI only, takes no value: --help, --version, --check-config
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
};

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
    // `key = value` lines for every config-file option, secrets redacted (--check-config).
    std::string dump() const;

  private:
    std::map<std::string, std::string, std::less<>> values_;
};

std::string render_help(std::string_view program);
std::string render_options_scdoc(); // OPTIONS section of ninferd(8) / ninferd.conf(5)

} // namespace ninfer::daemon
