// ninfer tests - open_regular_file / read_regular_file: regular files read, everything else
// (directory, FIFO, device, socket) refused by name, and a FIFO never blocks the opener.
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <future>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

using namespace ninfer;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        char name[] = "/tmp/ninfer-regular-file-XXXXXX";
        path = ::mkdtemp(name);
    }
    ~TempDir() { fs::remove_all(path); }
};

// The message read_regular_file throws for `path`, computed on another thread so that a blocking
// open fails the test instead of hanging it.
std::string refusal_of(const std::string& path) {
    auto result = std::async(std::launch::async, [path]() -> std::string {
        try {
            core::read_regular_file(path, "test");
        } catch (const Error& e) {
            return e.what();
        }
        return "accepted";
    });
    if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
        FAIL("read_regular_file blocked on " << path);
        result.get(); // unreachable: FAIL aborts the test case
    }
    return result.get();
}

} // namespace

TEST_CASE("a regular file is read whole, within its size bound", "[regular_file]") {
    TempDir dir;
    std::string file = (dir.path / "a.conf").string();
    std::ofstream(file) << "port = 1\n";
    CHECK(core::read_regular_file(file, "test") == "port = 1\n");
    CHECK_THROWS_WITH(core::read_regular_file(file, "test", 4), Catch::Contains("larger than 4 bytes"));
    CHECK_THROWS_WITH(core::read_regular_file((dir.path / "missing").string(), "test"),
                      Catch::Contains("missing: No such file or directory"));
}

TEST_CASE("directories, FIFOs, devices and sockets are refused without blocking", "[regular_file]") {
    TempDir dir;
    CHECK_THAT(refusal_of(dir.path.string()), Catch::Contains("not a regular file (a directory)"));
    std::string fifo = (dir.path / "fifo").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(refusal_of(fifo), Catch::Contains("test: " + fifo + ": not a regular file (a FIFO)"));
    CHECK_THAT(refusal_of("/dev/null"), Catch::Contains("not a regular file (a character device)"));

    std::string socket_path = (dir.path / "sock").string();
    int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path.c_str());
    REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    CHECK_THAT(refusal_of(socket_path), Catch::Contains("test: " + socket_path + ": "));
    CHECK(refusal_of(socket_path) != "accepted");
    ::close(s);
}

TEST_CASE("the descriptor open_regular_file returns reads normally (O_NONBLOCK cleared)", "[regular_file]") {
    TempDir dir;
    std::string file = (dir.path / "f").string();
    std::ofstream(file) << "xyz";
    struct stat st {};
    core::FileDescriptor fd = core::open_regular_file(file, "test", &st);
    CHECK(st.st_size == 3);
    CHECK((::fcntl(fd.get(), F_GETFL) & O_NONBLOCK) == 0);
    core::FileDescriptor moved = std::move(fd);
    CHECK(fd.get() == -1);
    char buf[4] = {};
    CHECK(::read(moved.get(), buf, 3) == 3);
    CHECK(std::string(buf) == "xyz");
}
