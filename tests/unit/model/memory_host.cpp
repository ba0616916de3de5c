// ninfer tests - host memory for the plan: a memory cgroup's limit lowers what the plan may use
// (v2 at every level up to the root, v1's memory controller, a container's own cgroup mounted as
// the root), its reclaimable file cache does not count as used, and no limit means no change.
#include "core/model/memory_plan.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>

using namespace ninfer::core;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();

struct FakeSysfs {
    fs::path root = fs::temp_directory_path() / ("ninfer-cgroup-" + std::to_string(::getpid()));
    FakeSysfs() { fs::remove_all(root); }
    ~FakeSysfs() { fs::remove_all(root); }
    void write(const std::string& rel, const std::string& text) const {
        fs::create_directories((root / rel).parent_path());
        std::ofstream(root / rel) << text;
    }
    uint64_t room(const std::string& proc_self_cgroup) const { return cgroup_memory_room(proc_self_cgroup, root.string()); }
};

} // namespace

TEST_CASE("memory_host: cgroup v2 limit minus the working set, the tightest level wins", "[memory_host]") {
    FakeSysfs s;
    const std::string unit = "system.slice/ninferd.service/";
    s.write(unit + "memory.max", std::to_string(1024 * kMiB) + "\n");
    s.write(unit + "memory.current", std::to_string(100 * kMiB) + "\n");
    s.write(unit + "memory.stat", "anon 1000\ninactive_file " + std::to_string(40 * kMiB) + "\nactive_file 7\n");
    s.write("system.slice/memory.max", "max\n");
    s.write("system.slice/memory.current", std::to_string(5000 * kMiB) + "\n");
    const std::string self = "0::/system.slice/ninferd.service\n";
    CHECK(s.room(self) == (1024 - 60) * kMiB);
    s.write("system.slice/memory.max", std::to_string(6000 * kMiB) + "\n"); // the slice has 1000 MiB left
    CHECK(s.room(self) == (1024 - 60) * kMiB);
    s.write("system.slice/memory.max", std::to_string(5500 * kMiB) + "\n"); // now only 500 MiB
    CHECK(s.room(self) == 500 * kMiB);
    s.write(unit + "memory.current", std::to_string(2000 * kMiB) + "\n"); // over the limit: no room
    CHECK(s.room(self) == 0);
    CHECK(s.room("0::/user.slice\n") == kNoLimit); // a cgroup without limits anywhere
}

TEST_CASE("memory_host: cgroup v1 memory controller, and a container's cgroup as the root", "[memory_host]") {
    FakeSysfs s;
    s.write("memory/memory.limit_in_bytes", "9223372036854771712\n"); // v1's "no limit"
    s.write("memory/memory.usage_in_bytes", "123\n");
    s.write("memory/ninfer-test/memory.limit_in_bytes", std::to_string(800 * kMiB) + "\n");
    s.write("memory/ninfer-test/memory.usage_in_bytes", std::to_string(10 * kMiB) + "\n");
    s.write("memory/ninfer-test/memory.stat", "cache 5\ntotal_inactive_file " + std::to_string(4 * kMiB) + "\n");
    CHECK(s.room("4:memory:/ninfer-test\n2:cpu,cpuacct:/\n") == (800 - 6) * kMiB);
    // Docker without a cgroup namespace: /proc/self/cgroup names the host's path, the mount holds
    // only the container's subtree.
    CHECK(s.room("4:memory:/docker/0123abcd/ninfer-test\n") == (800 - 6) * kMiB);
    CHECK(s.room("4:memory:/docker/0123abcd\n") == kNoLimit);
    CHECK(s.room("7:cpuset,memory:/ninfer-test\n") == (800 - 6) * kMiB); // controllers listed together
    CHECK(s.room("4:cpu:/ninfer-test\n0::/\n") == kNoLimit);                 // no memory controller line
    CHECK(s.room("") == kNoLimit);
}

TEST_CASE("memory_host: the host's available memory is MemAvailable at most", "[memory_host]") {
    std::ifstream meminfo("/proc/meminfo");
    std::string key, unit;
    uint64_t kib = 0, available = 0;
    while (meminfo >> key >> kib >> unit)
        if (key == "MemAvailable:") available = kib * 1024;
    REQUIRE(available > 0);
    CHECK(host_available_bytes() > 0);
    CHECK(host_available_bytes() <= available + 64 * kMiB); // MemAvailable moves between the reads
}
