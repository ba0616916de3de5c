// ninfer::daemon - config files + command line -> Settings -> DaemonConfig.
#include "daemon/config_load.h"

#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <filesystem>
#include <optional>

namespace ninfer::daemon {
namespace {

constexpr size_t kMaxConfigFileBytes = size_t(16) << 20;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

void apply_file(Settings& settings, const std::string& path) {
    apply_config_text(settings, read_text_file(path), path);
}

} // namespace

std::string read_text_file(const std::string& path) {
    // A directory or FIFO named as a config or key file is refused, never read as empty (which
    // would apply defaults and drop api-key on SIGHUP) and never waited on.
    return core::read_regular_file(path, "config", kMaxConfigFileBytes);
}

std::vector<std::string> split_list(std::string_view text, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find(sep, start);
        std::string_view item = trim(text.substr(start, end == std::string_view::npos ? end : end - start));
        if (!item.empty()) out.emplace_back(item);
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    return out;
}

std::vector<std::string> read_key_file(const std::string& path) {
    std::vector<std::string> keys;
    for (const std::string& line : split_list(read_text_file(path), '\n'))
        if (line[0] != '#') keys.push_back(line);
    if (keys.empty()) throw Error("config: api-key-file " + path + " holds no key");
    return keys;
}

bool CommandLine::has_action(std::string_view name) const {
    return std::find(actions.begin(), actions.end(), name) != actions.end();
}

CommandLine parse_command_line(int argc, const char* const* argv) {
    CommandLine cli;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg.substr(0, 2) != "--")
            throw Error("config: command line: unexpected argument '" + std::string(arg) + "' (options start with --)");
        arg.remove_prefix(2);
        std::string name(arg.substr(0, arg.find('=')));
        std::optional<std::string> value;
        if (arg.find('=') != std::string_view::npos) value = std::string(arg.substr(arg.find('=') + 1));
        const OptionSpec* spec = find_option(name);
        if (!spec && name.rfind("no-", 0) == 0 && !value) {
            const OptionSpec* negated = find_option(name.substr(3));
            if (negated && negated->kind == OptionKind::Boolean) {
                cli.values.emplace_back(name.substr(3), "false");
                continue;
            }
        }
        if (!spec) throw Error("config: command line: unknown option '--" + name + "' (see --help)");
        if (spec->kind == OptionKind::Action) {
            if (value) throw Error("config: command line: option '--" + name + "' takes no value");
            cli.actions.push_back(name);
            continue;
        }
        if (!value) {
            if (spec->kind == OptionKind::Boolean) {
                value = "true";
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                throw Error("config: command line: option '--" + name + "' needs a value");
            }
        }
        cli.values.emplace_back(name, *value);
    }
    return cli;
}

void apply_config_text(Settings& settings, std::string_view text, std::string_view file_name) {
    size_t line_no = 0, start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = trim(text.substr(start, end - start));
        start = end + 1;
        ++line_no;
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        std::string where = std::string(file_name) + ":" + std::to_string(line_no);
        if (line.front() == '[') {
            if (line.back() != ']') throw Error("config: " + where + ": unterminated section header");
            continue;
        }
        size_t eq = line.find('=');
        if (eq == std::string_view::npos) throw Error("config: " + where + ": expected 'key = value'");
        std::string key(trim(line.substr(0, eq)));
        std::string_view value = trim(line.substr(eq + 1));
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
        const OptionSpec* spec = find_option(key);
        if (spec && (spec->flags & kOptionCliOnly))
            throw Error("config: " + where + ": option '" + key + "' is only accepted on the command line");
        settings.set(key, value, where);
    }
}

Settings load_settings(const CommandLine& cli, const std::string& default_config_path) {
    Settings settings;
    std::string config_path = default_config_path;
    bool explicit_config = false;
    for (const auto& [name, value] : cli.values)
        if (name == "config") config_path = value, explicit_config = true;
    namespace fs = std::filesystem;
    std::error_code ec;
    if (explicit_config || fs::exists(config_path, ec)) apply_file(settings, config_path);
    fs::path dropins = config_path + ".d";
    if (fs::is_directory(dropins, ec)) {
        std::vector<std::string> files;
        for (const auto& entry : fs::directory_iterator(dropins, ec))
            if (entry.path().extension() == ".conf") files.push_back(entry.path().string());
        std::sort(files.begin(), files.end());
        for (const std::string& f : files) apply_file(settings, f);
    }
    for (const auto& [name, value] : cli.values) settings.set(name, value, "command line");
    return settings;
}

DaemonConfig to_daemon_config(const Settings& s) {
    DaemonConfig c;
    for (const OptionSpec& o : option_table())
        if (o.field.store) o.field.store(c, s.get(o.name));
    if (c.artifact_path.empty()) throw Error("config: no artifact given (--artifact PATH or 'artifact = PATH')");
    if (c.kv_capacity_tokens && c.max_context && c.kv_capacity_tokens < c.max_context)
        throw Error("config: kv-capacity " + std::to_string(c.kv_capacity_tokens) +
                    " is below max-context " + std::to_string(c.max_context) + ": one request could never fit");
    return c;
}

std::string OptionChange::describe() const {
    if (option->flags & kOptionSecret) return std::string(option->name) + " changed";
    return std::string(option->name) + " changed from '" + was + "' to '" + now + "'";
}

ReloadResult apply_reload(DaemonConfig& running, Settings& running_settings, const Settings& next) {
    DaemonConfig converted = to_daemon_config(next);
    ReloadResult result;
    for (const OptionSpec& o : option_table()) {
        if (!o.field.copy) continue;
        const std::string& was = running_settings.get(o.name);
        const std::string& now = next.get(o.name);
        bool reloadable = o.flags & kOptionReloadable;
        if (reloadable) o.field.copy(running, converted);
        if (was == now) continue;
        (reloadable ? result.applied : result.needs_restart).push_back({&o, was, now});
        if (reloadable) running_settings.set(o.name, now, "reload");
    }
    return result;
}

} // namespace ninfer::daemon
