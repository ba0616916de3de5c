// ninfer tests - option table, CLI and config-file parsing, precedence, help and scdoc output.
#include "core/util/error.h"
#include "daemon/config_load.h"
#include "daemon/options.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace ninfer;
using namespace ninfer::daemon;

namespace {

CommandLine cli(std::vector<const char*> args) {
    args.insert(args.begin(), "ninferd");
    return parse_command_line(int(args.size()), args.data());
}

std::filesystem::path temp_dir(const char* name) {
    auto dir = std::filesystem::temp_directory_path() / (std::string("ninfer-options-") + name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

} // namespace

TEST_CASE("defaults come from the table and every option has help", "[options]") {
    Settings s;
    CHECK(s.get("host") == "127.0.0.1");
    CHECK(s.get_int("port") == 8080);
    CHECK(s.get_int("max-concurrency") == 4);
    CHECK(s.get("max-context") == "auto");
    CHECK(s.get("kv-capacity") == "auto");
    for (const OptionSpec& o : option_table()) CHECK_FALSE(o.help.empty());
    std::string help = render_help("ninferd");
    CHECK(help.find("--max-concurrency N") != std::string::npos);
    CHECK(help.find("--help-scdoc") == std::string::npos);
    CHECK(render_options_scdoc().find("*--drain-timeout-s* _SECONDS_") != std::string::npos);
}

TEST_CASE("values are validated by kind and range with a message naming the option", "[options]") {
    Settings s;
    CHECK_THROWS_WITH(s.set("max-concurrency", "9", "command line"), Catch::Contains("'max-concurrency' must be in 1..8"));
    CHECK_THROWS_WITH(s.set("port", "eighty", "x"), Catch::Contains("wants an integer"));
    CHECK_THROWS_WITH(s.set("kv-dtype", "fp4", "x"), Catch::Contains("bf16|fp8|int8"));
    CHECK_THROWS_WITH(s.set("bogus", "1", "f.conf:3"), Catch::Contains("f.conf:3: unknown option 'bogus'"));
    s.set("kv-capacity", "65536", "x");
    CHECK_THROWS(s.set("kv-capacity", "-5", "x"));
    s.set("max-context", "16", "x"); // auto or a number in the row's range
    s.set("max-context", "auto", "x");
    CHECK_THROWS_WITH(s.set("max-context", "8", "x"), Catch::Contains("'max-context' must be auto or in 16..1048576, got 8"));
    CHECK_THROWS_WITH(s.set("max-context", "2000000", "x"), Catch::Contains("must be auto or in 16..1048576"));
    CHECK_THROWS_WITH(s.set("max-context", "big", "x"), Catch::Contains("must be one of auto|[0-9]*"));
    s.set("enable-thinking", "off", "x");
    CHECK_FALSE(s.get_bool("enable-thinking"));
    s.set("device", "script:/tmp/a.txt", "x");
    CHECK_THROWS(s.set("device", "tpu", "x"));
}

TEST_CASE("command line forms: --k v, --k=v, bare booleans, --no-, actions, errors", "[options]") {
    CommandLine c = cli({"--port", "9000", "--host=0.0.0.0", "--no-enable-thinking", "--check-config"});
    REQUIRE(c.values.size() == 3);
    CHECK(c.values[0] == std::pair<std::string, std::string>{"port", "9000"});
    CHECK(c.values[1].second == "0.0.0.0");
    CHECK(c.values[2] == std::pair<std::string, std::string>{"enable-thinking", "false"});
    CHECK(c.has_action("check-config"));
    CHECK_THROWS_WITH(cli({"--nope"}), Catch::Contains("unknown option '--nope'"));
    CHECK_THROWS_WITH(cli({"--port"}), Catch::Contains("needs a value"));
    CHECK_THROWS_WITH(cli({"stray"}), Catch::Contains("unexpected argument"));
}

TEST_CASE("config file, drop-ins in lexical order, then the CLI, each overriding", "[options]") {
    auto dir = temp_dir("precedence");
    auto main_conf = dir / "ninferd.conf";
    write(main_conf, "# comment\n[ninferd]\nport = 9001\nmax-pending = 5\nmodel-id = \"base\"\n");
    std::filesystem::create_directories(dir / "ninferd.conf.d");
    write(dir / "ninferd.conf.d" / "20-b.conf", "max-pending = 7\n");
    write(dir / "ninferd.conf.d" / "10-a.conf", "max-pending = 6\nlog-level = debug\n");
    write(dir / "ninferd.conf.d" / "ignored.txt", "bogus = 1\n");
    Settings s = load_settings(cli({"--config", main_conf.c_str(), "--log-level", "error"}));
    CHECK(s.get_int("port") == 9001);
    CHECK(s.get_int("max-pending") == 7);
    CHECK(s.get("model-id") == "base");
    CHECK(s.get("log-level") == "error");
}

TEST_CASE("config files reject unknown keys, CLI-only keys and bad lines with file:line", "[options]") {
    Settings s;
    CHECK_THROWS_WITH(apply_config_text(s, "port = 1\nfoo = 2\n", "a.conf"), Catch::Contains("a.conf:2: unknown option 'foo'"));
    CHECK_THROWS_WITH(apply_config_text(s, "check-config = 1\n", "a.conf"), Catch::Contains("only accepted on the command line"));
    CHECK_THROWS_WITH(apply_config_text(s, "\n\njust words\n", "b.conf"), Catch::Contains("b.conf:3: expected 'key = value'"));
    CHECK_THROWS_WITH(load_settings(cli({"--config", "/nonexistent/ninferd.conf"})),
                      Catch::Contains("/nonexistent/ninferd.conf: No such file or directory"));
    // The default path is optional.
    CHECK_NOTHROW(load_settings(cli({}), "/nonexistent/ninferd.conf"));
}

TEST_CASE("DaemonConfig: artifact required, key file read, secrets redacted, capacity check", "[options]") {
    Settings s;
    CHECK_THROWS_WITH(to_daemon_config(s), Catch::Contains("no artifact"));
    auto dir = temp_dir("keys");
    write(dir / "keys", "# keys\nk-one\n\nk-two\n");
    s.set("artifact", "/m.ninfer", "x");
    s.set("api-key", "secret-a", "x");
    s.set("api-key-file", (dir / "keys").string(), "x");
    s.set("max-body-mib", "2", "x");
    DaemonConfig c = to_daemon_config(s);
    CHECK(c.api_keys == std::vector<std::string>{"secret-a", "k-one", "k-two"});
    CHECK(c.max_body_bytes == 2u << 20);
    CHECK(s.dump().find("secret-a") == std::string::npos);
    CHECK(s.dump().find("api-key = <redacted>") != std::string::npos);
    s.set("kv-capacity", "100", "x");
    CHECK_NOTHROW(to_daemon_config(s)); // max-context auto: the plan fits the context to the pool
    s.set("max-context", "4096", "x");
    CHECK_THROWS_WITH(to_daemon_config(s), Catch::Contains("below max-context"));
}
