// ninfer tests - the option table drives help, man page, effective settings, conversion and reload.
// Each test walks option_table(), so a new row is covered without editing this file.
#include "core/util/error.h"
#include "daemon/config_load.h"
#include "daemon/options.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace ninfer;
using namespace ninfer::daemon;

namespace {

std::string key_file_path() {
    auto path = std::filesystem::temp_directory_path() / "ninfer-option-table-keys";
    std::ofstream(path) << "# test keys\nkey-from-file\n";
    return path.string();
}

bool has_field(const OptionSpec& o) { return o.field.store != nullptr; }

// A valid value for `o` other than its default (what a config file could set).
std::string other_value(const OptionSpec& o) {
    switch (o.kind) {
    case OptionKind::Integer:
        return std::to_string(std::to_string(o.min_value) == o.default_value ? o.min_value + 1 : o.min_value);
    case OptionKind::Boolean:
        return o.default_value == "true" ? "false" : "true";
    case OptionKind::Number:
        return std::to_string(double(o.max_value) / 1000);
    case OptionKind::Choice: {
        std::string choices(o.choices);
        size_t start = 0;
        for (;;) {
            size_t bar = choices.find('|', start);
            std::string c = choices.substr(start, bar == std::string::npos ? bar : bar - start);
            if (c == "[0-9]*") return "1048576";
            if (c != o.default_value && c.find('*') == std::string::npos) return c;
            if (bar == std::string::npos) break;
            start = bar + 1;
        }
        FAIL("no alternative choice for " << o.name);
        return {};
    }
    default:
        return o.value_name == "FILE" ? key_file_path() : "other-" + std::string(o.name);
    }
}

Settings base_settings() {
    Settings s;
    s.set("artifact", "/models/m.ninfer", "test"); // the one option without a usable default
    return s;
}

bool contains(const std::vector<OptionChange>& changes, std::string_view name) {
    return std::any_of(changes.begin(), changes.end(), [&](const OptionChange& c) { return c.option->name == name; });
}

} // namespace

TEST_CASE("every row has help, a valid default, a field, and shows in --help, man page and settings",
          "[option_table]") {
    std::string help = render_help("ninferd");
    std::string scdoc = render_options_scdoc();
    Settings defaults;
    std::vector<Settings::Effective> effective = defaults.effective();
    size_t n_effective = 0;
    for (const OptionSpec& o : option_table()) {
        INFO("option " << o.name);
        CHECK_FALSE(o.help.empty());
        CHECK(std::count_if(option_table().begin(), option_table().end(),
                            [&](const OptionSpec& p) { return p.name == o.name; }) == 1);
        if (!(o.flags & kOptionHidden)) {
            CHECK(help.find("  --" + std::string(o.name) + " ") != std::string::npos);
            CHECK(scdoc.find("*--" + std::string(o.name) + "*") != std::string::npos);
        }
        if (o.kind == OptionKind::Action) continue;
        if (!o.default_value.empty()) {
            Settings s;
            CHECK_NOTHROW(s.set(o.name, o.default_value, "table default"));
            CHECK(s.get(o.name) == o.default_value); // stored as written: booleans in canonical words
        }
        // Every config-file option sets a DaemonConfig field; CLI-only ones (--config) set none.
        CHECK(has_field(o) == !(o.flags & kOptionCliOnly));
        CHECK((o.field.copy != nullptr) == has_field(o));
        if (o.flags & kOptionCliOnly) continue;
        REQUIRE(n_effective < effective.size());
        CHECK(effective[n_effective].option == &o); // status --settings: every row, table order
        CHECK(effective[n_effective].value == o.default_value);
        CHECK(effective[n_effective].is_default);
        ++n_effective;
    }
    CHECK(n_effective == effective.size());
}

TEST_CASE("defaults round-trip through the config-file syntax of --check-config", "[option_table]") {
    Settings base = base_settings();
    Settings reread;
    apply_config_text(reread, base.dump(), "dump");
    CHECK(reread.dump() == base.dump());
    CHECK(to_daemon_config(reread) == to_daemon_config(base));
}

