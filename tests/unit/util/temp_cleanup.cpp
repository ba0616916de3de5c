// ninfer tests - a tool killed by SIGINT/SIGTERM mid-write leaves no temp file: the registered
// temps (AtomicFile's) are unlinked by the handler, the process still dies of that signal, a
// committed file stays, and the registry's slots are reused.
#include "core/util/file_io.h"
#include "core/util/temp_cleanup.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

using namespace ninfer::core;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& tag) {
    fs::path d = fs::temp_directory_path() / ("ninfer-temp-cleanup-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

size_t n_entries(const fs::path& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
}

// Runs body() in a child that installed the cleanup, then kills it with `sig` from inside;
// returns the wait status.
template <class F> int child_killed_by(int sig, F body) {
    pid_t pid = ::fork();
    if (pid == 0) {
        install_temp_cleanup_on_signals();
        body();
        ::raise(sig);
        ::_exit(3); // only if the signal did not end the process
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
}

} // namespace

TEST_CASE("temp_cleanup: an interrupted write leaves no temp, and the process dies of the signal", "[temp_cleanup]") {
    for (int sig : {SIGINT, SIGTERM}) {
        const fs::path dir = fresh_dir("killed");
        const int status = child_killed_by(sig, [&] {
            static AtomicFile* file = new AtomicFile((dir / "model.ninfer").string()); // never destroyed
            if (::write(file->fd(), "partial", 7) != 7) ::_exit(5);
            if (n_entries(dir) != 1) ::_exit(4); // the temp exists before the signal
        });
        CHECK(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == sig);
        CHECK(n_entries(dir) == 0);
        fs::remove_all(dir);
    }
}

TEST_CASE("temp_cleanup: a committed file stays; without the handler the temp would stay", "[temp_cleanup]") {
    const fs::path dir = fresh_dir("committed");
    const int status = child_killed_by(SIGINT, [&] {
        AtomicFile file((dir / "slot.nslot").string());
        if (::write(file.fd(), "whole", 5) != 5) ::_exit(5);
        file.commit();
    });
    CHECK(WIFSIGNALED(status));
    CHECK(n_entries(dir) == 1);
    CHECK(fs::exists(dir / "slot.nslot"));
    fs::remove_all(dir);

    // The control case: a child without the cleanup leaves the temp behind.
    const fs::path bare = fresh_dir("bare");
    pid_t pid = ::fork();
    if (pid == 0) {
        static AtomicFile* file = new AtomicFile((bare / "model.ninfer").string());
        (void)file;
        ::raise(SIGTERM);
        ::_exit(3);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    CHECK(n_entries(bare) == 1);
    fs::remove_all(bare);
}

TEST_CASE("temp_cleanup: the registry's slots run out and come back", "[temp_cleanup]") {
    std::vector<int> slots;
    for (int i = 0; i < kTempCleanupSlots; ++i) slots.push_back(temp_cleanup_register("/nonexistent/t" + std::to_string(i)));
    for (int s : slots) CHECK(s >= 0);
    CHECK(temp_cleanup_register("/nonexistent/one-too-many") == -1);
    CHECK(temp_cleanup_register(std::string(5000, 'x')) == -1);
    temp_cleanup_unregister(slots[3]);
    CHECK(temp_cleanup_register("/nonexistent/again") == slots[3]);
    temp_cleanup_unregister(slots[3]);
    for (int s : slots) temp_cleanup_unregister(s);
    temp_cleanup_unregister(-1); // a no-op
}
