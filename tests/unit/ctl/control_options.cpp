// ninfer tests - ninferctl control commands: global options anywhere, exit codes, never a hang.
#include "ctl/command_list.h"
#include "ctl/control_common.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace ninfer::ctl;

namespace {

int run(int (*cmd)(int, char**), std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return cmd(int(argv.size()), argv.data());
}

} // namespace

TEST_CASE("global options are taken from anywhere in the arguments", "[control_options]") {
    GlobalOptions g;
    std::vector<std::string> args = {"save", "--json", "1", "--socket", "/x.sock", "name", "--timeout=2.5"};
    take_global_options(args, g);
    CHECK(args == std::vector<std::string>{"save", "1", "name"});
    CHECK(g.json);
    CHECK(g.socket == "/x.sock");
    CHECK(g.timeout_s == 2.5);
    std::vector<std::string> bad = {"--timeout", "-1"};
    CHECK_THROWS_AS(take_global_options(bad, g), UsageError);
    std::vector<std::string> missing = {"--socket"};
    CHECK_THROWS_AS(take_global_options(missing, g), UsageError);
}

TEST_CASE("exit codes: usage 2, cannot connect 3", "[control_options]") {
    CHECK(run(cmd_slot, {"bogus"}) == 2);
    CHECK(run(cmd_slot, {"save", "0", "bad/name", "--socket", "/nonexistent.sock"}) == 2);
    CHECK(run(cmd_cache, {"evict", "--all", "KEY"}) == 2);
    CHECK(run(cmd_status, {"--socket", "/nonexistent/ninfer.sock"}) == 3);
    CHECK(run(cmd_drain, {"--socket=/nonexistent/ninfer.sock", "--timeout", "0.2"}) == 3);
}

TEST_CASE("a daemon that never answers costs the timeout, not a hang", "[control_options]") {
    std::string path = "/tmp/ninfer-ctl-test-" + std::to_string(::getpid()) + ".sock";
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    ::unlink(path.c_str());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd, 4) == 0); // accepted by the kernel, never read
    auto t0 = std::chrono::steady_clock::now();
    int rc = run(cmd_status, {"--socket", path, "--timeout", "0.3"});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(rc == 1);
    CHECK(s < 5.0); // generous: the point is that it returns
    ::close(fd);
    ::unlink(path.c_str());
}

TEST_CASE("artifact upgrade: usage 2, a file that is not v1/v2 refused with 1", "[control_options]") {
    CHECK(run(cmd_artifact, {}) == 2);
    CHECK(run(cmd_artifact, {"upgrade"}) == 2);
    CHECK(run(cmd_artifact, {"upgrade", "a", "b", "c"}) == 2);
    CHECK(run(cmd_artifact, {"upgrade", "/nonexistent/model.ninfer"}) == 1);
    CHECK(run(cmd_artifact, {"upgrade", "/proc/self/cmdline"}) == 1);
}