TEST_CASE("each row's store and copy name the same DaemonConfig field", "[option_table]") {
    const Settings base = base_settings();
    const DaemonConfig base_config = to_daemon_config(base);
    for (const OptionSpec& o : option_table()) {
        if (!has_field(o)) continue;
        INFO("option " << o.name);
        Settings changed = base;
        std::string value = o.name == "artifact" ? "/models/other.ninfer" : other_value(o);
        changed.set(o.name, value, "test");
        DaemonConfig changed_config = to_daemon_config(changed);
        CHECK_FALSE(changed_config == base_config); // the row sets something
        DaemonConfig copied = base_config;
        o.field.copy(copied, changed_config);
        CHECK(copied == changed_config); // ...and exactly the member its copy moves
        // No other row's copy moves that member: two rows share one only where the table says so
        // (api-key and api-key-file both fill api_keys).
        for (const OptionSpec& other : option_table()) {
            if (!has_field(other) || &other == &o) continue;
            DaemonConfig by_other = base_config;
            other.field.copy(by_other, changed_config);
            bool shared = (o.name == "api-key" && other.name == "api-key-file") ||
                          (o.name == "api-key-file" && other.name == "api-key");
            CHECK((by_other == changed_config) == shared);
        }
    }
}

TEST_CASE("reload applies exactly the reloadable rows and reports the restart-only ones", "[option_table]") {
    const Settings start = base_settings();
    Settings next = start;
    Settings only_reloadable = start;
    for (const OptionSpec& o : option_table()) {
        if (!has_field(o) || o.name == "artifact") continue;
        next.set(o.name, other_value(o), "next");
        if (o.flags & kOptionReloadable) only_reloadable.set(o.name, other_value(o), "next");
    }
    DaemonConfig running = to_daemon_config(start);
    Settings running_settings = start;
    ReloadResult r = apply_reload(running, running_settings, next);

    CHECK(running == to_daemon_config(only_reloadable));
    CHECK(running_settings.dump() == only_reloadable.dump());
    size_t n_reloadable = 0, n_restart_only = 0;
    for (const OptionSpec& o : option_table()) {
        if (!has_field(o) || o.name == "artifact") continue;
        INFO("option " << o.name);
        bool reloadable = o.flags & kOptionReloadable;
        CHECK(contains(r.applied, o.name) == reloadable);
        CHECK(contains(r.needs_restart, o.name) == !reloadable);
        ++(reloadable ? n_reloadable : n_restart_only);
    }
    CHECK(r.applied.size() == n_reloadable);
    CHECK(r.needs_restart.size() == n_restart_only);
    CHECK(n_reloadable > 0);
    CHECK(n_restart_only > 0);
    for (const OptionChange& c : r.applied)
        if (c.option->flags & kOptionSecret) CHECK(c.describe() == std::string(c.option->name) + " changed");

    // Nothing changed: nothing reported; an invalid file changes nothing.
    ReloadResult again = apply_reload(running, running_settings, next);
    CHECK(again.applied.empty());
    CHECK(again.needs_restart.size() == n_restart_only); // still differ from what the process started with
    Settings broken = next;
    broken.set("max-context", "8192", "next");
    broken.set("kv-capacity", "100", "next"); // below max-context
    broken.set("log-level", "error", "next");
    DaemonConfig before = running;
    CHECK_THROWS_WITH(apply_reload(running, running_settings, broken), Catch::Contains("below max-context"));
    CHECK(running == before);
    CHECK(running_settings.get("log-level") == next.get("log-level"));
}

TEST_CASE("effective settings redact secrets and mark what differs from the default", "[option_table]") {
    Settings s = base_settings();
    s.set("api-key", "very-secret", "test");
    s.set("port", "9000", "test");
    bool saw_key = false, saw_port = false;
    for (const Settings::Effective& e : s.effective()) {
        CHECK(e.value.find("very-secret") == std::string::npos);
        if (e.option->name == "api-key") saw_key = e.value == "<redacted>" && !e.is_default;
        if (e.option->name == "port") saw_port = e.value == "9000" && !e.is_default;
    }
    CHECK(saw_key);
    CHECK(saw_port);
}
